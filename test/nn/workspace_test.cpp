// nn::Workspace's buffer pool: a buffer is never handed out twice while someone holds it, a released one
// is reused (smallest that fits), a repeated request pattern stops allocating, and a batch that changes
// leaves one set of buffers, not one per size (resnet20 at batch 8, then 16, then 4).
#include <gtest/gtest.h>

#include "hetrain/nn.hpp"
#include "nn/layer.hpp"

namespace hetrain::nn {
namespace {

TEST(WorkspacePool, HeldBuffersAreDistinctAndReleasedOnesReused) {
  Workspace ws;
  Tensor a = ws.acquire({2, 3, 4});
  Tensor b = ws.acquire({2, 3, 4});
  EXPECT_EQ(a.shape(), (Shape{2, 3, 4}));
  EXPECT_NE(a.data(), b.data());  // both held: different memory
  EXPECT_EQ(ws.pooled_floats(), 48);
  float* pa = a.data();
  a = Tensor();                    // released
  Tensor c = ws.acquire({4, 6});   // same size: gets a's memory back
  EXPECT_EQ(c.data(), pa);
  EXPECT_EQ(ws.pooled_floats(), 48);
}

TEST(WorkspacePool, SmallestFreeBufferThatFitsIsChosen) {
  Workspace ws;
  Tensor big = ws.acquire({100});
  Tensor mid = ws.acquire({40});
  float* pbig = big.data();
  float* pmid = mid.data();
  big = Tensor();
  mid = Tensor();
  Tensor s = ws.acquire({30});  // fits both: takes the 40
  EXPECT_EQ(s.data(), pmid);
  Tensor t = ws.acquire({50});  // only the 100 fits
  EXPECT_EQ(t.data(), pbig);
  Tensor u = ws.acquire({10});  // nothing free: new buffer
  EXPECT_NE(u.data(), pbig);
  EXPECT_NE(u.data(), pmid);
  EXPECT_EQ(ws.pooled_floats(), 150);
}

TEST(WorkspacePool, ViewsKeepTheBufferBusy) {
  Workspace ws;
  Tensor a = ws.acquire({8, 2});
  Tensor v = a.reshape({16});
  float* pa = a.data();
  a = Tensor();  // a reshaped handle still holds the memory
  Tensor b = ws.acquire({16});
  EXPECT_NE(b.data(), pa);
}

TEST(WorkspacePool, RepeatedPatternStopsGrowing) {
  Workspace ws;
  auto step = [&] {
    std::vector<Tensor> kept;
    for (int i = 1; i <= 6; ++i) kept.push_back(ws.acquire({int64_t(10 * i)}));  // "forward"
    for (int i = 6; i >= 1; --i) {                                                  // "backward"
      Tensor g = ws.acquire({int64_t(10 * i)});
      kept.pop_back();
    }
  };
  step();
  const int64_t after_one = ws.pooled_floats();
  for (int k = 0; k < 3; ++k) step();
  EXPECT_EQ(ws.pooled_floats(), after_one);
}

// After the batch grows, the buffers of the old size go one step later: the pool holds about one step's set
// (what the memory cap assumes), not one set per batch size seen. Smaller requests may keep using larger
// free buffers, so a shrinking batch keeps the largest set it had, and no more. A steady run keeps its own.
TEST(WorkspacePool, AGrowingBatchReleasesTheOldSizesBuffers) {
  auto pooled_after = [](const std::vector<int64_t>& batches) {
    ModelConfig c;
    c.name = "resnet20", c.in_channels = 3, c.height = c.width = 16, c.num_classes = 10;
    auto model = Model::create(c);
    model->init(1);
    for (int64_t b : batches) {
      Tensor out = model->forward(Tensor({b, 3, 16, 16}), true);
      model->backward(Tensor(out.shape()));
    }
    return model->pooled_floats();
  };
  const int64_t sixteen = pooled_after({16, 16});
  EXPECT_EQ(pooled_after({16, 16, 16, 16}), sixteen) << "a steady run grew or shrank its pool";
  const int64_t grown = pooled_after({4, 4, 8, 8, 16, 16});
  EXPECT_LE(grown, sixteen * 21 / 20) << "the buffers of batches 4 and 8 outlived the change to 16";
  EXPECT_LE(pooled_after({16, 16, 4, 4}), sixteen);
}

}  // namespace
}  // namespace hetrain::nn
