// MatMul (numpy semantics: batch dims broadcast, rank-1 operands promoted) and Gemm (transA,
// transB, alpha, beta, C broadcast) on the register-blocked kernel of kernels_cl/gemm.cl.
// B is packed in panels of kTileCols columns (the kernel's layout): a constant B (weights) once
// at compile, on the host; any other B by the pack_b kernel into a pool buffer at each run.
// Gemm's transposed A is first transposed into a pool buffer.
#include <cstring>

#include "opencl.hpp"

namespace quilt::opencl {

namespace {

// Each work-item computes kTileRows x kTileCols outputs (GEMM_TM x GEMM_TN in gemm.cl: keep them
// equal); work-groups are kLocalX x kLocalY work-items. Measured on PoCL: 8 x 16 beat 8 x 8 and
// 4 x 16 at 1024^3 and at BERT shapes.
constexpr size_t kTileRows = 8, kTileCols = 16, kLocalX = 4, kLocalY = 4;

struct GemmArgs {
  int64_t m, n, k;
  cl_mem a, b, c;
  cl_mem packed_b = nullptr;  // B already packed (a constant, at compile)
  int64_t lda;
  int64_t b_batches = 1;  // B's own batch count (contiguous K x N matrices), packed before gemm
  float alpha = 1, beta = 0;
  cl_mem bias = nullptr;
  int64_t bias_rs = 0, bias_cs = 0;
  cl_int4 bdims{{1, 1, 1, 1}}, a_bstride{{0, 0, 0, 0}}, b_bstride{{0, 0, 0, 0}};
  int64_t batch = 1;
};

Status run_gemm(Launch& launch, const GemmArgs& g) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return {};
  // B packed in panels: each work-item then streams its K x kTileCols panel contiguously.
  const int64_t padded = (g.n + kTileCols - 1) / kTileCols * kTileCols;
  cl_mem packed = g.packed_b;
  cl_int4 b_bstride = g.b_bstride;
  if (g.k > 0) {
    for (int d = 0; d < 4; ++d)
      b_bstride.s[d] = static_cast<cl_int>(b_bstride.s[d] / (g.k * g.n) * (g.k * padded));
  }
  if (g.k > 0 && !packed) {
    if (Status s = launch.scratch(g.b_batches * g.k * padded * sizeof(float), &packed); !s.ok())
      return s;
    Status s =
        launch.run("gemm", "pack_b",
                   {static_cast<size_t>(padded / kTileCols), static_cast<size_t>(g.k),
                    static_cast<size_t>(g.b_batches)},
                   {1, 16, 1}, g.b, packed, static_cast<cl_int>(g.k), static_cast<cl_int>(g.n));
    if (!s.ok()) return s;
  }
  const std::array<size_t, 3> global{static_cast<size_t>((g.n + kTileCols - 1) / kTileCols),
                                     static_cast<size_t>((g.m + kTileRows - 1) / kTileRows),
                                     static_cast<size_t>(g.batch)};
  const cl_int use_bias = g.bias ? 1 : 0;
  return launch.run("gemm", "gemm", global, {kLocalX, kLocalY, 1}, static_cast<cl_int>(g.m),
                    static_cast<cl_int>(g.n), static_cast<cl_int>(g.k), g.a,
                    static_cast<cl_int>(g.lda), packed, g.c, g.alpha, g.beta, g.bias,
                    static_cast<cl_int>(g.bias_rs), static_cast<cl_int>(g.bias_cs), use_bias,
                    g.bdims, g.a_bstride, b_bstride);
}

// Transposes a rows x cols matrix into a pool buffer.
Status transposed(Launch& launch, cl_mem src, int64_t rows, int64_t cols, cl_mem* out) {
  if (rows * cols == 0) return {};
  if (Status s = launch.scratch(rows * cols * sizeof(float), out); !s.ok()) return s;
  return launch.run("gemm", "transpose", {static_cast<size_t>(cols), static_cast<size_t>(rows), 1},
                    {16, 4, 1}, src, *out, static_cast<cl_int>(rows), static_cast<cl_int>(cols));
}

}  // namespace

