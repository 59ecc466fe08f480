// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <DistAttn/comm/mpi/check.hpp>
#include <DistAttn/comm/mpi/staging.hpp>

#include <climits>

namespace DistAttn::Impl {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "unknown MPI error";
  return std::string(text, std::size_t(len));
}

void throw_mpi_error(const char* call, const std::string& where, int code) {
  std::ostringstream os;
  os << where << ": " << call << " failed: " << mpi_error_string(code) << " (MPI error " << code << ")";
  throw CommunicationError(os.str());
}

MpiBytes::MpiBytes(std::size_t bytes, const char* where) {
  if (bytes <= std::size_t(INT_MAX)) {
    count_ = int(bytes);
    return;
  }
  // Messages above 2 GiB: count whole blocks of a contiguous type. A power-of-two
  // block that divides the size exists for every View of 2^k-byte elements.
  for (std::size_t block = 2; block <= (std::size_t(1) << 30); block *= 2) {
    if (bytes % block == 0 && bytes / block <= std::size_t(INT_MAX)) {
      DISTATTN_MPI_CHECK(MPI_Type_contiguous(int(block), MPI_BYTE, &type_), where);
      derived_ = true;
      DISTATTN_MPI_CHECK(MPI_Type_commit(&type_), where);
      count_ = int(bytes / block);
      return;
    }
  }
  DISTATTN_REQUIRE(false, where,
                   "a message of " << bytes << " bytes cannot be described with an int count; "
                                   << "split it or use a size divisible by a power of two");
}

MpiBytes::~MpiBytes() {
  if (derived_) MPI_Type_free(&type_);
}

}  // namespace DistAttn::Impl
