// MatMul + Add of a constant bias -> Gemm, where the product is a plain matrix product: A known
// to be 2-D and B a constant matrix. Exporters write Linear layers this way when they keep a
// batch dim symbolic or write opsets where Gemm was not their choice; a backend that runs Gemm
// then gets the bias in the same op.
#include "core/optimize/rewriter.hpp"

namespace quilt::optimize {
namespace {

// c added to an [m, n] product keeps that shape, as Gemm's C (unidirectional broadcast) does.
// m < 0: unknown.
bool bias_fits(const Tensor& c, int64_t m, int64_t n) {
  if (c.dtype() != DType::Float32 || c.rank() > 2) return false;
  if (c.rank() >= 1 && c.dim(c.rank() - 1) != 1 && c.dim(c.rank() - 1) != n) return false;
  return c.rank() < 2 || c.dim(0) == 1 || (m >= 0 && c.dim(0) == m);
}

}  // namespace

void matmul_add_to_gemm(Rewriter& r) {
  for (size_t i : r.reverse_order()) {
    const Node& add = r.node(i);
    if (!r.live(i) || !is_op(&add, "Add") || add.opset < 7 || add.inputs.size() != 2) continue;
    for (size_t s = 0; s < 2; ++s) {
      const Node* mm = r.producer(add.inputs[s]);
      const Tensor* c = r.constant(add.inputs[1 - s]);
      if (!is_op(mm, "MatMul") || !c || mm->inputs.size() != 2) continue;
      const TypeShape& a = r.type(mm->inputs[0]);
      const Tensor* b = r.constant(mm->inputs[1]);
      if (a.dtype != DType::Float32 || !a.has_shape || a.dims.size() != 2 || !b ||
          b->dtype() != DType::Float32 || b->rank() != 2 || !bias_fits(*c, a.dims[0], b->dim(1)))
        continue;
      Node gemm =
          make_node("Gemm", add, 7, {mm->inputs[0], mm->inputs[1], add.inputs[1 - s]}, add.outputs);
      if (r.fuse({r.index_of(mm)}, i, std::move(gemm))) {
        r.count("matmul+add into gemm");
        break;
      }
    }
  }
}

}  // namespace quilt::optimize