Status enqueue_own_gemm(Launch& launch, int64_t m, int64_t n, int64_t k, cl_mem a, cl_mem b,
                        cl_mem c) {
  GemmArgs g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a;
  g.b = b;
  g.c = c;
  g.lda = k;
  return run_gemm(launch, g);
}

std::string prepare_matmul(const NodeView& view, NodeDesc*) {
  for (size_t i = 0; i < 2; ++i) {
    const quilt_value_t* v = view.input(i);
    if (v->info.rank == 0)
      return std::string("MatMul: input '") + v->name + "' is a scalar, expected rank >= 1";
    if (v->info.rank > 6) return std::string("MatMul: input '") + v->name + "' has rank > 6";
  }
  const quilt_tensor_info_t &a = view.input(0)->info, &b = view.input(1)->info;
  int64_t ka = a.dims[a.rank - 1], kb = b.rank == 1 ? b.dims[0] : b.dims[b.rank - 2];
  if (ka >= 0 && kb >= 0 && ka != kb) return "MatMul: inner dims differ";
  return "";
}

Status enqueue_matmul(Launch& launch, const NodeDesc& desc) {
  auto in_a = launch.dims(desc.inputs[0]), in_b = launch.dims(desc.inputs[1]);
  if (in_a.empty() || in_b.empty())
    return fail(QUILT_STATUS_INVALID_ARGUMENT, "MatMul: scalar operand");
  // Rank-1 operands are promoted: a to [1, K], b to [K, 1].
  std::vector<int64_t> a = in_a.size() == 1 ? std::vector<int64_t>{1, in_a[0]}
                                            : std::vector<int64_t>(in_a.begin(), in_a.end());
  std::vector<int64_t> b = in_b.size() == 1 ? std::vector<int64_t>{in_b[0], 1}
                                            : std::vector<int64_t>(in_b.begin(), in_b.end());
  GemmArgs g;
  g.m = a[a.size() - 2];
  g.k = a.back();
  g.n = b.back();
  if (b[b.size() - 2] != g.k)
    return fail(QUILT_STATUS_INVALID_ARGUMENT, "MatMul: inner dims of " + format_dims(in_a) +
                                                   " and " + format_dims(in_b) + " differ");
  // One B for every batch (2-D, or batch dims all 1): A's batch dims fold into M, so
  // [197, 1, 768] x [768, 2304] is one 197-row GEMM, not 197 one-row GEMMs. Row-major A and C
  // are laid out the same either way.
  if (a.size() > 2 && element_count(std::span<const int64_t>(b.data(), b.size() - 2)) == 1) {
    g.m = element_count(std::span<const int64_t>(a.data(), a.size() - 1));
    a = {g.m, g.k};
    b = {g.k, g.n};
  }
  g.a = launch.buffer(desc.inputs[0]);
  g.b = launch.buffer(desc.inputs[1]);
  g.c = launch.buffer(desc.outputs[0]);
  g.lda = g.k;
  g.b_batches = element_count(std::span<const int64_t>(b.data(), b.size() - 2));
  if (desc.packed) g.packed_b = desc.packed->get();
  // Batch dims: broadcast, strides in elements (0 where broadcast), merged where contiguous.
  std::span<const int64_t> ba(a.data(), a.size() - 2), bb(b.data(), b.size() - 2);
  std::vector<int64_t> batch;
  if (!broadcast_shape(ba, bb, &batch))
    return fail(QUILT_STATUS_INVALID_ARGUMENT, "MatMul: batch dims of " + format_dims(in_a) +
                                                   " and " + format_dims(in_b) +
                                                   " do not broadcast");
  const size_t rank = batch.size();
  std::vector<int64_t> sa(rank, 0), sb(rank, 0);
  auto strides = [&](std::span<const int64_t> d, int64_t unit, std::vector<int64_t>& s) {
    int64_t stride = unit;
    for (size_t i = 0; i < d.size(); ++i) {
      size_t k = d.size() - 1 - i;
      s[rank - 1 - i] = d[k] == 1 ? 0 : stride;
      stride *= d[k];
    }
  };
  strides(ba, g.m * g.k, sa);
  strides(bb, g.k * g.n, sb);
  std::vector<int64_t> dims, xa, xb;
  for (size_t i = 0; i < rank; ++i) {
    if (batch[i] == 1) continue;
    if (!dims.empty() && xa.back() == sa[i] * batch[i] && xb.back() == sb[i] * batch[i]) {
      dims.back() *= batch[i];
      xa.back() = sa[i];
      xb.back() = sb[i];
      continue;
    }
    dims.push_back(batch[i]);
    xa.push_back(sa[i]);
    xb.push_back(sb[i]);
  }
  if (dims.size() > 4)
    return fail(QUILT_STATUS_NOT_IMPLEMENTED, "MatMul: more than 4 independent batch dims");
  const size_t pad = 4 - dims.size();
  for (size_t i = 0; i < dims.size(); ++i) {
    g.bdims.s[pad + i] = static_cast<cl_int>(dims[i]);
    g.a_bstride.s[pad + i] = static_cast<cl_int>(xa[i]);
    g.b_bstride.s[pad + i] = static_cast<cl_int>(xb[i]);
  }
  g.batch = element_count(dims);
  if (g.batch == 1 && g.k > 0 && launch.device().gemm_engine == GemmEngine::kClBlast)
    return enqueue_clblast_gemm(launch, false, false, g.m, g.n, g.k, 1.0f, g.a, g.k, g.b, g.n, 0.0f,
                                g.c);
  return run_gemm(launch, g);
}

