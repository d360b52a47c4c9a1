// test/ops/tensor_op_test_util.hpp — helpers for the tests of the Tensor-level op units (src/ops/<op>/):
// host tensors from values and back, the one-line error an entry point throws, a thread count for one
// call, and the check that a gradient check is sharp enough to fail.
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <functional>
#include <string>
#include <vector>

#include "hetrain/error.hpp"
#include "hetrain/tensor.hpp"
#include "op_test_util.hpp"

namespace ops_test {

inline hetrain::Tensor tensor_of(const hetrain::Shape& shape, const std::vector<float>& v) {
  hetrain::Tensor t(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = v[size_t(i)];
  return t;
}
inline hetrain::Tensor filled(const hetrain::Shape& shape, float v) {
  hetrain::Tensor t(shape);
  t.fill(v);
  return t;
}
inline std::vector<float> values(const hetrain::Tensor& t) {
  return std::vector<float>(t.data(), t.data() + t.numel());
}

// Runs f and requires a hetrain::Error whose message starts with "<op>:" and contains `part`.
template <typename F>
void expect_error(const std::string& op, const std::string& part, F f) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one from " << op << " about '" << part << "'";
  } catch (const hetrain::Error& e) {
    EXPECT_EQ(e.message().rfind(op + ": ", 0), 0u) << e.what();
    EXPECT_NE(e.message().find(part), std::string::npos) << e.what();
  }
}

// Runs f with n OpenMP threads, then restores the previous count.
template <typename F>
void with_threads(int n, F f) {
  const int keep = omp_get_max_threads();
  omp_set_num_threads(n);
  f();
  omp_set_num_threads(keep);
}

// The check is sharp enough to see a wrong gradient: an error of 1e-3 in one element is flagged, once.
inline void expect_sharp(std::vector<double>& x, std::vector<double> analytic, const std::function<double()>& loss) {
  analytic[analytic.size() / 2] += 1e-3;
  EXPECT_EQ(compare_gradient(x, analytic, loss).bad, 1u) << "a wrong gradient passed the check";
}

}  // namespace ops_test
