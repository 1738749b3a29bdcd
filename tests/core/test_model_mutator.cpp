// The fuzzers' structure-aware ModelProto mutator (tests/fuzz/model_mutator.hpp), on the test
// models: every mutation kind happens, structural mutants are models that differ from the
// original in the way the kind says, results respect max_size, the same seed gives the same
// mutant, and what is not a model goes to the byte-level fallback.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tests/fuzz/model_mutator.hpp"

namespace {

namespace fs = std::filesystem;
using quilt::fuzz::Mutation;

int g_fallback_calls = 0;

// The byte-level fallback's stand-in (libFuzzer's LLVMFuzzerMutate is only callable inside a
// fuzzing run): flips the first byte, so its use is visible.
size_t flip_first_byte(uint8_t* data, size_t size, size_t max_size) {
  ++g_fallback_calls;
  if (size == 0) {
    if (max_size == 0) return 0;
    data[0] = 0x5a;
    return 1;
  }
  data[0] ^= 0xff;
  return size;
}

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The well-formed test models with a graph of several nodes (tests/models/gen_test_models.py).
std::vector<std::vector<uint8_t>> test_models() {
  std::vector<std::vector<uint8_t>> models;
  for (const char* name : {"add_relu.onnx", "attributes.onnx", "stress_dynamic.onnx",
                           "hetero_dynamic.onnx", "two_outputs.onnx", "typed_initializers.onnx"}) {
    auto bytes = read_bytes(fs::path(QUILT_TEST_MODELS_DIR) / name);
    EXPECT_FALSE(bytes.empty()) << name;
    models.push_back(std::move(bytes));
  }
  return models;
}

onnx::ModelProto parse(const uint8_t* data, size_t size) {
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromArray(data, int(size)));
  return m;
}

std::vector<std::string> op_types(const onnx::ModelProto& m) {
  std::vector<std::string> ops;
  for (const auto& n : m.graph().node()) ops.push_back(n.op_type());
  return ops;
}

// Attributes of every node, subgraphs' included.
size_t attribute_count(const onnx::GraphProto& g) {
  size_t n = 0;
  for (const auto& node : g.node()) {
    n += size_t(node.attribute_size());
    for (const auto& a : node.attribute()) {
      if (a.has_g()) n += attribute_count(a.g());
      for (const auto& sub : a.graphs()) n += attribute_count(sub);
    }
  }
  return n;
}

}  // namespace

TEST(ModelMutator, EveryKindHappensAndStructuralMutantsAreModelsThatChanged) {
  const auto models = test_models();
  std::map<Mutation, int> kinds;
  int structural = 0, changed = 0;
  unsigned seed = 0;
  for (const auto& original : models) {
    const size_t max_size = original.size() * 2 + 4096;
    for (int i = 0; i < 400; ++i, ++seed) {
      std::vector<uint8_t> buf(original);
      buf.resize(max_size);
      Mutation kind;
      const size_t n = quilt::fuzz::mutate_model(buf.data(), original.size(), max_size, seed,
                                                 flip_first_byte, &kind);
      ASSERT_LE(n, max_size);
      ++kinds[kind];
      if (kind == Mutation::Bytes) continue;
      ++structural;
      const onnx::ModelProto before = parse(original.data(), original.size());
      const onnx::ModelProto after = parse(buf.data(), n);
      if (after.SerializeAsString() != before.SerializeAsString()) ++changed;
      if (!after.has_graph()) {  // only clearing the graph field takes it away
        EXPECT_EQ(kind, Mutation::ClearField);
        continue;
      }
      if (kind == Mutation::OpType) {  // the same nodes, at most one op type differs
        const auto a = op_types(before), b = op_types(after);
        ASSERT_EQ(a.size(), b.size());
        int differ = 0;
        for (size_t k = 0; k < a.size(); ++k) differ += a[k] != b[k];
        EXPECT_LE(differ, 1);
      }
      if (kind == Mutation::AddAttribute) {
        EXPECT_EQ(attribute_count(after.graph()), attribute_count(before.graph()) + 1);
      }
    }
  }
  for (int k = 0; k < int(Mutation::kCount); ++k)
    EXPECT_GT(kinds[Mutation(k)], 0) << "mutation kind " << k << " never happened";
  // About three in four calls mutate the structure; a mutant equal to its original is rare (an
  // edge value the field already had, two equal elements swapped).
  EXPECT_GT(structural, int(models.size()) * 400 / 2);
  EXPECT_GT(changed, structural * 9 / 10);
}

