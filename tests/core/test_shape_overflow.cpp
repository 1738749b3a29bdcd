// Hostile attributes and shapes whose sizes do not fit int64: each site of shape inference
// reports a clear error naming the node and what overflowed (core/checked.hpp) instead of
// computing with signed overflow, which is undefined behaviour.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/checked.hpp"
#include "core/graph.hpp"
#include "core/op_schema.hpp"
#include "tests/expect_error.hpp"

using namespace quilt;
using quilt::testing::expect_error;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t k2p32 = int64_t{1} << 32;
constexpr int64_t k2p62 = int64_t{1} << 62;

// A node named after its op in lower case, with inputs i0.. and outputs o0...
Node make(const std::string& op, int64_t opset, size_t inputs, size_t outputs = 1) {
  Node n;
  n.op_type = op;
  for (char c : op) n.name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  n.opset = opset;
  // Appended, not "i" + to_string(i): GCC 12 warns falsely (-Wrestrict) on that form here.
  for (size_t i = 0; i < inputs; ++i)
    n.inputs.push_back(std::string("i").append(std::to_string(i)));
  for (size_t i = 0; i < outputs; ++i)
    n.outputs.push_back(std::string("o").append(std::to_string(i)));
  return n;
}

void set(Node& n, const std::string& name, std::vector<int64_t> v) {
  Attribute a;
  a.name = name;
  a.kind = Attribute::Kind::Ints;
  a.ints = std::move(v);
  n.attributes[name] = a;
}
void set(Node& n, const std::string& name, int64_t v) {
  Attribute a;
  a.name = name;
  a.kind = Attribute::Kind::Int;
  a.i = v;
  n.attributes[name] = a;
}
void set(Node& n, const std::string& name, const char* v) {
  Attribute a;
  a.name = name;
  a.kind = Attribute::Kind::String;
  a.s = v;
  n.attributes[name] = a;
}

TypeShape f32(std::vector<int64_t> dims) {
  return {DType::Float32, true, std::move(dims)};
}
TypeShape of(DType dtype, std::vector<int64_t> dims) {
  return {dtype, true, std::move(dims)};
}
Tensor ints(std::vector<int64_t> v) {
  return Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v);
}
Tensor scalar(int64_t v) {
  return Tensor::from_vector<int64_t>({}, {v});
}

// Run-time shape inference of `node` (every value known); values[i] undefined = not a value.
std::vector<TypeShape> infer(const Node& node, const std::vector<TypeShape>& inputs,
                             const std::vector<Tensor>& values = {}) {
  const OpSchema* schema = SchemaRegistry::builtin().find(node.op_type, node.domain, node.opset);
  EXPECT_NE(schema, nullptr) << node.op_type;
  std::vector<const Tensor*> ptrs(inputs.size(), nullptr);
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].defined()) ptrs[i] = &values[i];
  return infer_node(*schema, node, inputs, ptrs, true);
}

