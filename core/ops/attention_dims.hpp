// The sizes of an ONNX Attention node (opsets 23 and 24), derived once from its input shapes and
// attributes for both shape inference and the CPU kernel. Unknown dims are -1 and propagate.
#pragma once

#include <cstdint>
#include <vector>

#include "core/graph.hpp"

namespace quilt {

struct AttentionDims {
  bool three_d = false;  // Q, K, V given as (batch, seq, heads * head_size)
  int64_t batch = -1;
  int64_t q_heads = -1;
  int64_t kv_heads = -1;
  int64_t q_seq = -1;
  int64_t kv_seq = -1;     // new keys/values in K and V
  int64_t past_seq = 0;    // keys/values in past_key/past_value
  int64_t total_seq = -1;  // past_seq + kv_seq
  int64_t head_size = -1;  // of Q and K
  int64_t v_head_size = -1;
};

// Validates the shapes (absent optional inputs are nullptr) and attributes against each other
// and returns the sizes; fails naming the node on any inconsistency.
AttentionDims attention_dims(const Node& node, const std::vector<int64_t>& q,
                             const std::vector<int64_t>& k, const std::vector<int64_t>& v,
                             const std::vector<int64_t>* attn_mask,
                             const std::vector<int64_t>* past_key,
                             const std::vector<int64_t>* past_value,
                             const std::vector<int64_t>* nonpad_kv_seqlen);

}  // namespace quilt
