// data/sample_threads.hpp — runs a per-sample function over a batch on a few threads (the data path's
// stages have their own thread counts, apart from the OpenMP pool the model's layers use).
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace hetrain::data {

// fn(i) for i in [0, n), samples split into `threads` contiguous ranges (the calling thread takes the
// first). The first exception thrown is rethrown here after every thread has finished.
template <typename Fn>
void for_each_sample(int64_t n, int threads, Fn fn) {
  std::exception_ptr error;
  std::mutex mu;
  auto work = [&](int64_t begin, int64_t end) {
    try {
      for (int64_t i = begin; i < end; ++i) fn(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
    }
  };
  const int t = int(std::max<int64_t>(1, std::min<int64_t>(threads, n)));
  std::vector<std::thread> pool;
  for (int k = 1; k < t; ++k) pool.emplace_back(work, n * k / t, n * (k + 1) / t);
  work(0, n / t);
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace hetrain::data