// The message of the Error that inference of `node` throws (InvalidModel), or "no error".
std::string error_of(const Node& node, const std::vector<TypeShape>& inputs,
                     const std::vector<Tensor>& values = {}) {
  try {
    infer(node, inputs, values);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidModel) << e.what();
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(Checked, ComputesInRangeAndNamesTheNodeAndTheOperandsOnOverflow) {
  Node n = make("Conv", 17, 2);
  n.name = "c";
  const Checked c(n, "output size");
  EXPECT_EQ(c.add(kMax - 1, 1), kMax);
  EXPECT_EQ(c.sub(kMin + 1, 1), kMin);
  EXPECT_EQ(c.mul(k2p62, -2), kMin);
  EXPECT_EQ(c.product(std::vector<int64_t>{k2p62, 2, 0}), 0);  // 0 wins, whatever comes before
  EXPECT_EQ(c.product(std::vector<int64_t>{}), 1);
  EXPECT_EQ(c.mul_dims(-1, k2p62), -1);
  EXPECT_EQ(c.to_int64(-9223372036854775808.0), kMin);
  EXPECT_EQ(c.to_int64(-2.5), -2);
  expect_error([&] { c.add(6, kMax); }, ErrorCode::InvalidModel,
               {"[Conv node \"c\"] output size overflows int64: 6 + 9223372036854775807"});
  expect_error([&] { c.sub(kMin, 1); }, ErrorCode::InvalidModel,
               {"output size overflows int64: -9223372036854775808 - 1"});
  expect_error(
      [&] {
        c.product(std::vector<int64_t>{k2p32, k2p32});
      },
      ErrorCode::InvalidModel, {"output size overflows int64: 4294967296 * 4294967296"});
  expect_error([&] { c.to_int64(9223372036854775808.0); }, ErrorCode::InvalidModel,
               {"output size overflows int64: 9.22337e+18"});
  expect_error([&] { c.to_int64(std::nan("")); }, ErrorCode::InvalidModel,
               {"output size overflows int64: nan"});
  const Checked where([] { return std::string("tensor 'x'"); }, "byte size",
                      ErrorCode::OutOfMemory);
  expect_error([&] { where.mul(k2p62, 4); }, ErrorCode::OutOfMemory,
               {"tensor 'x': byte size overflows int64: 4611686018427387904 * 4"});
}

TEST(Checked, TypeShapeBytesOverflowIsOutOfMemory) {
  EXPECT_EQ((TypeShape{DType::Float32, true, {k2p32, 4}}.bytes()), k2p32 * 16);
  EXPECT_EQ((TypeShape{DType::Float32, true, {k2p62, 0}}.bytes()), 0);
  expect_error(
      [] {
        (TypeShape{DType::Float32, true, {k2p62, 4}}).bytes();
      },
      ErrorCode::OutOfMemory,
      {"tensor of shape [4611686018427387904, 4] (float32): byte size "
       "overflows int64: 4611686018427387904 * 4"});
}

TEST(ShapeOverflow, ConvPadsStridesDilationsAndGroup) {
  const std::vector<TypeShape> in = {f32({1, 1, 5, 5}), f32({1, 1, 3, 3})};
  Node pads = make("Conv", 17, 2);
  set(pads, "pads", {kMax, 0, 0, 0});
  EXPECT_EQ(error_of(pads, in),
            "[Conv node \"conv\"] output size overflows int64: 5 + 9223372036854775807");
  Node same = make("Conv", 17, 2);
  set(same, "strides", {kMax, 1});
  set(same, "auto_pad", "SAME_UPPER");
  EXPECT_EQ(error_of(same, in),
            "[Conv node \"conv\"] output size overflows int64: 5 + 9223372036854775806");
  Node dilated = make("Conv", 17, 2);
  set(dilated, "dilations", {k2p62, 1});
  EXPECT_EQ(error_of(dilated, in),
            "[Conv node \"conv\"] output size overflows int64: 2 * 4611686018427387904");
  Node group = make("Conv", 17, 2);
  set(group, "group", k2p62);
  EXPECT_EQ(error_of(group, {f32({1, 4, 5, 5}), f32({2, 2, 3, 3})}),
            "[Conv node \"conv\"] channel count overflows int64: 2 * 4611686018427387904");
}

TEST(ShapeOverflow, PoolsConvTransposeAndMaxUnpool) {
  Node pool = make("MaxPool", 17, 1);
  set(pool, "kernel_shape", {1, 1});
  set(pool, "strides", {kMax, 1});
  set(pool, "ceil_mode", 1);
  EXPECT_EQ(error_of(pool, {f32({1, 1, 5, 5})}),
            "[MaxPool node \"maxpool\"] output size overflows int64: 4 + 9223372036854775806");
  Node dilated_pool = make("MaxPool", 17, 1);
  set(dilated_pool, "kernel_shape", {3, 3});
  set(dilated_pool, "dilations", {k2p62, 1});
  EXPECT_EQ(error_of(dilated_pool, {f32({1, 1, 5, 5})}),
            "[MaxPool node \"maxpool\"] window extent overflows int64: 2 * 4611686018427387904");
  // Under SAME the output size does not need the window, but the padding the kernels compute
  // from it does.
  Node same_pool = make("MaxPool", 17, 1);
  set(same_pool, "kernel_shape", {3, 3});
  set(same_pool, "dilations", {k2p62, 1});
  set(same_pool, "auto_pad", "SAME_UPPER");
  EXPECT_EQ(error_of(same_pool, {f32({1, 1, 5, 5})}),
            "[MaxPool node \"maxpool\"] output size overflows int64: 2 * 4611686018427387904");
  Node same_wide_pool = make("AveragePool", 19, 1);
  set(same_wide_pool, "kernel_shape", {kMax, 3});
  set(same_wide_pool, "auto_pad", "SAME_LOWER");
  EXPECT_EQ(error_of(same_wide_pool, {f32({1, 1, 5, 5})}),
            "[AveragePool node \"averagepool\"] output size overflows int64: 4 + "
            "9223372036854775807");
  Node transpose = make("ConvTranspose", 17, 2);
  set(transpose, "strides", {k2p62, 1});
  EXPECT_EQ(error_of(transpose, {f32({1, 1, 5, 5}), f32({1, 1, 3, 3})}),
            "[ConvTranspose node \"convtranspose\"] output size overflows int64: "
            "4611686018427387904 * 4");
  Node unpool = make("MaxUnpool", 17, 2);
  set(unpool, "kernel_shape", {2, 2});
  set(unpool, "strides", {k2p62, 1});
  EXPECT_EQ(error_of(unpool, {f32({1, 1, 5, 5}), of(DType::Int64, {1, 1, 5, 5})}),
            "[MaxUnpool node \"maxunpool\"] output size overflows int64: "
            "4 * 4611686018427387904");
}

TEST(ShapeOverflow, RecurrentHiddenSize) {
  Node lstm = make("LSTM", 14, 3);
  set(lstm, "hidden_size", k2p62);
  EXPECT_EQ(error_of(lstm, {f32({2, 1, 3}), f32({1, 4, 3}), f32({1, 4, 1})}),
            "[LSTM node \"lstm\"] gates * hidden_size overflows int64: 4 * 4611686018427387904");
}

TEST(ShapeOverflow, TensorOpsTilePadConcatSplitReshapeFlatten) {
  Node tile = make("Tile", 17, 2);
  EXPECT_EQ(error_of(tile, {f32({4}), of(DType::Int64, {1})}, {Tensor(), ints({k2p62})}),
            "[Tile node \"tile\"] output size overflows int64: 4 * 4611686018427387904");
  Node pad = make("Pad", 2, 1);
  set(pad, "pads", {kMax, 1});
  EXPECT_EQ(error_of(pad, {f32({4})}),
            "[Pad node \"pad\"] padded size overflows int64: 4 + 9223372036854775807");
  Node concat = make("Concat", 17, 2);
  set(concat, "axis", int64_t{0});
  EXPECT_EQ(error_of(concat, {f32({kMax}), f32({1})}),
            "[Concat node \"concat\"] concatenated size overflows int64: "
            "9223372036854775807 + 1");
  Node split = make("Split", 11, 1, 2);
  set(split, "split", {kMax, 1});
  EXPECT_EQ(error_of(split, {f32({4})}),
            "[Split node \"split\"] the sum of split overflows int64: 9223372036854775807 + 1");
  Node reshape = make("Reshape", 13, 2);
  EXPECT_EQ(error_of(reshape, {f32({k2p32, k2p32}), of(DType::Int64, {1})}, {Tensor(), ints({-1})}),
            "[Reshape node \"reshape\"] element count overflows int64: 4294967296 * 4294967296");
  Node flatten = make("Flatten", 13, 1);
  EXPECT_EQ(error_of(flatten, {f32({2, k2p32, k2p32})}),
            "[Flatten node \"flatten\"] element count overflows int64: 4294967296 * 4294967296");
  Node d2s = make("DepthToSpace", 13, 1);
  set(d2s, "blocksize", k2p32);
  EXPECT_EQ(error_of(d2s, {f32({1, 4, 2, 2})}),
            "[DepthToSpace node \"depthtospace\"] output size overflows int64: "
            "4294967296 * 4294967296");
  Node s2d = make("SpaceToDepth", 13, 1);
  set(s2d, "blocksize", int64_t{2});
  EXPECT_EQ(error_of(s2d, {f32({1, k2p62, 2, 2})}),
            "[SpaceToDepth node \"spacetodepth\"] output channel count overflows int64: "
            "4611686018427387904 * 2");
}

TEST(ShapeOverflow, SliceAndSplitOfAHugeAxisAreExactWithoutOverflow) {
  Node slice = make("Slice", 13, 3);
  const TypeShape one = of(DType::Int64, {1});
  auto out = infer(slice, {f32({kMax}), one, one}, {Tensor(), ints({0}), ints({kMax})});
  EXPECT_EQ(out[0].dims, std::vector<int64_t>{kMax});
  slice = make("Slice", 13, 5);
  slice.inputs[3] = "";  // no axes
  const std::vector<TypeShape> with_steps = {f32({kMax}), one, one, TypeShape{}, one};
  out = infer(slice, with_steps, {Tensor(), ints({0}), ints({kMax}), Tensor(), ints({2})});
  EXPECT_EQ(out[0].dims, std::vector<int64_t>{k2p62});
  out = infer(slice, with_steps, {Tensor(), ints({kMax}), ints({kMin}), Tensor(), ints({-2})});
  EXPECT_EQ(out[0].dims, std::vector<int64_t>{k2p62});
  out = infer(slice, with_steps, {Tensor(), ints({1}), ints({kMax}), Tensor(), ints({kMin})});
  EXPECT_EQ(out[0].dims, std::vector<int64_t>{0});
  Node split = make("Split", 18, 1, 2);
  set(split, "num_outputs", int64_t{2});
  out = infer(split, {f32({kMax})});
  EXPECT_EQ(out[0].dims, std::vector<int64_t>{k2p62});
  EXPECT_EQ(out[1].dims, std::vector<int64_t>{k2p62 - 1});
  out = infer(split, {f32({0})});
  EXPECT_EQ(out[0].dims, std::vector<int64_t>{0});
  EXPECT_EQ(out[1].dims, std::vector<int64_t>{0});
}

TEST(ShapeOverflow, RangeCountsInWideArithmetic) {
  Node range = make("Range", 11, 3);
  const std::vector<TypeShape> in(3, of(DType::Int64, {}));
  auto out = infer(range, in, {scalar(kMin), scalar(kMax), scalar(k2p62)});
  EXPECT_EQ(out[0].dims, std::vector<int64_t>{4});
  out = infer(range, in, {scalar(kMax), scalar(kMin), scalar(kMin)});
  EXPECT_EQ(out[0].dims, std::vector<int64_t>{2});
  EXPECT_EQ(error_of(range, in, {scalar(kMin), scalar(kMax), scalar(1)}),
            "[Range node \"range\"] the range has more than 2^63 elements");
}

TEST(ShapeOverflow, FloatSizesResizeAndOneHot) {
  Node resize = make("Resize", 13, 3);
  resize.inputs[1] = "";  // no roi
  const Tensor scales = Tensor::from_vector<float>({4}, {1, 1, 1e30f, 1});
  EXPECT_EQ(
      error_of(resize, {f32({1, 1, 4, 4}), TypeShape{}, f32({4})}, {Tensor(), Tensor(), scales}),
      "[Resize node \"resize\"] output size overflows int64: 4e+30");
  Node one_hot = make("OneHot", 11, 3);
  EXPECT_EQ(error_of(one_hot, {of(DType::Int64, {3}), f32({}), f32({2})},
                     {Tensor(), Tensor::from_vector<float>({}, {1e30f})}),
            "[OneHot node \"onehot\"] depth overflows int64: 1e+30");
}

TEST(ShapeOverflow, ColumnsToImageAndDeformableConv) {
  Node col2im = make("Col2Im", 18, 3);
  EXPECT_EQ(error_of(col2im, {f32({1, 1, 4}), of(DType::Int64, {2}), of(DType::Int64, {2})},
                     {Tensor(), ints({k2p62, 4}), ints({1, 1})}),
            "[Col2Im node \"col2im\"] block count overflows int64: 4611686018427387904 * 4");
  const std::vector<TypeShape> in = {f32({1, 1, 5, 5}), f32({1, 1, 3, 3}), f32({1, 18, 3, 3})};
  Node zero_stride = make("DeformConv", 19, 3);
  set(zero_stride, "strides", {0, 1});  // was a division by zero
  EXPECT_EQ(error_of(zero_stride, in),
            "[DeformConv node \"deformconv\"] strides [0, 1], dilations [1, 1] and pads "
            "[0, 0, 0, 0]: expected positive strides and dilations, non-negative pads");
  Node dilated = make("DeformConv", 19, 3);
  set(dilated, "dilations", {k2p62, 1});
  EXPECT_EQ(error_of(dilated, in),
            "[DeformConv node \"deformconv\"] DeformConv size overflows int64: "
            "2 * 4611686018427387904");
}

TEST(ShapeOverflow, QuantizedOpsAndLayouts) {
  Node conv = make("QLinearConv", 10, 8);
  set(conv, "dilations", {k2p62, 1});
  const TypeShape u8 = of(DType::UInt8, {}), scale = f32({});
  EXPECT_EQ(error_of(conv, {of(DType::UInt8, {1, 1, 5, 5}), scale, u8,
                            of(DType::UInt8, {1, 1, 3, 3}), scale, u8, scale, u8}),
            "[QLinearConv node \"qlinearconv\"] output size overflows int64: "
            "2 * 4611686018427387904");
  Node dq = make("DequantizeLinear", 13, 2);
  set(dq, "axis", int64_t{2});
  EXPECT_EQ(error_of(dq, {of(DType::Int8, {k2p32, k2p32, 4}), f32({4})}),
            "[DequantizeLinear node \"dequantizelinear\"] x's element count overflows int64: "
            "4294967296 * 4294967296");
}

TEST(ShapeOverflow, ElementCountsOfOtherOps) {
  Node compress = make("Compress", 11, 2);
  EXPECT_EQ(error_of(compress, {f32({k2p32, k2p32}), of(DType::Bool, {3})}),
            "[Compress node \"compress\"] element count overflows int64: "
            "4294967296 * 4294967296");
  Node prelu = make("PRelu", 6, 2);
  EXPECT_EQ(error_of(prelu, {f32({2, 3}), f32({k2p32, k2p32})}),
            "[PRelu node \"prelu\"] slope size overflows int64: 4294967296 * 4294967296");
  Node features = make("ArrayFeatureExtractor", 1, 2);
  features.domain = "ai.onnx.ml";
  EXPECT_EQ(error_of(features, {f32({2, 3}), of(DType::Int64, {k2p32, k2p32})}),
            "[ArrayFeatureExtractor node \"arrayfeatureextractor\"] element count "
            "overflows int64: 4294967296 * 4294967296");
  Node attention = make("LinearAttention", 27, 3, 2);
  set(attention, "q_num_heads", int64_t{4});
  set(attention, "kv_num_heads", int64_t{1});
  EXPECT_EQ(error_of(attention, {f32({1, 2, 8}), f32({1, 2, 8}), f32({1, 2, k2p62})}),
            "[LinearAttention node \"linearattention\"] output hidden size overflows int64: "
            "4 * 4611686018427387904");
  Node dft = make("DFT", 20, 1);
  set(dft, "inverse", int64_t{1});
  set(dft, "onesided", int64_t{1});
  EXPECT_EQ(error_of(dft, {f32({1, k2p62 + 1, 2})}),
            "[DFT node \"dft\"] default dft_length overflows int64: 2 * 4611686018427387904");
  // fuzz_model: an n-gram index of INT64_MAX made the output width INT64_MAX + 1.
  Node tfidf = make("TfIdfVectorizer", 9, 1);
  set(tfidf, "mode", "TF");
  set(tfidf, "min_gram_length", int64_t{1});
  set(tfidf, "max_gram_length", int64_t{1});
  set(tfidf, "ngram_indexes", std::vector<int64_t>{0, kMax});
  EXPECT_EQ(error_of(tfidf, {of(DType::Int64, {2, 5})}),
            "[TfIdfVectorizer node \"tfidfvectorizer\"] output width overflows int64: "
            "9223372036854775807 + 1");
}

TEST(ShapeOverflow, UniqueCountsOfUnknownAndHugeShapes) {
  // Without its value, Unique's outputs are open; the flattened count of a shape with an unknown
  // dim is unknown (it was the product with -1: a negative dim, e.g. -3 for [-1, 3]).
  Node unique = make("Unique", 11, 1, 4);
  auto out = infer(unique, {f32({-1, 3})});
  EXPECT_EQ(out[2].dims, std::vector<int64_t>{-1});
  out = infer(unique, {f32({2, 3})});
  EXPECT_EQ(out[2].dims, std::vector<int64_t>{6});
  EXPECT_EQ(error_of(unique, {f32({k2p32, k2p32})}),
            "[Unique node \"unique\"] element count overflows int64: 4294967296 * 4294967296");
  set(unique, "axis", int64_t{1});
  EXPECT_EQ(error_of(unique, {f32({k2p32, 2, k2p32, k2p32})}),
            "[Unique node \"unique\"] element count overflows int64: 4294967296 * 4294967296");
}
