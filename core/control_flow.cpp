// If, Loop and Scan: the executor runs their subgraph plans (see core/executor.hpp).
#include "core/control_flow.hpp"

#include <cstring>
#include <limits>

#include "core/executor.hpp"
#include "core/host_ops.hpp"

namespace quilt {

Tensor slice_along(const Tensor& t, int64_t axis, int64_t index) {
  std::vector<int64_t> shape = t.shape();
  const int64_t n = shape[static_cast<size_t>(axis)];
  shape.erase(shape.begin() + axis);
  Tensor out(t.dtype(), shape);
  int64_t outer = 1, inner = static_cast<int64_t>(dtype_size(t.dtype()));
  for (int64_t d = 0; d < axis; ++d) outer *= t.dim(d);
  for (int64_t d = axis + 1; d < t.rank(); ++d) inner *= t.dim(d);
  const auto* src = static_cast<const char*>(t.raw_data());
  auto* dst = static_cast<char*>(out.raw_data());
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + o * inner, src + (o * n + index) * inner, static_cast<size_t>(inner));
  return out;
}

Tensor stack_along(const std::vector<Tensor>& pieces, int64_t axis) {
  std::vector<int64_t> shape = pieces.at(0).shape();
  const auto n = static_cast<int64_t>(pieces.size());
  for (const auto& p : pieces)
    if (p.shape() != pieces[0].shape() || p.dtype() != pieces[0].dtype())
      throw Error(ErrorCode::InvalidArgument,
                  "scan outputs of different iterations differ: " + to_string(pieces[0].shape()) +
                      " " + dtype_name(pieces[0].dtype()) + " and " + to_string(p.shape()) + " " +
                      dtype_name(p.dtype()));
  int64_t outer = 1, inner = static_cast<int64_t>(dtype_size(pieces[0].dtype()));
  for (int64_t d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis); d < shape.size(); ++d) inner *= shape[d];
  shape.insert(shape.begin() + axis, n);
  Tensor out(pieces[0].dtype(), shape);
  auto* dst = static_cast<char*>(out.raw_data());
  for (int64_t k = 0; k < n; ++k) {
    const auto* src = static_cast<const char*>(pieces[static_cast<size_t>(k)].raw_data());
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + (o * n + k) * inner, src + o * inner, static_cast<size_t>(inner));
  }
  return out;
}

std::vector<Value> run_sequence_map(const Node& node, const ExecutionPlan& body,
                                    const std::vector<Value>& in,
                                    const std::map<std::string, Value>& outer) {
  if (in.empty() || in[0].kind() != ValueKind::Sequence)
    node.fail("input 0 must be a sequence, got " +
                  (in.empty() ? std::string("nothing") : in[0].type_string()),
              ErrorCode::InvalidArgument);
  const size_t length = in[0].items().size();
  for (size_t j = 1; j < in.size(); ++j)
    if (in[j].kind() == ValueKind::Sequence && in[j].items().size() != length)
      node.fail("input sequences have different lengths: " + std::to_string(length) + " and " +
                    std::to_string(in[j].items().size()) + " (input " + std::to_string(j) + ")",
                ErrorCode::InvalidArgument);
  if (body.inputs().size() != in.size())
    node.fail("body has " + std::to_string(body.inputs().size()) + " inputs, the node " +
              std::to_string(in.size()));
  std::vector<std::vector<Value>> gathered(body.outputs().size());
  for (size_t i = 0; i < length; ++i) {
    std::vector<Value> formal;
    for (const Value& v : in) formal.push_back(v.kind() == ValueKind::Sequence ? v.items()[i] : v);
    std::vector<Value> out = body.run_subgraph(formal, outer);
    for (size_t k = 0; k < out.size() && k < gathered.size(); ++k) gathered[k].push_back(out[k]);
  }
  std::vector<Value> results;
  for (size_t k = 0; k < gathered.size(); ++k) {
    const ValueInfo& declared = body.outputs()[k];
    results.push_back(Value::sequence(std::move(gathered[k]), declared.kind == ValueKind::Tensor
                                                                  ? declared.dtype
                                                                  : DType::Undefined));
  }
  return results;
}