TEST(ModelMutator, TheSameSeedGivesTheSameMutant) {
  const auto original = test_models().at(2);
  const size_t max_size = original.size() + 4096;
  for (unsigned seed : {1u, 7u, 12345u, 4000000000u}) {
    std::vector<uint8_t> a(original), b(original);
    a.resize(max_size);
    b.resize(max_size);
    const size_t na =
        quilt::fuzz::mutate_model(a.data(), original.size(), max_size, seed, flip_first_byte);
    const size_t nb =
        quilt::fuzz::mutate_model(b.data(), original.size(), max_size, seed, flip_first_byte);
    ASSERT_EQ(na, nb);
    EXPECT_TRUE(std::equal(a.begin(), a.begin() + long(na), b.begin())) << "seed " << seed;
  }
}

TEST(ModelMutator, NeverWritesPastMaxSize) {
  // max_size equal to the model's size: a mutant that grows does not fit, the fallback runs.
  for (const auto& original : test_models()) {
    for (unsigned seed = 0; seed < 200; ++seed) {
      std::vector<uint8_t> buf(original);
      buf.push_back(0xee);  // a guard byte just past max_size
      const size_t n = quilt::fuzz::mutate_model(buf.data(), original.size(), original.size(), seed,
                                                 flip_first_byte);
      EXPECT_LE(n, original.size());
      EXPECT_EQ(buf.back(), 0xee);
    }
  }
}

TEST(ModelMutator, WhatIsNotAModelGoesToTheByteLevelFallback) {
  for (const std::string& text : {std::string("this is not an ONNX model\n"), std::string()}) {
    std::vector<uint8_t> buf(text.begin(), text.end());
    buf.resize(64);
    g_fallback_calls = 0;
    Mutation kind = Mutation::Number;
    const size_t n =
        quilt::fuzz::mutate_model(buf.data(), text.size(), buf.size(), 3, flip_first_byte, &kind);
    EXPECT_EQ(kind, Mutation::Bytes);
    EXPECT_EQ(g_fallback_calls, 1);
    EXPECT_EQ(n, text.empty() ? 1u : text.size());
  }
}

TEST(ModelMutator, CrossOverPutsANodeOrInitializerOfOneModelIntoTheOther) {
  const auto models = test_models();
  const auto& a = models.at(0);  // add_relu: 2 nodes, 1 initializer
  const auto& b = models.at(2);  // stress_dynamic
  const onnx::ModelProto ma = parse(a.data(), a.size());
  std::vector<uint8_t> out(a.size() + b.size() + 4096);
  int nodes = 0, initializers = 0;
  for (unsigned seed = 0; seed < 100; ++seed) {
    const size_t n = quilt::fuzz::cross_over_models(a.data(), a.size(), b.data(), b.size(),
                                                    out.data(), out.size(), seed);
    ASSERT_GT(n, 0u);
    const onnx::ModelProto m = parse(out.data(), n);
    const int more_nodes = m.graph().node_size() - ma.graph().node_size();
    const int more_inits = m.graph().initializer_size() - ma.graph().initializer_size();
    EXPECT_EQ(more_nodes + more_inits, 1) << "seed " << seed;
    nodes += more_nodes;
    initializers += more_inits;
  }
  EXPECT_GT(nodes, 0);
  EXPECT_GT(initializers, 0);
  // Not a model on either side, or no room: nothing (libFuzzer then skips the crossover).
  const std::string junk = "not a model";
  EXPECT_EQ(quilt::fuzz::cross_over_models(a.data(), a.size(),
                                           reinterpret_cast<const uint8_t*>(junk.data()),
                                           junk.size(), out.data(), out.size(), 1),
            0u);
  EXPECT_EQ(quilt::fuzz::cross_over_models(a.data(), a.size(), b.data(), b.size(), out.data(),
                                           a.size() / 2, 1),
            0u);
}
