// The trainer's detection loss (src/train/detection.cpp): --label-smoothing reaches YOLOv5's class targets.
#include <gtest/gtest.h>

#include <vector>

#include "../support/checks.hpp"
#include "detect/yolo_loss.hpp"
#include "train/detection.hpp"

using namespace hetrain;
using namespace hetrain::train;

TEST(DetectionLoss, TakesLabelSmoothingForItsClassTargets) {
  const detect::DetectHeadSpec head = detect::yolov5_head(3, 64, 64);
  DetectionLoss plain(head), smoothed(head, 0.1f);
  EXPECT_EQ(plain.yolo().config().label_smoothing, 0.0f);
  EXPECT_EQ(smoothed.yolo().config().label_smoothing, 0.1f);
  EXPECT_EQ(smoothed.yolo().config().cls_gain, plain.yolo().config().cls_gain) << "the gains are scaled alike";

  // One image, one box of class 1; logits away from 0 (where a BCE does not depend on its target).
  const int64_t rows = head.rows_per_image(), outputs = head.outputs();
  const std::vector<float> values = test_support::random_vec<float>(size_t(rows * outputs), 7, -3.0, 3.0);
  Tensor pred({1, rows, outputs});
  for (int64_t i = 0; i < pred.numel(); ++i) pred[i] = values[size_t(i)];
  data::BoxList boxes;
  boxes.rows = {1.0f, 0.5f, 0.5f, 0.3f, 0.4f};
  boxes.offsets = {0, 1};
  double loss_plain = 0, loss_smoothed = 0;
  plain.loss_and_gradient(pred, boxes, &loss_plain);
  smoothed.loss_and_gradient(pred, boxes, &loss_smoothed);
  EXPECT_NE(loss_plain, loss_smoothed);
  // The unsmoothed validation loss is the training loss without smoothing.
  EXPECT_DOUBLE_EQ(plain.loss_sum(pred, boxes), loss_plain);
}
