// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// DISTATTN_MEMORY_LIMIT: bytes as an integer, a decimal number or a number with a
// unit; anything else is an InvalidArgument naming the variable and its value,
// never a silent "no limit" or "1 byte".

#include <DistAttn/executor/memory_plan.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace DistAttn::Test {
namespace {

/// Impl::memory_limit(0) with DISTATTN_MEMORY_LIMIT set to `value` (restored after).
std::size_t limit_from_environment(const char* value) {
  const char* old          = std::getenv("DISTATTN_MEMORY_LIMIT");
  const std::string before = old ? old : "";
  ::setenv("DISTATTN_MEMORY_LIMIT", value, 1);
  struct Restore {
    bool had;
    std::string v;
    ~Restore() { had ? (void)::setenv("DISTATTN_MEMORY_LIMIT", v.c_str(), 1) : (void)::unsetenv("DISTATTN_MEMORY_LIMIT"); }
  } restore{old != nullptr, before};
  return Impl::memory_limit(0);
}

std::string error_for(const char* value) {
  try {
    limit_from_environment(value);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "no error";
}

TEST(MemoryLimit, IntegersNumbersAndUnits) {
  const std::size_t K = 1024, M = K * K, G = M * K, T = G * K;
  EXPECT_EQ(limit_from_environment("4096"), 4096u);
  EXPECT_EQ(limit_from_environment("1e9"), 1000000000u);
  EXPECT_EQ(limit_from_environment("2.5e3"), 2500u);
  EXPECT_EQ(limit_from_environment("1G"), G);
  EXPECT_EQ(limit_from_environment("1g"), G);
  EXPECT_EQ(limit_from_environment("1GiB"), G);
  EXPECT_EQ(limit_from_environment("1GB"), 1000000000u);
  EXPECT_EQ(limit_from_environment("512MiB"), 512 * M);
  EXPECT_EQ(limit_from_environment("512M"), 512 * M);
  EXPECT_EQ(limit_from_environment("64K"), 64 * K);
  EXPECT_EQ(limit_from_environment("64kB"), 64000u);
  EXPECT_EQ(limit_from_environment("2T"), 2 * T);
  EXPECT_EQ(limit_from_environment("1.5G"), G + G / 2);
  EXPECT_EQ(limit_from_environment("100B"), 100u);
  EXPECT_EQ(limit_from_environment("0100"), 100u);  // decimal, not octal
  EXPECT_EQ(limit_from_environment("18446744073709551615"), std::size_t(-1));
  // Unset or empty: no limit; ExecutorOptions::memory_limit_bytes wins over the variable.
  EXPECT_EQ(limit_from_environment(""), 0u);
  ::setenv("DISTATTN_MEMORY_LIMIT", "abc", 1);
  EXPECT_EQ(Impl::memory_limit(777), 777u);
  ::unsetenv("DISTATTN_MEMORY_LIMIT");
  EXPECT_EQ(Impl::memory_limit(0), 0u);
}

TEST(MemoryLimit, MalformedValuesAreRejectedNamingTheVariable) {
  for (const char* bad : {"abc", "-1", "+5", "1Q", "1GiBx", "G", "1 G", " 100", "0x100", "1e", "inf", "nan", "0",
                          "0.5", "1e30", "18446744073709551616", "1..5", "1e9.5", "20000000T"}) {
    const std::string msg = error_for(bad);
    EXPECT_NE(msg.find("DISTATTN_MEMORY_LIMIT"), std::string::npos) << bad << ": " << msg;
    EXPECT_NE(msg.find(std::string("'") + bad + "'"), std::string::npos) << bad << ": " << msg;
  }
}

}  // namespace
}  // namespace DistAttn::Test
