#include <gtest/gtest.h>

#include <cstdint>

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

TEST(Error, CarriesLocationAndMessage) {
  try {
    HT_CHECK(1 + 1 == 3, "arithmetic is ", "broken");
    FAIL() << "HT_CHECK did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "arithmetic is broken");
    EXPECT_NE(std::string(e.what()).find("tensor_test.cpp:"), std::string::npos);
  }
}
