// quilt_graph_t::constant_done (ABI 1.1) from the CPU backend: it lets the host free a weight as
// soon as every kernel that reads it has made its own packed copy, and never otherwise.
#include <gtest/gtest.h>

#include <set>

#include "core/backend_registry.hpp"
#include "core/device.hpp"

namespace quilt {
namespace {

struct Compiled {
  std::set<int32_t> done;  // values the backend said it no longer reads
};

// Compiles y = MatMul(a, w) [, z = Add(w, w) when w_read_elsewhere] with a of type a_type.
Compiled compile_matmul(const TypeShape& a_type, bool w_read_elsewhere) {
  const quilt_backend_t* api = cpu_backend_api();
  quilt_device_t device = nullptr;
  EXPECT_EQ(api->device_open(api->context, 0, nullptr, 0, &device), nullptr);
  Tensor w = Tensor::from_vector<float>({8, 5}, std::vector<float>(40, 0.5f));
  Node mm, add;
  mm.name = "mm";
  mm.op_type = "MatMul";
  mm.opset = 13;
  mm.inputs = {"a", "w"};
  mm.outputs = {"y"};
  add.name = "add";
  add.op_type = "Add";
  add.opset = 13;
  add.inputs = {"w", "w"};
  add.outputs = {"z"};
  AbiGraph g;
  const int a = g.add_value("a", a_type, nullptr);
  const int wv = g.add_value("w", TypeShape::of(w), &w);
  const int y = g.add_value("y", TypeShape{DType::Float32, true, {4, 5}}, nullptr);
  g.add_node(mm, {a, wv}, {y});
  std::vector<int32_t> outputs = {y};
  if (w_read_elsewhere) {
    const int z = g.add_value("z", TypeShape::of(w), nullptr);
    g.add_node(add, {wv, wv}, {z});
    outputs.push_back(z);
  }
  g.set_inputs({a});
  g.set_outputs(outputs);
  Compiled result;
  g.set_constant_done(
      [](void* context, int32_t value) { static_cast<Compiled*>(context)->done.insert(value); },
      &result);
  quilt_executable_t exe = nullptr;
  EXPECT_EQ(api->compile(device, g.get(), &exe), nullptr);
  api->executable_release(device, exe);
  api->device_close(device);
  return result;
}

TEST(ConstantDone, PackedWeightsAreHandedBack) {
  const Compiled c = compile_matmul(TypeShape{DType::Float32, true, {-1, 8}}, false);
  EXPECT_EQ(c.done, std::set<int32_t>{1});
}

TEST(ConstantDone, NotWhenTheKernelMayStillReadThem) {
  // A's shape unknown: the kernel may fall back to the unpacked path, which reads w.
  EXPECT_TRUE(compile_matmul(TypeShape{DType::Float32, false, {}}, false).done.empty());
  // Another node reads w too.
  EXPECT_TRUE(compile_matmul(TypeShape{DType::Float32, true, {4, 8}}, true).done.empty());
}

}  // namespace
}  // namespace quilt
