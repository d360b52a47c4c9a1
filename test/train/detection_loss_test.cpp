// The trainer's detection loss and inputs (src/train/detection.cpp): --label-smoothing reaches YOLOv5's class
// targets; a detector's batches are pixels / 255.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "../support/checks.hpp"
#include "detect/yolo_loss.hpp"
#include "train/batch_source.hpp"
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

// A detector's batches are pixels / 255, as YOLOv5 feeds its models (docs/detection.md, "Input scaling"):
// the same samples from a source left with the data's statistics are (x/255 − mean)/std.
TEST(DetectionInputs, ArePixelsOver255) {
  auto standardised = make_synthetic_source(4, 3, 8, 8, 5, 3, 0, SourceOptions());
  auto scaled = make_synthetic_source(4, 3, 8, 8, 5, 3, 0, SourceOptions());
  scale_detector_inputs(*scaled);
  const std::vector<float> mean = standardised->info().mean, std = standardised->info().std;
  ASSERT_NE(mean[0], 0.0f);
  EXPECT_EQ(scaled->info().mean, std::vector<float>(3, 0.0f));
  EXPECT_EQ(scaled->info().std, std::vector<float>(3, 1.0f));
  standardised->submit({0, 3}, false, 0);
  scaled->submit({0, 3}, false, 0);
  const data::Batch a = standardised->next(), b = scaled->next();
  ASSERT_EQ(a.images.numel(), b.images.numel());
  const int64_t plane = 8 * 8;
  for (int64_t i = 0; i < b.images.numel(); ++i) {
    const float pixels = b.images[i] * 255.0f;
    ASSERT_NEAR(pixels, std::round(pixels), 1e-3) << i;
    ASSERT_GE(b.images[i], 0.0f);
    ASSERT_LE(b.images[i], 1.0f);
    const size_t c = size_t((i / plane) % 3);
    ASSERT_NEAR(a.images[i] * std[c] + mean[c], b.images[i], 1e-5) << i;
  }
}
