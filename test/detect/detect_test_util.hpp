// test/detect/detect_test_util.hpp — the small Detect head the loss and decoding tests share.
#pragma once

#include "detect/yolo_loss.hpp"

namespace hetrain::detect::test {

// 2 levels (strides 8, 16) on a 64 × 64 image: grids 8 × 8 and 4 × 4; 2 anchors per level; 3 classes.
// Anchors in grid units: level 0 (1, 1), (2, 3); level 1 (2, 2), (4, 3).
inline DetectHeadSpec small_head() {
  DetectHeadSpec s;
  s.num_classes = 3;
  s.anchors_per_level = 2;
  s.strides = {8, 16};
  s.anchors = {8, 8, 16, 24, 32, 32, 64, 48};
  s.image_h = s.image_w = 64;
  return s;
}

}  // namespace hetrain::detect::test
