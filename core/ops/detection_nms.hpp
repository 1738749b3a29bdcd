// NonMaxSuppression's selection, shared by shape inference (the output's row count depends on
// the input values) and the CPU kernel.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/graph.hpp"

namespace quilt {

struct NmsParams {
  bool center_point_box = false;     // boxes are [x_center, y_center, width, height]
  int64_t max_output_per_class = 0;  // <= 0 selects nothing
  float iou_threshold = 0;
  bool has_score_threshold = false;
  float score_threshold = 0;
};

// Reads center_point_box and the optional scalar inputs max_output_boxes_per_class (int64),
// iou_threshold and score_threshold (float32); nullptr or an empty tensor means "not given".
// Throws Error naming the node on a wrong dtype.
NmsParams nms_params(const Node& node, const Tensor* max_output, const Tensor* iou,
                     const Tensor* score);

// boxes: [batches, spatial, 4], scores: [batches, classes, spatial], both float32 row-major.
// Returns the selected (batch, class, box) triples in output order: batch, then class, then
// decreasing score (ties: lower box index first).
std::vector<std::array<int64_t, 3>> non_max_suppression(const float* boxes, const float* scores,
                                                        int64_t batches, int64_t classes,
                                                        int64_t spatial, const NmsParams& p);

}  // namespace quilt
