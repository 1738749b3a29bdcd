// The blocked layout beyond convolutions: which values the layout pass stores blocked
// (backends/cpu/layout.hpp) on hand-built patches, and the Concat, element-wise and
// output-reordering kernels (backends/cpu/kernels/blocked_ops.hpp) against plain NCHW results in
// every mix of input and output layouts, with ragged channel counts (the padding lanes of blocked
// inputs are NaN, so a kernel that read them as channels would fail). The whole pipeline on
// models is checked against onnxruntime by the cases_layout family (tests/cases/gen_layout.py).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cpu/kernels/blocked_ops.hpp"
#include "backends/cpu/kernels/conv_blocked.hpp"
#include "backends/cpu/layout.hpp"
#include "tests/backends/cpu/blocked_testing.hpp"

namespace quilt::cpu {
namespace {

using testing::random_floats;
using testing::to_blocked;

// The kernels here use AVX2 only: both lane counts are tested on every CPU.
constexpr int64_t kBothLanes[] = {8, 16};

// ---- the layout pass -----------------------------------------------------------------------

BlockedUse use(bool writes, std::vector<char> reads, bool converts, bool uniform) {
  BlockedUse u;
  u.writes = writes;
  u.reads = std::move(reads);
  u.converts = converts;
  u.uniform = uniform;
  return u;
}

struct Patch {
  std::vector<PatchNode> nodes;
  std::vector<BlockedUse> uses;
  std::vector<char> kept;
  explicit Patch(int values) : kept(values, 0) {}
  // A node reading `in` and writing `out`; `reads` marks the inputs it may read blocked.
  void add(std::vector<int32_t> in, int32_t out, BlockedUse u) {
    PatchNode n;
    n.inputs = std::move(in);
    n.outputs = {out};
    nodes.push_back(std::move(n));
    uses.push_back(std::move(u));
  }
  void conv(int32_t in, int32_t out) { add({in, -1}, out, use(true, {1, 0}, false, false)); }
  void concat(std::vector<int32_t> in, int32_t out) {
    add(in, out, use(true, std::vector<char>(in.size(), 1), false, false));
  }
  void element_wise(std::vector<int32_t> in, std::vector<char> full, int32_t out) {
    add(std::move(in), out, use(true, std::move(full), false, true));
  }
  void other(std::vector<int32_t> in, int32_t out, bool converts = false) {
    add(std::move(in), out, use(false, {}, converts, false));
  }
  std::vector<char> blocked() const { return blocked_values(nodes, uses, kept.size(), kept); }
};

TEST(BlockedLayout, ConcatJoinsTheRegionAndMixedInputsAreItsToReorder) {
  Patch p(7);  // 0 input, 1 conv, 2 conv, 3 other, 4 concat, 5 conv, 6 out
  p.conv(0, 1);
  p.conv(1, 2);
  p.other({0}, 3);
  p.concat({1, 2, 3}, 4);
  p.conv(4, 5);
  p.conv(5, 6);
  p.kept[6] = 1;
  EXPECT_EQ(p.blocked(), (std::vector<char>{0, 1, 1, 0, 1, 1, 0}));
}

TEST(BlockedLayout, ElementWiseInputsAndOutputAreAllBlockedOrAllNchw) {
  Patch p(8);  // 1 = conv(0); 2 = Add(1, 0: the graph's input, NCHW); 3 = conv(2)
  p.conv(0, 1);
  p.element_wise({1, 0}, {1, 1}, 2);
  p.conv(2, 3);
  // 5 = conv(3); 6 = Mul(5, 4: a one-element input); 7 = conv(6)
  p.conv(3, 5);
  p.element_wise({5, 4}, {1, 0}, 6);
  p.conv(6, 7);
  p.kept[7] = 1;
  EXPECT_EQ(p.blocked(), (std::vector<char>{0, 0, 0, 1, 0, 1, 1, 0}));
}

TEST(BlockedLayout, AnNchwReaderUnblocksBackThroughElementWiseChains) {
  Patch p(6);  // conv -> Relu -> Sigmoid -> (pool, conv): the pool reads NCHW
  p.conv(0, 1);
  p.element_wise({1}, {1}, 2);
  p.element_wise({2}, {1}, 3);
  p.other({3}, 4);
  p.conv(3, 5);
  EXPECT_EQ(p.blocked(), (std::vector<char>(6, 0)));
  // Without the pool, the chain is one region.
  Patch q(6);
  q.conv(0, 1);
  q.element_wise({1}, {1}, 2);
  q.element_wise({2}, {1}, 3);
  q.conv(3, 5);
  q.kept[5] = 1;
  EXPECT_EQ(q.blocked(), (std::vector<char>{0, 1, 1, 1, 0, 0}));
}

TEST(BlockedLayout, AnNchwKernelsOutputIsReorderedOnlyForTwoBlockedReaders) {
  Patch p(6);  // 1 = stem(0) read by two convs: reordered once; 4 = stem(0) read by one: not
  p.other({0}, 1, /*converts=*/true);
  p.conv(1, 2);
  p.conv(1, 3);
  p.other({0}, 4, /*converts=*/true);
  p.conv(4, 5);
  for (int v : {2, 3, 5}) p.kept[v] = 1;
  EXPECT_EQ(p.blocked(), (std::vector<char>{0, 1, 0, 0, 0, 0}));
  // One of the two readers reads NCHW: the value stays NCHW.
  Patch q(4);
  q.other({0}, 1, true);
  q.conv(1, 2);
  q.other({1}, 3);
  EXPECT_EQ(q.blocked(), (std::vector<char>(4, 0)));
}

TEST(BlockedLayout, ExportedUnreadAndResidualRules) {
  Patch p(6);  // 1 = conv(0) exported; 2 = conv(1) read by nobody; 4 = conv reading 3 as residual
  p.conv(0, 1);
  p.kept[1] = 1;
  p.conv(1, 2);
  p.conv(0, 3);
  p.add({1, -1, -1, 3}, 4, use(true, {1, 0, 0, 1}, false, false));
  p.add({4, 3}, 5, use(false, {}, false, false));  // reads 3 as something else: NCHW
  EXPECT_EQ(p.blocked(), (std::vector<char>(6, 0)));
}

// ---- the kernels ---------------------------------------------------------------------------

// A tensor of NCHW values x in either layout.
Tensor make(const std::vector<float>& x, const std::vector<int64_t>& nchw, bool blocked,
            int64_t lanes) {
  if (!blocked) return Tensor::from_vector(nchw, x);
  const int64_t cb = (nchw[1] + lanes - 1) / lanes;
  return Tensor::from_vector({nchw[0], cb, nchw[2], nchw[3], lanes},
                             to_blocked(x, nchw[0], nchw[1], nchw[2] * nchw[3], lanes));
}

// t's values in NCHW order (t blocked or not), checked for its shape.
std::vector<float> nchw_of(const Tensor& t, const std::vector<int64_t>& nchw, bool blocked,
                           int64_t lanes) {
  const int64_t n = nchw[0], c = nchw[1], hw = nchw[2] * nchw[3];
  const int64_t cb = (c + lanes - 1) / lanes;
  const std::vector<int64_t> want =
      blocked ? std::vector<int64_t>{n, cb, nchw[2], nchw[3], lanes} : nchw;
  EXPECT_EQ(t.shape(), want);
  if (t.shape() != want) return {};
  std::vector<float> y(static_cast<size_t>(n * c * hw));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p)
        y[static_cast<size_t>((i * c + ch) * hw + p)] =
            blocked ? t.data<float>()[((i * cb + ch / lanes) * hw + p) * lanes + ch % lanes]
                    : t.data<float>()[(i * c + ch) * hw + p];
  return y;
}

Node concat_node(size_t inputs, int64_t axis) {
  Node node;
  node.op_type = "Concat";
  node.name = "cat";
  for (size_t i = 0; i < inputs; ++i)
    node.inputs.push_back(std::string("x").append(std::to_string(i)));
  node.outputs = {"y"};
  Attribute a;
  a.name = "axis";
  a.kind = Attribute::Kind::Int;
  a.i = axis;
  node.attributes["axis"] = a;
  return node;
}

TEST(BlockedConcat, EveryMixOfLayoutsAndRaggedLastInputs) {
  ThreadPool pool(2);
  std::mt19937 rng(7);
  for (const int64_t lanes : kBothLanes) {
    for (int round = 0; round < 200; ++round) {
      const int64_t n = 1 + rng() % 2, h = 1 + rng() % 9, w = 1 + rng() % 13;
      const size_t inputs = 1 + rng() % 4;
      std::vector<int64_t> channels;
      for (size_t i = 0; i + 1 < inputs; ++i) channels.push_back(lanes * (1 + rng() % 3));
      channels.push_back(1 + rng() % (3 * lanes));  // the last may be ragged
      int64_t total = 0;
      for (int64_t c : channels) total += c;
      const Node node = concat_node(inputs, round % 2 ? 1 : -3);
      std::vector<TypeShape> in_types;
      for (int64_t c : channels) in_types.push_back({DType::Float32, true, {n, c, h, w}});
      const std::vector<int64_t> y_shape{n, total, h, w};
      const NodeSignature sig{node,
                              in_types,
                              {{DType::Float32, true, y_shape}},
                              std::vector<const Tensor*>(inputs, nullptr)};
      ASSERT_TRUE(blocked_concat_capable(sig, lanes));
      std::vector<char> in_blocked(inputs);
      std::vector<std::vector<float>> values;
      std::vector<Tensor> tensors;
      for (size_t i = 0; i < inputs; ++i) {
        in_blocked[i] = static_cast<char>(rng() % 2);
        values.push_back(
            random_floats(static_cast<size_t>(n * channels[i] * h * w), rng, -2.f, 2.f));
        tensors.push_back(make(values[i], in_types[i].dims, in_blocked[i], lanes));
      }
      const bool out_blocked = rng() % 2;
      std::ostringstream what;
      what << "round " << round << ": n=" << n << " h=" << h << " w=" << w
           << " out_blocked=" << out_blocked << " inputs";
      for (size_t i = 0; i < inputs; ++i) what << " " << channels[i] << (in_blocked[i] ? "b" : "");
      const auto kernel = make_blocked_concat(sig, in_blocked, out_blocked, lanes);
      std::vector<const Tensor*> ptrs;
      for (const Tensor& t : tensors) ptrs.push_back(&t);
      std::vector<Tensor> outs(1);
      KernelContext ctx(node, ptrs, sig.outputs, outs, pool);
      kernel->run(ctx);
      const std::vector<float> y = nchw_of(outs[0], y_shape, out_blocked, lanes);
      ASSERT_FALSE(y.empty()) << what.str();
      const int64_t hw = h * w;
      for (int64_t img = 0, offset = 0; img < n; ++img, offset = 0)
        for (size_t i = 0; i < inputs; offset += channels[i], ++i)
          for (int64_t ch = 0; ch < channels[i]; ++ch)
            for (int64_t p = 0; p < hw; ++p)
              ASSERT_EQ(y[static_cast<size_t>((img * total + offset + ch) * hw + p)],
                        values[i][static_cast<size_t>((img * channels[i] + ch) * hw + p)])
                  << what.str() << " at input " << i << " channel " << ch << " pixel " << p;
    }
  }
}

// Empty maps (a hostile model's zero dims) give empty outputs in every layout mix, and nothing
// is copied from an empty tensor's (possibly null) data.
TEST(BlockedConcat, EmptyMaps) {
  ThreadPool pool(2);
  for (const int64_t lanes : kBothLanes)
    for (int mix = 0; mix < 8; ++mix) {
      const Node node = concat_node(2, 1);
      const std::vector<int64_t> a{1, lanes, 0, 5}, b{1, 3, 0, 5}, y{1, lanes + 3, 0, 5};
      const NodeSignature sig{node,
                              {{DType::Float32, true, a}, {DType::Float32, true, b}},
                              {{DType::Float32, true, y}},
                              {nullptr, nullptr}};
      ASSERT_TRUE(blocked_concat_capable(sig, lanes));
      const std::vector<char> in_blocked{static_cast<char>(mix & 1),
                                         static_cast<char>(mix >> 1 & 1)};
      const Tensor ta = make({}, a, in_blocked[0], lanes), tb = make({}, b, in_blocked[1], lanes);
      const auto kernel = make_blocked_concat(sig, in_blocked, mix & 4, lanes);
      const Tensor* ins[] = {&ta, &tb};
      std::vector<Tensor> outs(1);
      KernelContext ctx(node, ins, sig.outputs, outs, pool);
      kernel->run(ctx);
      EXPECT_EQ(outs[0].numel(), 0) << "mix " << mix;
    }
}

TEST(BlockedConcat, OnlyChannelConcatsOfStaticFloat4dWithWholeBlocksBeforeTheLast) {
  int64_t lanes = 8;
  auto capable = [&](std::vector<std::vector<int64_t>> shapes, int64_t axis,
                     DType dtype = DType::Float32) {
    const Node node = concat_node(shapes.size(), axis);
    std::vector<TypeShape> ins;
    std::vector<int64_t> y = shapes[0];
    y[1] = 0;
    for (const auto& s : shapes) {
      ins.push_back({dtype, true, s});
      y[1] += s.size() > 1 ? s[1] : 0;
    }
    const NodeSignature sig{
        node, ins, {{dtype, true, y}}, std::vector<const Tensor*>(shapes.size(), nullptr)};
    return blocked_concat_capable(sig, lanes);
  };
  for (const int64_t L : kBothLanes) {
    lanes = L;
    EXPECT_TRUE(capable({{1, L, 5, 5}, {1, 3, 5, 5}}, 1));
    EXPECT_FALSE(capable({{1, 3, 5, 5}, {1, L, 5, 5}}, 1));  // a ragged input before the last
    EXPECT_FALSE(capable({{1, L, 5, 5}, {1, L, 5, 5}}, 2));  // not along channels
    EXPECT_FALSE(capable({{1, L, 5, 5}, {1, L, 5, 5}}, 1, DType::Int32));
    EXPECT_FALSE(capable({{1, L, -1, 5}, {1, L, -1, 5}}, 1));  // not static
    EXPECT_FALSE(capable({{1, L, 5}, {1, L, 5}}, 1));          // not 4-D
  }
}

// A NodeSignature of an element-wise op over float32 inputs of these shapes, output `y`.
struct ElementWise {
  Node node;
  std::vector<TypeShape> ins;
  std::vector<TypeShape> outs;
  std::vector<Tensor> constants;
  ElementWise(const std::string& op, std::vector<std::vector<int64_t>> shapes,
              std::vector<int64_t> y) {
    node.op_type = op;
    node.name = op;
    node.opset = 17;
    for (size_t i = 0; i < shapes.size(); ++i) {
      node.inputs.push_back(std::string("x").append(std::to_string(i)));
      ins.push_back({DType::Float32, true, shapes[i]});
    }
    node.outputs = {"y"};
    outs.push_back({DType::Float32, true, std::move(y)});
  }
  NodeSignature sig() const {
    return {node, ins, outs, std::vector<const Tensor*>(ins.size(), nullptr)};
  }
};

TEST(BlockedElementWise, FullInputsBlockedOneElementInputsAsGiven) {
  ThreadPool pool(2);
  std::mt19937 rng(3);
  const KernelRegistry& registry = KernelRegistry::builtin();
  for (const int64_t lanes : kBothLanes) {
    for (const int64_t c : {lanes, 2 * lanes + 3, int64_t{5}}) {
      const std::vector<int64_t> shape{2, c, 7, 9};
      const size_t count = static_cast<size_t>(2 * c * 63);
      // Add(a, b); Mul(a, 0.2); Clip(a, -0.5, 0.5) (bounds as one-element inputs).
      const std::vector<float> a = random_floats(count, rng, -2.f, 2.f),
                               b = random_floats(count, rng, -2.f, 2.f);
      const Tensor ta = make(a, shape, true, lanes), tb = make(b, shape, true, lanes);
      const Tensor k = Tensor::from_vector<float>({}, {0.2f});
      const Tensor lo = Tensor::from_vector<float>({1}, {-0.5f}),
                   hi = Tensor::from_vector<float>({1, 1, 1, 1}, {0.5f});
      struct Run {
        ElementWise op;
        std::vector<const Tensor*> inputs;
        float (*want)(float, float);
      };
      std::vector<Run> runs;
      runs.push_back({ElementWise("Add", {shape, shape}, shape), {&ta, &tb}, [](float x, float y) {
                        return x + y;
                      }});
      runs.push_back({ElementWise("Mul", {shape, {}}, shape), {&ta, &k}, [](float x, float) {
                        return x * 0.2f;
                      }});
      runs.push_back({ElementWise("Clip", {shape, {1}, {1, 1, 1, 1}}, shape),
                      {&ta, &lo, &hi},
                      [](float x, float) { return std::clamp(x, -0.5f, 0.5f); }});
      for (const Run& r : runs) {
        const NodeSignature sig = r.op.sig();
        const std::vector<char> full = blocked_element_wise_inputs(sig);
        ASSERT_FALSE(full.empty()) << r.op.node.op_type;
        EXPECT_EQ(full[0], 1);
        for (size_t i = 1; i < full.size(); ++i)
          EXPECT_EQ(full[i], r.op.node.op_type == "Add") << r.op.node.op_type << " input " << i;
        const KernelEntry* entry = registry.find(r.op.node.op_type, "");
        ASSERT_NE(entry, nullptr);
        const auto kernel = make_blocked_element_wise(sig, entry->create, full, lanes);
        std::vector<Tensor> outs(1);
        KernelContext ctx(r.op.node, r.inputs, sig.outputs, outs, pool);
        kernel->run(ctx);
        const std::vector<float> y = nchw_of(outs[0], shape, true, lanes);
        ASSERT_EQ(y.size(), count) << r.op.node.op_type << " c=" << c;
        for (size_t e = 0; e < count; ++e)
          ASSERT_FLOAT_EQ(y[e], r.want(a[e], b[e]))
              << r.op.node.op_type << " c=" << c << " at " << e;
      }
    }
  }
}

TEST(BlockedElementWise, NotForBroadcastsOtherThanOneElementNorOtherOps) {
  const std::vector<int64_t> y{1, 16, 4, 4};
  EXPECT_TRUE(blocked_element_wise_inputs(ElementWise("Add", {y, {1}}, y).sig()).size() == 2);
  // One value per channel: Add, Sub, Mul and Div of it and one full input only.
  EXPECT_EQ(blocked_element_wise_inputs(ElementWise("Mul", {{1, 16, 1, 1}, y}, y).sig()),
            (std::vector<char>{kPerChannel, kFull}));
  EXPECT_EQ(blocked_element_wise_inputs(ElementWise("Add", {y, {16, 1, 1}}, y).sig()),
            (std::vector<char>{kFull, kPerChannel}));
  EXPECT_TRUE(blocked_element_wise_inputs(ElementWise("Max", {y, {16, 1, 1}}, y).sig()).empty());
  EXPECT_TRUE(blocked_element_wise_inputs(ElementWise("Sum", {y, y, {16, 1, 1}}, y).sig()).empty());
  EXPECT_TRUE(blocked_element_wise_inputs(ElementWise("Mul", {y, {2, 16, 1, 1}}, y).sig()).empty());
  EXPECT_TRUE(blocked_element_wise_inputs(ElementWise("Add", {y, {1, 1, 4, 4}}, y).sig()).empty());
  EXPECT_TRUE(blocked_element_wise_inputs(ElementWise("Add", {{1}, {1}}, {1}).sig()).empty());
  EXPECT_TRUE(blocked_element_wise_inputs(ElementWise("Softmax", {y}, y).sig()).empty());
  EXPECT_TRUE(blocked_element_wise_inputs(ElementWise("PRelu", {y, {16, 1, 1}}, y).sig()).empty());
  EXPECT_TRUE(
      blocked_element_wise_inputs(ElementWise("Relu", {{1, 16, -1, 4}}, {1, 16, -1, 4}).sig())
          .empty());
}

TEST(BlockedElementWise, OneValuePerChannelEitherOperandAndPerImage) {
  ThreadPool pool(2);
  std::mt19937 rng(5);
  for (const int64_t lanes : kBothLanes) {
    for (const int64_t c : {lanes, 2 * lanes + 3, int64_t{5}})
      for (const char* op : {"Mul", "Sub", "Div", "Add"})
        for (int variant = 0; variant < 3; ++variant) {
          // variant 0: x op g[1, C, 1, 1]; 1: g[C, 1, 1] op x; 2: x op g[N, C, 1, 1].
          const std::vector<int64_t> shape{2, c, 3, 7};
          const std::vector<int64_t> g_shape = variant == 0   ? std::vector<int64_t>{1, c, 1, 1}
                                               : variant == 1 ? std::vector<int64_t>{c, 1, 1}
                                                              : std::vector<int64_t>{2, c, 1, 1};
          const int64_t g_count = variant == 2 ? 2 * c : c;
          const std::vector<float> x = random_floats(static_cast<size_t>(2 * c * 21), rng, 0.5f,
                                                     2.f),
                                   gv = random_floats(static_cast<size_t>(g_count), rng, 0.5f, 2.f);
          const Tensor tx = make(x, shape, true, lanes), tg = Tensor::from_vector(g_shape, gv);
          const bool x_first = variant != 1;
          const ElementWise e(
              op, x_first ? std::vector{shape, g_shape} : std::vector{g_shape, shape}, shape);
          const NodeSignature sig = e.sig();
          const std::vector<char> kinds = blocked_element_wise_inputs(sig);
          ASSERT_EQ(kinds.size(), 2u) << op;
          const auto kernel = make_blocked_element_wise(
              sig, KernelRegistry::builtin().find(op, "")->create, kinds, lanes);
          std::vector<const Tensor*> ins = {&tx, &tg};
          if (!x_first) std::swap(ins[0], ins[1]);
          std::vector<Tensor> outs(1);
          KernelContext ctx(e.node, ins, sig.outputs, outs, pool);
          kernel->run(ctx);
          const std::vector<float> y = nchw_of(outs[0], shape, true, lanes);
          ASSERT_EQ(y.size(), x.size());
          for (int64_t img = 0; img < 2; ++img)
            for (int64_t ch = 0; ch < c; ++ch)
              for (int64_t p = 0; p < 21; ++p) {
                const size_t at = static_cast<size_t>((img * c + ch) * 21 + p);
                const float g = gv[static_cast<size_t>(variant == 2 ? img * c + ch : ch)];
                const float a = x_first ? x[at] : g, b = x_first ? g : x[at];
                const std::string o = op;
                const float want = o == "Mul"   ? a * b
                                   : o == "Sub" ? a - b
                                   : o == "Div" ? a / b
                                                : a + b;
                ASSERT_FLOAT_EQ(y[at], want) << op << " variant " << variant << " c=" << c;
              }
        }
  }
}

TEST(BlockedPlaneMean, GlobalAveragePoolAndReduceMeanOverHeightAndWidth) {
  ThreadPool pool(2);
  std::mt19937 rng(9);
  for (const int64_t lanes : kBothLanes) {
    for (const int64_t c : {lanes, 2 * lanes + 3, int64_t{5}}) {
      const std::vector<int64_t> shape{2, c, 4, 9};
      const std::vector<float> x = random_floats(static_cast<size_t>(2 * c * 36), rng);
      const Tensor tx = make(x, shape, true, lanes);
      Node gap;
      gap.op_type = "GlobalAveragePool";
      gap.inputs = {"x"};
      gap.outputs = {"y"};
      Node mean = gap;
      mean.op_type = "ReduceMean";
      mean.opset = 13;
      Attribute axes;
      axes.name = "axes";
      axes.kind = Attribute::Kind::Ints;
      axes.ints = {-1, 2};
      mean.attributes["axes"] = axes;
      for (const Node* node : {&gap, &mean}) {
        const NodeSignature sig{*node,
                                {{DType::Float32, true, shape}},
                                {{DType::Float32, true, {2, c, 1, 1}}},
                                {nullptr}};
        ASSERT_TRUE(blocked_plane_mean_capable(sig)) << node->op_type;
        const auto kernel = make_blocked_plane_mean(sig, lanes);
        const Tensor* ins[] = {&tx};
        std::vector<Tensor> outs(1);
        KernelContext ctx(*node, ins, sig.outputs, outs, pool);
        kernel->run(ctx);
        ASSERT_EQ(outs[0].shape(), (std::vector<int64_t>{2, c, 1, 1}));
        for (int64_t plane = 0; plane < 2 * c; ++plane) {
          double sum = 0;
          for (int64_t p = 0; p < 36; ++p) sum += x[static_cast<size_t>(plane * 36 + p)];
          ASSERT_NEAR(outs[0].data<float>()[plane], sum / 36, 1e-5) << node->op_type << " c=" << c;
        }
      }
      mean.attributes["axes"].ints = {1, 2};  // not the plane
      const NodeSignature other{
          mean, {{DType::Float32, true, shape}}, {{DType::Float32, true, {2, 1, 1, 9}}}, {nullptr}};
      EXPECT_FALSE(blocked_plane_mean_capable(other));
    }
  }
}

TEST(BlockedOutput, AnNchwKernelsOutputReorderedWithItsFusedActivation) {
  ThreadPool pool(2);
  std::mt19937 rng(11);
  for (const int64_t lanes : kBothLanes) {
    for (const int64_t c : {int64_t{3}, lanes, 2 * lanes + 1}) {
      const std::vector<int64_t> shape{2, c, 5, 6};
      const std::vector<float> a = random_floats(static_cast<size_t>(2 * c * 30), rng, -2.f, 2.f);
      const Tensor ta = Tensor::from_vector(shape, a);
      const ElementWise op("Sigmoid", {shape}, shape);
      const NodeSignature sig = op.sig();
      ASSERT_TRUE(blocked_output_convertible(sig));
      const auto kernel = make_blocked_output(
          sig, KernelRegistry::builtin().find("Sigmoid", "")->create(sig), lanes);
      const Tensor* ins[] = {&ta};
      std::vector<Tensor> outs(1);
      KernelContext ctx(op.node, ins, sig.outputs, outs, pool);
      kernel->run(ctx);
      const std::vector<float> y = nchw_of(outs[0], shape, true, lanes);
      ASSERT_EQ(y.size(), a.size());
      for (size_t e = 0; e < a.size(); ++e)
        ASSERT_NEAR(y[e], 1.f / (1.f + std::exp(-a[e])), 1e-6f) << "c=" << c << " at " << e;
      EXPECT_NE(std::string(ctx.detail).find("output reordered to blocked"), std::string::npos);
    }
    EXPECT_FALSE(blocked_output_convertible(ElementWise("Relu", {{4, 4}}, {4, 4}).sig()));
  }
}

}  // namespace
}  // namespace quilt::cpu
