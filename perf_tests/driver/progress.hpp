// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// distattn-run's progress line: every --progress seconds rank 0 prints to stderr
// which pass of the run it is in and how far that pass has got, so a run that
// hangs shows where. The step count comes from the executors' Kokkos Tools
// regions (DistAttn::step inside a pass region) when no tool library is loaded;
// a loaded tool owns the region callbacks, and the line then names the pass only.

#include <DistAttn/core/kokkos_compat.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

namespace DistAttn::Driver {

class Progress {
 public:
  /// Prints every `period_s` seconds while alive when `on` (rank 0, period > 0).
  /// Construct it before setting any other Kokkos Tools callback.
  Progress(double period_s, bool on) {
    if (!on || period_s <= 0) return;
    counting_ = !Kokkos::Tools::profileLibraryLoaded();
    if (counting_) {
      Kokkos::Tools::Experimental::set_push_region_callback(&on_push);
      Kokkos::Tools::Experimental::set_pop_region_callback(&on_pop);
    }
    t0_     = std::chrono::steady_clock::now();
    thread_ = std::thread([this, period_s] { loop(period_s); });
  }
  ~Progress() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
    if (counting_) {
      Kokkos::Tools::Experimental::set_push_region_callback(nullptr);
      Kokkos::Tools::Experimental::set_pop_region_callback(nullptr);
    }
  }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  /// The driver's position: `what` ("warm-up", "timed", ...) iteration i of n.
  void at(const char* what, int i, int n) {
    std::lock_guard<std::mutex> lock(mutex_);
    what_ = what;
    i_    = i;
    n_    = n;
  }

 private:
  void loop(double period_s) {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto period = std::chrono::duration<double>(period_s);
    while (!wake_.wait_for(lock, period, [this] { return stop_; })) {
      const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
      std::string line = "distattn-run: progress " + std::to_string(int(t)) + " s: " + what_ + " iteration " +
                         std::to_string(i_ + 1) + "/" + std::to_string(n_);
      {
        std::lock_guard<std::mutex> regions(region_mutex());
        if (!pass_name().empty())
          line += (in_pass() ? ", in " : ", after ") + pass_name() + " step " + std::to_string(steps().load());
      }
      std::fprintf(stderr, "%s\n", line.c_str());
      std::fflush(stderr);
    }
  }

  // Region callbacks are plain functions: their state is process-wide.
  static std::mutex& region_mutex() {
    static std::mutex m;
    return m;
  }
  static std::string& pass_name() {
    static std::string s;
    return s;
  }
  static std::atomic<int>& steps() {
    static std::atomic<int> n{0};
    return n;
  }
  static bool& in_pass() {
    static bool b = false;
    return b;
  }
  static int& depth() {
    static int d = 0;
    return d;
  }
  static void on_push(const char* name) {
    // The outermost region is the pass (a hybrid's inner pass nests in it).
    if (depth()++ == 0) {
      std::lock_guard<std::mutex> lock(region_mutex());
      pass_name() = name;
      in_pass()   = true;
      steps()     = 0;
    } else if (depth() == 2 && std::strcmp(name, "DistAttn::step") == 0) {
      ++steps();
    }
  }
  static void on_pop() {
    if (depth() > 0 && --depth() == 0) {
      std::lock_guard<std::mutex> lock(region_mutex());
      in_pass() = false;
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_     = false;
  bool counting_ = false;
  std::string what_ = "setup";
  int i_ = 0, n_ = 0;
  std::chrono::steady_clock::time_point t0_{};
  std::thread thread_;
};

}  // namespace DistAttn::Driver