std::string prepare_gemm(const NodeView& view, NodeDesc* desc) {
  if (view.node.opset < 7) return "Gemm: opset < 7 (legacy broadcast attribute) not supported";
  for (size_t i = 0; i < 2; ++i)
    if (view.input(i)->info.rank != 2)
      return std::string("Gemm: input '") + view.input(i)->name + "' has rank " +
             std::to_string(view.input(i)->info.rank) + ", expected 2";
  if (const quilt_value_t* c = view.input(2); c && c->info.rank > 2)
    return "Gemm: C has rank " + std::to_string(c->info.rank) + ", expected at most 2";
  desc->f = {view.float_attribute("alpha", 1.0f), view.float_attribute("beta", 1.0f)};
  desc->i[0] = view.int_attribute("transA", 0);
  desc->i[1] = view.int_attribute("transB", 0);
  return "";
}

Status enqueue_gemm(Launch& launch, const NodeDesc& desc) {
  auto a = launch.dims(desc.inputs[0]), b = launch.dims(desc.inputs[1]);
  const bool trans_a = desc.i[0] != 0, trans_b = desc.i[1] != 0;
  GemmArgs g;
  g.m = trans_a ? a[1] : a[0];
  g.k = trans_a ? a[0] : a[1];
  g.n = trans_b ? b[0] : b[1];
  if ((trans_b ? b[1] : b[0]) != g.k)
    return fail(QUILT_STATUS_INVALID_ARGUMENT,
                "Gemm: inner dims of " + format_dims(a) + " and " + format_dims(b) + " differ");
  g.a = launch.buffer(desc.inputs[0]);
  g.b = launch.buffer(desc.inputs[1]);
  g.c = launch.buffer(desc.outputs[0]);
  g.alpha = desc.f[0];
  g.beta = desc.f[1];
  g.lda = g.k;
  if (desc.inputs.size() > 2 && desc.inputs[2] >= 0 && g.beta != 0.0f) {
    auto c = launch.dims(desc.inputs[2]);
    if (element_count(c) > 0) {
      g.bias = launch.buffer(desc.inputs[2]);
      if (c.size() == 1) g.bias_cs = c[0] == 1 ? 0 : 1;
      if (c.size() == 2) g.bias_rs = c[0] == 1 ? 0 : c[1], g.bias_cs = c[1] == 1 ? 0 : 1;
    }
  }
  if (g.m * g.n == 0) return {};
  if (g.k > 0 && launch.device().gemm_engine == GemmEngine::kClBlast) {
    // CLBlast adds beta * C in place: C first holds the broadcast bias, or beta is 0.
    float beta = 0.0f;
    if (g.bias) {
      Status s =
          launch.run("gemm", "fill_bias", {static_cast<size_t>(g.n), static_cast<size_t>(g.m), 1},
                     {16, 4, 1}, g.c, g.bias, static_cast<cl_int>(g.m), static_cast<cl_int>(g.n),
                     static_cast<cl_int>(g.bias_rs), static_cast<cl_int>(g.bias_cs));
      if (!s.ok()) return s;
      beta = g.beta;
    }
    return enqueue_clblast_gemm(launch, trans_a, trans_b, g.m, g.n, g.k, g.alpha, g.a,
                                trans_a ? g.m : g.k, g.b, trans_b ? g.k : g.n, beta, g.c);
  }
  if (trans_a)
    if (Status s = transposed(launch, g.a, g.k, g.m, &g.a); !s.ok()) return s;
  if (desc.packed)
    g.packed_b = desc.packed->get();
  else if (trans_b)
    if (Status s = transposed(launch, g.b, g.n, g.k, &g.b); !s.ok()) return s;
  return run_gemm(launch, g);
}