namespace {

bool scalar_bool(const Node& node, const Tensor& t, const char* what) {
  if (t.dtype() != DType::Bool || t.numel() != 1)
    node.fail(std::string(what) + " must be a bool tensor of one element, got " +
                  dtype_name(t.dtype()) + " " + to_string(t.shape()),
              ErrorCode::InvalidArgument);
  return t.data<bool>()[0];
}

int64_t normalized(const Node& node, int64_t axis, int64_t rank, const char* what) {
  if (axis < -rank || axis >= rank)
    node.fail(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
                  std::to_string(rank),
              ErrorCode::InvalidArgument);
  return axis < 0 ? axis + rank : axis;
}

// Scan-8: every state and scan input has a batch axis (0) in front, scan inputs their sequence
// axis next (1); input 0 is sequence_lens ([batch] int64, optional: all full length). Each batch
// entry runs on its own: its states and scan slices without the batch axis, scan input j read
// backwards when directions[j] is 1, for its own length; scan outputs are stacked along axis 1,
// zero past an entry's length.
std::vector<Value> run_scan8(const Node& node, const ExecutionPlan& body,
                             const std::vector<Value>& in,
                             const std::map<std::string, Value>& outer) {
  const size_t n_explicit = node.inputs.size();
  auto tensor = [&](size_t i) -> const Tensor& { return tensor_input(node, in.at(i), i); };
  const auto n_scan_in = static_cast<size_t>(node.attr_int("num_scan_inputs", 0));
  if (n_scan_in == 0 || n_scan_in + 1 > n_explicit)
    node.fail("num_scan_inputs must be between 1 and the number of inputs after sequence_lens (" +
              std::to_string(n_explicit - 1) + ")");
  const size_t n_state = n_explicit - 1 - n_scan_in;
  if (body.outputs().size() < n_state) node.fail("body has fewer outputs than state variables");
  const size_t n_scan_out = body.outputs().size() - n_state;
  const auto dirs = node.attr_ints("directions", std::vector<int64_t>(n_scan_in, 0));
  if (dirs.size() != n_scan_in)
    node.fail("directions has " + std::to_string(dirs.size()) + " entries, expected " +
              std::to_string(n_scan_in) + " (one per scan input)");
  const Tensor& first = tensor(1 + n_state);
  if (first.rank() < 2)
    node.fail("scan input 0 has shape " + to_string(first.shape()) +
                  "; Scan-8 needs [batch, sequence, ...]",
              ErrorCode::InvalidArgument);
  const int64_t batch = first.dim(0), max_len = first.dim(1);
  for (size_t i = 1; i < n_explicit; ++i) {
    const Tensor& t = tensor(i);
    const bool scan = i > n_state;
    if (t.rank() < (scan ? 2 : 1) || t.dim(0) != batch || (scan && t.dim(1) != max_len))
      node.fail("input " + std::to_string(i) + " has shape " + to_string(t.shape()) +
                    ", expected [" + std::to_string(batch) +
                    (scan ? ", " + std::to_string(max_len) + ", ...]" : ", ...]") +
                    " (batch first, as scan input 0)",
                ErrorCode::InvalidArgument);
  }
  std::vector<int64_t> lens(static_cast<size_t>(batch), max_len);
  if (!node.inputs[0].empty()) {
    const Tensor& sl = tensor(0);
    if (sl.dtype() != DType::Int64 || sl.numel() != batch)
      node.fail("sequence_lens is " + std::string(dtype_name(sl.dtype())) + " " +
                    to_string(sl.shape()) + ", expected int64 [" + std::to_string(batch) + "]",
                ErrorCode::InvalidArgument);
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t len = sl.data<int64_t>()[b];
      if (len < 0 || len > max_len)
        node.fail("sequence_lens[" + std::to_string(b) + "] is " + std::to_string(len) +
                      ", expected 0 to " + std::to_string(max_len),
                  ErrorCode::InvalidArgument);
      lens[static_cast<size_t>(b)] = len;
    }
  }
  std::vector<std::vector<Tensor>> final_states(n_state);
  std::vector<std::vector<Tensor>> per_batch(n_scan_out);  // [len_b, ...] each, or undefined
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = lens[static_cast<size_t>(b)];
    std::vector<Value> state;
    for (size_t i = 0; i < n_state; ++i) state.push_back(slice_along(tensor(1 + i), 0, b));
    std::vector<Tensor> xs;
    for (size_t j = 0; j < n_scan_in; ++j) xs.push_back(slice_along(tensor(1 + n_state + j), 0, b));
    std::vector<std::vector<Tensor>> scans(n_scan_out);
    for (int64_t t = 0; t < len; ++t) {
      std::vector<Value> formal = state;
      for (size_t j = 0; j < n_scan_in; ++j)
        formal.push_back(slice_along(xs[j], 0, dirs[j] ? len - 1 - t : t));
      std::vector<Value> out = body.run_subgraph(formal, outer);
      std::copy(out.begin(), out.begin() + static_cast<long>(n_state), state.begin());
      for (size_t k = 0; k < n_scan_out; ++k)
        scans[k].push_back(tensor_input(node, out[n_state + k], n_state + k));
    }
    for (size_t i = 0; i < n_state; ++i)
      final_states[i].push_back(tensor_input(node, state[i], 1 + i));
    for (size_t k = 0; k < n_scan_out; ++k)
      per_batch[k].push_back(scans[k].empty() ? Tensor() : stack_along(scans[k], 0));
  }
  std::vector<Value> results;
  for (size_t i = 0; i < n_state; ++i) results.push_back(stack_along(final_states[i], 0));
  for (size_t k = 0; k < n_scan_out; ++k) {
    const Tensor* shaped = nullptr;
    for (const Tensor& t : per_batch[k])
      if (t.defined()) shaped = &t;
    if (!shaped)
      node.fail("Scan over sequences of length 0 is not supported", ErrorCode::NotImplemented);
    std::vector<int64_t> shape = shaped->shape();
    shape[0] = max_len;
    std::vector<Tensor> padded;
    for (const Tensor& t : per_batch[k]) {
      Tensor p(shaped->dtype(), shape);  // zeros past the entry's length
      if (t.defined()) {
        if (t.dtype() != shaped->dtype() ||
            !std::equal(t.shape().begin() + 1, t.shape().end(), shape.begin() + 1, shape.end()))
          node.fail("scan output " + std::to_string(k) + " differs between batch entries: " +
                        to_string(t.shape()) + " and " + to_string(shaped->shape()),
                    ErrorCode::InvalidArgument);
        if (t.nbytes()) std::memcpy(p.raw_data(), t.raw_data(), t.nbytes());
      }
      padded.push_back(std::move(p));
    }
    results.push_back(stack_along(padded, 0));
  }
  return results;
}

}  // namespace

