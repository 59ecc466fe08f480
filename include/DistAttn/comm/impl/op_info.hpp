// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file comm/impl/op_info.hpp
/// What a posted operation is, kept by requests for diagnostics.

#include <cstddef>
#include <string>

namespace DistAttn::Impl {

/// peer < 0 marks a collective; bytes is then the per-rank block.
struct OpInfo {
  const char* op    = "";
  int peer          = -1;
  int tag           = -1;
  std::size_t bytes = 0;
};

/// "irecv from peer 1 (tag 7, 64 bytes)", "all_gather on all ranks (256 bytes per rank)".
std::string describe(const OpInfo& info);

}  // namespace DistAttn::Impl
