#include <gtest/gtest.h>

#include "hetrain/error.hpp"
#include "hetrain/nn.hpp"

using namespace hetrain;
using namespace hetrain::nn;

TEST(ParamBuffer, DeclareFinalizeViews) {
  ParamBuffer pb;
  EXPECT_EQ(pb.declare("a.weight", {2, 3}, ParamKind::LinearWeight), 0);
  EXPECT_EQ(pb.declare("a.bias", {2}, ParamKind::Bias), 1);
  EXPECT_EQ(pb.declare_state("bn.running_var", {4}, 1.0f), 0);
  EXPECT_THROW(pb.param(0), Error);  // not finalized yet
  pb.finalize();
  EXPECT_TRUE(pb.finalized());
  // Each parameter starts on a 64-float boundary: the bias after the 6-float weight at 64.
  EXPECT_EQ(pb.count(), 66);
  EXPECT_EQ(pb.parameters(), 8);
  EXPECT_EQ(pb.state_count(), 4);
  EXPECT_EQ(pb.specs()[1].offset, 64);
  EXPECT_EQ(pb.find("a.bias"), 1);
  EXPECT_EQ(pb.find("nope"), -1);
  EXPECT_EQ(pb.find_state("bn.running_var"), 0);
  EXPECT_EQ(pb.find_state("a.bias"), -1);

  // Views alias the flat buffers.
  pb.param(1)[1] = 5.0f;
  EXPECT_EQ(pb.values()[65], 5.0f);
  for (int64_t i = 6; i < 64; ++i) EXPECT_EQ(pb.values()[i], 0.0f) << i;
  pb.grad(0)[0] = 3.0f;
  EXPECT_EQ(pb.grads()[0], 3.0f);
  EXPECT_EQ(pb.param(0).shape(), (Shape{2, 3}));
  EXPECT_EQ(pb.states()[3], 1.0f);  // declared initial value
  pb.state(0)[3] = 7.0f;
  pb.reset_states();
  EXPECT_EQ(pb.states()[3], 1.0f);
}

TEST(ParamBuffer, RejectsMisuse) {
  ParamBuffer pb;
  pb.declare("w", {1}, ParamKind::LinearWeight);
  EXPECT_THROW(pb.declare("w", {1}, ParamKind::Bias), Error);         // duplicate
  EXPECT_THROW(pb.declare_state("w", {1}, 0.0f), Error);              // duplicate across kinds
  pb.finalize();
  EXPECT_THROW(pb.declare("v", {1}, ParamKind::Bias), Error);         // after finalize
  EXPECT_THROW(pb.finalize(), Error);
  EXPECT_THROW(pb.param(1), Error);
}
