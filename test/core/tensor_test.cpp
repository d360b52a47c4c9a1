#include <gtest/gtest.h>

#include <cstdint>

#include "hetrain/cuda.hpp"
#include "hetrain/error.hpp"
#include "hetrain/tensor.hpp"

using namespace hetrain;

TEST(Tensor, OwningIsZeroedAndAligned) {
  Tensor t({2, 3, 5});
  EXPECT_EQ(t.numel(), 30);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u);
  for (int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(t[i], 0.0f);
}

TEST(Tensor, SliceAndReshapeShareMemory) {
  Tensor t({4, 3});
  for (int64_t i = 0; i < 12; ++i) t[i] = float(i);
  Tensor s = t.slice0(1, 3);
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_EQ(s[0], 3.0f);
  s[0] = 99.0f;
  EXPECT_EQ(t[3], 99.0f);
  Tensor r = t.reshape({12});
  EXPECT_EQ(r[3], 99.0f);
  EXPECT_THROW(t.reshape({5}), Error);
  EXPECT_THROW(t.slice0(2, 5), Error);
}

TEST(Tensor, CloneIsDeep) {
  Tensor t({3});
  t.fill(2.0f);
  Tensor c = t.clone();
  t[0] = 0.0f;
  EXPECT_EQ(c[0], 2.0f);
}

TEST(Tensor, ToAndCopyFromOnTheCpu) {
  Tensor t({2, 2});
  t.fill(3.0f);
  Tensor same = t.to(Device::CPU);
  EXPECT_EQ(same.data(), t.data());  // already there: the same handle, no copy
  Tensor other({4});
  other.copy_from(t);
  EXPECT_EQ(other[3], 3.0f);
  other.zero();
  EXPECT_EQ(other[3], 0.0f);
  EXPECT_THROW(other.copy_from(Tensor({3})), Error);
}

// Where no GPU answers (always in CI), asking for device memory is a clear error, not a crash.
TEST(Tensor, CudaTensorWithoutAGpuIsAnError) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present: covered by test_gpu";
  try {
    Tensor t({4}, Device::CUDA);
    FAIL() << "allocating device memory without a GPU must throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find("without CUDA") != std::string::npos || what.find("cudaMalloc") != std::string::npos)
        << what;
  }
}

TEST(Error, CarriesLocationAndMessage) {
  try {
    HT_CHECK(1 + 1 == 3, "arithmetic is ", "broken");
    FAIL() << "HT_CHECK did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "arithmetic is broken");
    EXPECT_NE(std::string(e.file()).find("tensor_test.cpp"), std::string::npos);
    EXPECT_GT(e.line(), 0);
    // A user's error reads without the source location (main() adds it for --verbose).
    EXPECT_EQ(std::string(e.what()), "arithmetic is broken");
  }
}

TEST(Error, InternalErrorsKeepTheirLocation) {
  for (const std::string& message : {std::string("internal: a broken invariant"),
                                     std::string("MPI call MPI_Barrier(comm) failed: MPI_ERR_COMM")}) {
    try {
      HT_THROW(message);
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(message + " [tensor_test.cpp:", 0), 0u) << what;
      EXPECT_EQ(what.back(), ']') << what;
    }
  }
}