Status upload_gemm(quilt_device_s& device, const NodeView& view, NodeDesc* desc) {
  if (Status s = device.decide_gemm_engine(); !s.ok()) return s;
  if (device.gemm_engine == GemmEngine::kClBlast) return {};  // CLBlast reads B as it is
  const quilt_value_t* b = view.input(1);
  if (!b->constant || b->info.rank < 1) return {};
  std::span<const int64_t> dims(b->info.dims, static_cast<size_t>(b->info.rank));
  for (int64_t d : dims)
    if (d < 0) return {};
  // B as b_batches contiguous matrices of K x N; Gemm's transB stores each as N x K.
  const bool trans = std::strcmp(view.node.op_type, "Gemm") == 0 && desc->i[1] != 0;
  const int64_t rows = dims.size() == 1 ? dims[0] : dims[dims.size() - 2];
  const int64_t cols = dims.size() == 1 ? 1 : dims.back();
  const int64_t k = trans ? cols : rows, n = trans ? rows : cols;
  const int64_t batches = dims.size() <= 2 ? 1 : element_count(dims.first(dims.size() - 2));
  const int64_t padded = (n + kTileCols - 1) / kTileCols * kTileCols;
  const size_t count = static_cast<size_t>(batches * k * padded);
  if (count == 0) return {};
  const float* src = static_cast<const float*>(b->constant);
  const std::string key = content_key("gemm|" + format_dims(dims) + "|" + (trans ? "t" : "n"), src,
                                      static_cast<size_t>(element_count(dims)) * sizeof(float));
  auto make = [&](cl_mem* mem) -> Status {
    auto pack = [&](float* packed) {
      for (int64_t bb = 0; bb < batches; ++bb)
        for (int64_t p = 0; p < k; ++p)
          for (int64_t j = 0; j < n; ++j)
            packed[bb * k * padded + j / kTileCols * k * kTileCols + p * kTileCols +
                   j % kTileCols] = src[bb * k * n + (trans ? j * k + p : p * n + j)];
    };
    return packed_constant(device, count, pack, b->name, mem);
  };
  return device.constant(key, make, &desc->packed);
}

}  // namespace quilt::opencl
