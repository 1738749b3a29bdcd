// NonMaxSuppression's greedy selection, in the order and float32 arithmetic of onnxruntime so
// that boxes sitting exactly on the IoU threshold are decided the same way.
#include "core/ops/detection_nms.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "quilt/quilt.hpp"

namespace quilt {
namespace {

struct Corners {
  float x_min, y_min, x_max, y_max;
};

// Corner boxes may list either corner first ("flipped"), so each axis is sorted.
Corners corners_of(const float* b, bool center_point_box) {
  if (center_point_box) {
    const float hw = b[2] / 2, hh = b[3] / 2;
    return {b[0] - hw, b[1] - hh, b[0] + hw, b[1] + hh};
  }
  return {std::min(b[1], b[3]), std::min(b[0], b[2]), std::max(b[1], b[3]), std::max(b[0], b[2])};
}

bool suppresses(const Corners& a, const Corners& b, float iou_threshold) {
  const float ix_min = std::max(a.x_min, b.x_min), ix_max = std::min(a.x_max, b.x_max);
  if (ix_max <= ix_min) return false;
  const float iy_min = std::max(a.y_min, b.y_min), iy_max = std::min(a.y_max, b.y_max);
  if (iy_max <= iy_min) return false;
  const float inter = (ix_max - ix_min) * (iy_max - iy_min);
  if (inter <= 0) return false;
  const float area_a = (a.x_max - a.x_min) * (a.y_max - a.y_min);
  const float area_b = (b.x_max - b.x_min) * (b.y_max - b.y_min);
  const float uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > iou_threshold;
}

template <class T>
T first_or(const Node& node, const Tensor* t, T def, const char* what) {
  if (!t || t->numel() == 0) return def;
  if (t->dtype() != dtype_of<T>())
    node.fail(std::string(what) + " is " + dtype_name(t->dtype()) + ", expected " +
              dtype_name(dtype_of<T>()));
  return t->data<T>()[0];
}

}  // namespace

NmsParams nms_params(const Node& node, const Tensor* max_output, const Tensor* iou,
                     const Tensor* score) {
  NmsParams p;
  p.center_point_box = node.attr_int("center_point_box", 0) == 1;
  p.max_output_per_class = first_or<int64_t>(node, max_output, 0, "max_output_boxes_per_class");
  p.iou_threshold = first_or<float>(node, iou, 0.0f, "iou_threshold");
  p.has_score_threshold = score && score->numel() > 0;
  p.score_threshold = first_or<float>(node, score, 0.0f, "score_threshold");
  return p;
}

std::vector<std::array<int64_t, 3>> non_max_suppression(const float* boxes, const float* scores,
                                                        int64_t batches, int64_t classes,
                                                        int64_t spatial, const NmsParams& p) {
  std::vector<std::array<int64_t, 3>> out;
  if (p.max_output_per_class <= 0) return out;
  std::vector<Corners> corners(static_cast<size_t>(spatial));
  std::vector<int64_t> candidates;
  std::vector<int64_t> selected;
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t i = 0; i < spatial; ++i)
      corners[static_cast<size_t>(i)] =
          corners_of(boxes + (b * spatial + i) * 4, p.center_point_box);
    for (int64_t c = 0; c < classes; ++c) {
      const float* s = scores + (b * classes + c) * spatial;
      candidates.clear();
      for (int64_t i = 0; i < spatial; ++i) {
        // A NaN has no place in the score order (onnxruntime's answer is undefined there).
        if (std::isnan(s[i]) && !p.has_score_threshold)
          throw Error(ErrorCode::InvalidArgument, "scores[" + std::to_string(b) + ", " +
                                                      std::to_string(c) + ", " + std::to_string(i) +
                                                      "] is NaN");
        if (!p.has_score_threshold || s[i] > p.score_threshold) candidates.push_back(i);
      }
      // Highest score first; equal scores keep the lower box index first.
      std::stable_sort(candidates.begin(), candidates.end(),
                       [s](int64_t x, int64_t y) { return s[x] > s[y]; });
      selected.clear();
      for (int64_t i : candidates) {
        if (static_cast<int64_t>(selected.size()) >= p.max_output_per_class) break;
        bool keep = true;
        for (int64_t j : selected)
          if (suppresses(corners[static_cast<size_t>(i)], corners[static_cast<size_t>(j)],
                         p.iou_threshold)) {
            keep = false;
            break;
          }
        if (!keep) continue;
        selected.push_back(i);
        out.push_back({b, c, i});
      }
    }
  }
  return out;
}

}  // namespace quilt
