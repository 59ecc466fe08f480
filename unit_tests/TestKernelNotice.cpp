// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The portable-fallback notice (impl/kernel_notice.hpp): one line per reason and
// process, naming the reason, and silence on repeats, so a run that falls off the
// tuned kernels says so once instead of never or on every tile.

#include <DistAttn/impl/kernel_notice.hpp>

#include <gtest/gtest.h>

#include <string>

namespace DistAttn {
namespace {

TEST(KernelNotice, OncePerReason) {
  testing::internal::CaptureStderr();
  EXPECT_TRUE(Impl::note_portable_fallback("head_dim 256"));
  EXPECT_FALSE(Impl::note_portable_fallback("head_dim 256"));
  EXPECT_TRUE(Impl::note_portable_fallback("key windows"));
  EXPECT_FALSE(Impl::note_portable_fallback("key windows"));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("head_dim 256"), err.rfind("head_dim 256")) << err;  // once
  EXPECT_NE(err.find("head_dim 256"), std::string::npos) << err;
  EXPECT_NE(err.find("key windows"), std::string::npos) << err;
  EXPECT_NE(err.find("portable kernels"), std::string::npos) << err;
}

}  // namespace
}  // namespace DistAttn