std::vector<Value> ExecutionPlan::run_control_flow(const Step& step,
                                                   const std::vector<Value>& inputs) const {
  const Node& node = *step.nodes[0].node;
  const size_t n_explicit = node.inputs.size();
  std::vector<Value> in(inputs.begin(), inputs.begin() + static_cast<long>(n_explicit));
  std::map<std::string, Value> outer;
  for (size_t i = n_explicit; i < inputs.size(); ++i)
    outer[node.implicit_inputs[i - n_explicit]] = inputs[i];
  auto subplan = [&](const char* name) -> const ExecutionPlan& {
    auto it = step.subplans.find(name);
    if (it == step.subplans.end()) node.fail(std::string("attribute '") + name + "' is missing");
    return *it->second;
  };
  std::vector<Value> results;
  auto tensor = [&](size_t i) -> const Tensor& { return tensor_input(node, in.at(i), i); };

  if (step.host_kind == HostKind::SequenceMap) {
    results = run_sequence_map(node, subplan("body"), in, outer);
  } else if (step.host_kind == HostKind::If) {
    const bool cond = scalar_bool(node, tensor(0), "cond");
    results = subplan(cond ? "then_branch" : "else_branch").run_subgraph({}, outer);
  } else if (step.host_kind == HostKind::Loop) {
    const ExecutionPlan& body = subplan("body");
    const size_t n_carried = n_explicit > 2 ? n_explicit - 2 : 0;
    if (body.outputs().size() < 1 + n_carried)
      node.fail("body has " + std::to_string(body.outputs().size()) +
                " outputs, expected at least " + std::to_string(1 + n_carried));
    const size_t n_scan = body.outputs().size() - 1 - n_carried;
    // Without M only the condition ends the loop; a negative M runs no iteration (as in
    // onnxruntime: it < M). It was unbounded, so a NaN trip count cast to int64 never ended.
    int64_t max_trips = std::numeric_limits<int64_t>::max();
    if (n_explicit > 0 && in[0].defined()) {
      if (tensor(0).numel() != 1 || tensor(0).dtype() != DType::Int64)
        node.fail("M must be an int64 tensor of one element", ErrorCode::InvalidArgument);
      max_trips = tensor(0).data<int64_t>()[0];
    }
    const bool has_cond = n_explicit > 1 && in[1].defined();
    bool cond = has_cond ? scalar_bool(node, tensor(1), "cond") : true;
    std::vector<Value> carried(in.begin() + std::min<size_t>(2, n_explicit), in.end());
    std::vector<std::vector<Tensor>> scans(n_scan);
    int64_t it = 0;
    while (cond && it < max_trips) {
      std::vector<Value> formal = {Tensor::from_vector<int64_t>({}, {it}),
                                   Tensor::from_vector<bool>({}, {cond})};
      formal.insert(formal.end(), carried.begin(), carried.end());
      std::vector<Value> out = body.run_subgraph(formal, outer);
      if (has_cond)
        cond = scalar_bool(node, tensor_input(node, out[0], 0), "the body's condition output");
      std::copy(out.begin() + 1, out.begin() + 1 + static_cast<long>(n_carried), carried.begin());
      for (size_t k = 0; k < n_scan; ++k)
        scans[k].push_back(tensor_input(node, out[1 + n_carried + k], 1 + n_carried + k));
      ++it;
    }
    results = carried;
    for (size_t k = 0; k < n_scan; ++k) {
      if (!scans[k].empty()) {
        results.push_back(stack_along(scans[k], 0));
      } else {  // no iteration: an empty stack of the body output's declared type
        const ValueInfo& info = body.outputs()[1 + n_carried + k];
        std::vector<int64_t> shape = {0};
        for (const auto& d : info.shape) shape.push_back(d.is_fixed() ? d.value : 0);
        results.push_back(
            Tensor(info.dtype == DType::Undefined ? DType::Float32 : info.dtype, shape));
      }
    }
  } else if (node.opset < 9) {  // Scan-8
    results = run_scan8(node, subplan("body"), in, outer);
  } else {  // Scan (opset 9+)
    const ExecutionPlan& body = subplan("body");
    const auto n_scan_in = static_cast<size_t>(node.attr_int("num_scan_inputs", 0));
    if (n_scan_in == 0 || n_scan_in > n_explicit)
      node.fail("num_scan_inputs must be between 1 and the number of inputs (" +
                std::to_string(n_explicit) + ")");
    const size_t n_state = n_explicit - n_scan_in;
    if (body.outputs().size() < n_state) node.fail("body has fewer outputs than state variables");
    const size_t n_scan_out = body.outputs().size() - n_state;
    const auto in_dirs =
        node.attr_ints("scan_input_directions", std::vector<int64_t>(n_scan_in, 0));
    const auto in_axes = node.attr_ints("scan_input_axes", std::vector<int64_t>(n_scan_in, 0));
    const auto out_dirs =
        node.attr_ints("scan_output_directions", std::vector<int64_t>(n_scan_out, 0));
    const auto out_axes = node.attr_ints("scan_output_axes", std::vector<int64_t>(n_scan_out, 0));
    if (in_dirs.size() != n_scan_in || in_axes.size() != n_scan_in ||
        out_dirs.size() != n_scan_out || out_axes.size() != n_scan_out)
      node.fail("scan direction/axis attributes must have one entry per scan input/output");
    std::vector<int64_t> axes(n_scan_in);
    int64_t length = -1;
    for (size_t j = 0; j < n_scan_in; ++j) {
      const Tensor& x = tensor(n_state + j);
      axes[j] = normalized(node, in_axes[j], x.rank(), "scan_input_axes entry");
      const int64_t len = x.dim(axes[j]);
      if (length >= 0 && len != length)
        node.fail("scan inputs have different lengths along their scan axes: " +
                      std::to_string(length) + " and " + std::to_string(len),
                  ErrorCode::InvalidArgument);
      length = len;
    }
    std::vector<Value> state(in.begin(), in.begin() + static_cast<long>(n_state));
    std::vector<std::vector<Tensor>> scans(n_scan_out);
    for (int64_t t = 0; t < length; ++t) {
      std::vector<Value> formal = state;
      for (size_t j = 0; j < n_scan_in; ++j)
        formal.push_back(
            slice_along(tensor(n_state + j), axes[j], in_dirs[j] ? length - 1 - t : t));
      std::vector<Value> out = body.run_subgraph(formal, outer);
      std::copy(out.begin(), out.begin() + static_cast<long>(n_state), state.begin());
      for (size_t k = 0; k < n_scan_out; ++k)
        scans[k].push_back(tensor_input(node, out[n_state + k], n_state + k));
    }
    results = state;
    for (size_t k = 0; k < n_scan_out; ++k) {
      if (out_dirs[k]) std::reverse(scans[k].begin(), scans[k].end());
      if (scans[k].empty())
        node.fail("Scan over a sequence of length 0 is not supported", ErrorCode::NotImplemented);
      const int64_t rank = scans[k][0].rank() + 1;
      results.push_back(
          stack_along(scans[k], normalized(node, out_axes[k], rank, "scan_output_axes entry")));
    }
  }

  if (results.size() < node.outputs.size())
    node.fail("produced " + std::to_string(results.size()) + " outputs, the node has " +
              std::to_string(node.outputs.size()));
  return results;
}

}  // namespace quilt
