// test/ops/nan_rules_test.cpp — every op on the CPU propagates NaN and Inf as PyTorch does: the rules of
// test/support/nan_rules.hpp, walked over the op registry (test/gpu/nan_rules_test.cpp runs them on CUDA).
// And YOLOv5's loss, which is no dispatch table: a NaN logit anywhere gives a NaN loss, as in PyTorch.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "../support/nan_rules.hpp"
#include "detect/yolo_loss.hpp"

using namespace hetrain;

TEST(NanRules, EveryCpuOpPropagatesNanAsPyTorch) {
  const int ran = nan_rules::check_registered_ops(Device::CPU);
  EXPECT_EQ(ran, int(nan_rules::rules().size())) << "every op has a CPU slot, so every rule runs on the CPU";
}

// YOLOv5's ComputeLoss on a NaN in one logit of a row: the matched row's box (x, w), objectness or class
// logit makes lbox, lobj or lcls NaN (sigmoid, CIoU's min/max and clamp(0), BCE all pass NaN in PyTorch);
// an unmatched row's objectness makes lobj NaN. The gradient then holds NaN too.
TEST(NanRules, YoloLossOfANanLogitIsNan) {
  detect::DetectHeadSpec s;
  s.num_classes = 2;
  s.anchors_per_level = 1;
  s.strides = {8};
  s.anchors = {8, 8};
  s.image_h = s.image_w = 16;
  const detect::YoloLoss loss(s, detect::YoloLossConfig());
  data::BoxList targets;
  targets.offsets = {0, 1};
  const std::array<float, 5> box = {0, 0.25f, 0.25f, 0.5f, 0.5f};  // matches row 0 (cell (0, 0)) only
  targets.rows.assign(box.begin(), box.end());
  const int no = s.outputs();
  std::vector<float> clean(size_t(s.rows_per_image() * no), 0.0f);
  std::vector<float> dpred(clean.size());
  const auto ok = loss.compute(clean.data(), 1, targets, dpred.data(), 1.0f);
  ASSERT_EQ(ok.matched, 1);
  ASSERT_TRUE(std::isfinite(ok.total));
  struct Case {
    const char* what;
    int index;
  };
  for (const Case& c : {Case{"matched row, x logit", 0}, Case{"matched row, w logit", 2},
                        Case{"matched row, objectness", 4}, Case{"matched row, class 1", 6},
                        Case{"unmatched row, objectness", 3 * no + 4}, Case{"unmatched row, x logit", 3 * no}}) {
    std::vector<float> pred = clean;
    pred[size_t(c.index)] = nan_rules::kNaN;
    const auto res = loss.compute(pred.data(), 1, targets, dpred.data(), 1.0f);
    // An unmatched row's box logits feed nothing in YOLOv5 (only its objectness is read): finite there.
    const bool feeds = c.index != 3 * no;
    EXPECT_EQ(std::isnan(res.total), feeds) << "yolo loss with a NaN in the " << c.what << ": total " << res.total
                                            << (feeds ? "; PyTorch gives nan" : "; PyTorch reads no such logit");
    bool grad_nan = false;
    for (float g : dpred) grad_nan = grad_nan || std::isnan(g);
    EXPECT_EQ(grad_nan, feeds) << "yolo loss gradient with a NaN in the " << c.what;
  }
}
