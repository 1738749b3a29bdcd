// The blocked layout's convolutions on CPUs without AVX-512: NCHW8c, 8 channels a vector
// (conv_blocked.hpp says what the kernels compute; make_blocked_conv returns these there).
//
// The dense kernel is blocked the way onnxruntime's MLAS runs its NCHWc convolutions: a task is
// a group of up to 3 output channel blocks (24 channels) over a band of output rows, and it runs
// the input a chunk of 8-channel blocks at a time (chunk_blocks: as many as keep their weights
// for the group within 16 KB), sweeping the band's rows for each chunk, so that the chunk's
// weights stay in L1 while every tile of the band uses them. The sums go to memory between
// chunks (a band's, up to ~96 KB, stays in L2) and are finished a row at a time after the last:
// the residual, then the activation, over the row just stored. (The AVX-512 engine runs the
// whole depth per tile instead, re-reading a group's weights from L2 for every tile.)
//
// A register tile is up to 3 blocks x 4 pixels of one output row (12 accumulators, the 3 weight
// vectors and a broadcast: all 16 ymm), 2 x 6 or 1 x 12 for a last group of fewer blocks; of
// whole input blocks at stride 1 or 2, in assembly (dense_tile_asm). An NCHW input (a region's
// first conv) is copied blocked once; one of fewer than 8 channels (a network's RGB stem, which
// would fill 3 of a block's 8 lanes) is read as NCHW planes instead, each tap one channel's, and
// cannot be read blocked (blocked_conv_reads_blocked).
//
// Depthwise convs on small planes run the NCHW path's own 8-channel tiles (conv_depthwise.cpp)
// without their transposes in and out; a first 8-lane depthwise kernel tiled like the dense one
// here had made MobileNetV3 1.23 -> 1.34 x onnxruntime's latency and EfficientNet-B0 1.15 ->
// 1.52.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/aligned.hpp"
#include "backends/cpu/kernels/channel_vectors.hpp"
#include "backends/cpu/kernels/conv_blocked.hpp"
#include "backends/cpu/kernels/conv_depthwise.hpp"
#include "backends/cpu/kernels/conv_geometry.hpp"

#define QUILT_AVX2 __attribute__((target("avx2,fma")))

namespace quilt::cpu {
namespace {

constexpr int64_t kLanes = 8;
constexpr int kGroup = 3;          // output blocks per task and per register tile, at most
constexpr int kAccumulators = 12;  // a register tile's sums: blocks x pixels
constexpr int kMaxPixels = 12;

constexpr int max_pixels(int blocks) {
  return kAccumulators / blocks;
}

int64_t blocks(int64_t channels) {
  return (channels + kLanes - 1) / kLanes;
}

// The output blocks in groups of 3 (the assembly 3 x 4 tile), the rest in one group of 2 or 1:
// 4 = 3 + 1, 5 = 3 + 2, 7 = 3 + 3 + 1. (Grouped 2 + 2, Real-ESRGAN's 32-channel convs on 64x64
// took 3.2-3.3 ms for 160 input channels against 2.2-2.8 as 3 + 1, where the 1-block tile's
// 13 loads for 12 FMAs run a quarter of the product; per node, 2 threads, alternating runs.)
// Group g's first block and size.
struct Groups {
  int64_t count, threes;  // the first `threes` groups have 3 blocks, a last one 2 or 1
  int64_t total;
  explicit Groups(int64_t cbo) : count((cbo + 2) / 3), threes(cbo / 3), total(cbo) {}
  int64_t first(int64_t g) const { return g <= threes ? 3 * g : 3 * threes + 2 * (g - threes); }
  int64_t size(int64_t g) const { return std::min(total, first(g + 1)) - first(g); }
  int64_t of_block(int64_t b) const {
    return b < 3 * threes ? b / 3 : threes + (b - 3 * threes) / 2;
  }
};

// A blocked input as the tiles read it: channel c of pixel (y, x) of an image at
// (c / 8) * block() + y * row() + x * 8 + c % 8 floats from the image's start.
// Or, nchw, an NCHW input of fewer than 8 channels (a network's RGB stem): plane c at c * h * w.
struct Input {
  const float* data = nullptr;
  int64_t c = 0, h = 0, w = 0;
  bool nchw = false;
  int64_t row() const { return nchw ? w : w * kLanes; }
  int64_t block() const { return kLanes * h * w; }
  int64_t image() const { return nchw ? c * h * w : blocks(c) * block(); }
};

// What a dense tile reads besides its sums: `blocks` input blocks (block_stride floats apart)
// of `live` channels each (the last block of a ragged input may hold fewer: it runs alone), the
// channel c of pixel p's window start xp + p * pstep + taps[t] at + c, and the weights
// [block][tap][live][OB][8] from w, w_step floats a tap (8 * OB * 8; OB * 8 for an NCHW input,
// whose taps are one channel's each).
struct DenseArgs {
  const float* xp;
  int64_t pstep, blocks, block_stride, live;
  const int64_t* taps;
  int64_t ntaps;
  const float* w;
  int64_t w_step;
};

// OB output blocks x P pixels of one output row: the sums at out (block o's pixel p at
// out + o * out_block + p * 8) plus, or when `first` the bias plus, for each input block, tap and
// channel, the weights' OB vectors times the channel's value at the pixel, broadcast. The
// general form, for the tiles that dense_tile_asm (below) does not take: strides other than 1
// and 2, and a ragged last input block of `live` channels.
template <int OB, int P>
QUILT_AVX2 void dense_tile(const DenseArgs& a, float* out, int64_t out_block, bool first,
                           const float* bias) {
  __m256 acc[OB][P];
  for (int o = 0; o < OB; ++o) {
    const __m256 b = _mm256_load_ps(bias + o * kLanes);
    for (int p = 0; p < P; ++p)
      acc[o][p] = first ? b : _mm256_load_ps(out + o * out_block + p * kLanes);
  }
  const float* w = a.w;
  for (int64_t b = 0; b < a.blocks; ++b) {
    const float* xb = a.xp + b * a.block_stride;
    for (int64_t t = 0; t < a.ntaps; ++t, w += a.w_step) {
      const float* xt = xb + a.taps[t];
      for (int64_t c = 0; c < a.live; ++c) {
        __m256 wv[OB];
        for (int o = 0; o < OB; ++o) wv[o] = _mm256_load_ps(w + (c * OB + o) * kLanes);
        for (int p = 0; p < P; ++p) {
          const __m256 v = _mm256_broadcast_ss(xt + p * a.pstep + c);
          for (int o = 0; o < OB; ++o) acc[o][p] = _mm256_fmadd_ps(wv[o], v, acc[o][p]);
        }
      }
    }
  }
  for (int o = 0; o < OB; ++o)
    for (int p = 0; p < P; ++p) _mm256_store_ps(out + o * out_block + p * kLanes, acc[o][p]);
}

// The tiles of whole blocks at stride S (1 or 2), in assembly: OB blocks x P pixels of sums in
// ymm4-15 (block o's pixel p in register 4 + o * 12 / OB + p), a channel's OB weight vectors in
// ymm0-2 and the broadcast in ymm3. The compiler could not allocate the 3 x 4 tile's 16 ymm
// without reading the weights from memory in every multiply-add (16 loads for 12 FMAs), and
// made the same choice for the 3 x 3 and 3 x 2 tiles at row ends, which have registers to
// spare (9 FMAs reading 9 weights and 3 broadcasts): a 3x3 conv of 512 channels on 7x7 (4 + 3
// pixels a row) ran at 141 GFLOP/s against 190 for 128 channels on 28x28 (all 4-pixel tiles),
// per node, 2 threads, Zen 3. One asm statement is one kernel offset of one input block: 8
// channels, each its OB weight loads, then P broadcasts of OB FMAs; the assembler's .if keeps
// the pixels below P (the operands of the others are still named, so all 12 are bound).
// clang-format off
#define QUILT_B8_IF(P) ".if " #P " < %c[np]\n\t"
#define QUILT_B8_BC(C, P) "vbroadcastss " C "*4+" #P "*%c[ps](%[x]), %%ymm3\n\t"
#define QUILT_B8_FMA(W, R) "vfmadd231ps %%ymm" #W ", %%ymm3, %[" #R "]\n\t"
#define QUILT_B8_W(C, O) "vmovaps " C "*%c[wb]+" #O "*32(%[w]), %%ymm" #O "\n\t"
#define QUILT_B8_P3(C, P, A, B, D)                                          \
  QUILT_B8_IF(P) QUILT_B8_BC(C, P) QUILT_B8_FMA(0, A) QUILT_B8_FMA(1, B) \
  QUILT_B8_FMA(2, D) ".endif\n\t"
#define QUILT_B8_P2(C, P, A, B) \
  QUILT_B8_IF(P) QUILT_B8_BC(C, P) QUILT_B8_FMA(0, A) QUILT_B8_FMA(1, B) ".endif\n\t"
#define QUILT_B8_P1(C, P, A) QUILT_B8_IF(P) QUILT_B8_BC(C, P) QUILT_B8_FMA(0, A) ".endif\n\t"
#define QUILT_B8_CH3(C)                                                                       \
  QUILT_B8_W(C, 0) QUILT_B8_W(C, 1) QUILT_B8_W(C, 2)                                          \
  QUILT_B8_P3(C, 0, r0, r4, r8) QUILT_B8_P3(C, 1, r1, r5, r9) QUILT_B8_P3(C, 2, r2, r6, r10) \
  QUILT_B8_P3(C, 3, r3, r7, r11)
#define QUILT_B8_CH2(C)                                                                 \
  QUILT_B8_W(C, 0) QUILT_B8_W(C, 1)                                                     \
  QUILT_B8_P2(C, 0, r0, r6) QUILT_B8_P2(C, 1, r1, r7) QUILT_B8_P2(C, 2, r2, r8)         \
  QUILT_B8_P2(C, 3, r3, r9) QUILT_B8_P2(C, 4, r4, r10) QUILT_B8_P2(C, 5, r5, r11)
#define QUILT_B8_CH1(C)                                                                  \
  QUILT_B8_W(C, 0)                                                                       \
  QUILT_B8_P1(C, 0, r0) QUILT_B8_P1(C, 1, r1) QUILT_B8_P1(C, 2, r2) QUILT_B8_P1(C, 3, r3) \
  QUILT_B8_P1(C, 4, r4) QUILT_B8_P1(C, 5, r5) QUILT_B8_P1(C, 6, r6) QUILT_B8_P1(C, 7, r7) \
  QUILT_B8_P1(C, 8, r8) QUILT_B8_P1(C, 9, r9) QUILT_B8_P1(C, 10, r10) QUILT_B8_P1(C, 11, r11)
#define QUILT_B8_TAP(CH) CH("0") CH("1") CH("2") CH("3") CH("4") CH("5") CH("6") CH("7")
#define QUILT_B8_ASM(BODY)                                                                    \
  asm volatile(BODY                                                                           \
               : [r0] "+x"(r0), [r1] "+x"(r1), [r2] "+x"(r2), [r3] "+x"(r3), [r4] "+x"(r4),   \
                 [r5] "+x"(r5), [r6] "+x"(r6), [r7] "+x"(r7), [r8] "+x"(r8), [r9] "+x"(r9),   \
                 [r10] "+x"(r10), [r11] "+x"(r11)                                             \
               : [x] "r"(x), [w] "r"(w), [ps] "i"(kPixelBytes), [np] "i"(P), [wb] "i"(OB * 32)     \
               : "xmm0", "xmm1", "xmm2", "xmm3", "memory")
// clang-format on
template <int OB, int P, int S, bool kNchw = false>
QUILT_AVX2 void dense_tile_asm(const DenseArgs& args, float* out, int64_t out_block, bool first,
                               const float* bias) {
  static_assert(S == 1 || S == 2);
  // An NCHW input's pixels are S floats apart and its taps one channel each.
  constexpr int kPixelBytes = kNchw ? S * 4 : S * 32;
  static_assert(OB >= 1 && OB <= 3 && P >= 1 && P <= max_pixels(OB));
  constexpr int kPerBlock = kAccumulators / OB;  // registers between two blocks' sums
  // Register k's sums: block k / kPerBlock's pixel k % kPerBlock, or nothing (zeros).
  auto init = [&](int k) {
    const int o = k / kPerBlock, p = k % kPerBlock;
    if (o >= OB || p >= P) return _mm256_setzero_ps();
    return first ? _mm256_load_ps(bias + o * kLanes)
                 : _mm256_load_ps(out + o * out_block + p * kLanes);
  };
  register __m256 r0 asm("ymm4") = init(0), r1 asm("ymm5") = init(1), r2 asm("ymm6") = init(2),
                     r3 asm("ymm7") = init(3);
  register __m256 r4 asm("ymm8") = init(4), r5 asm("ymm9") = init(5), r6 asm("ymm10") = init(6),
                     r7 asm("ymm11") = init(7);
  register __m256 r8 asm("ymm12") = init(8), r9 asm("ymm13") = init(9), r10 asm("ymm14") = init(10),
                     r11 asm("ymm15") = init(11);
  const float* w = args.w;
  for (int64_t b = 0; b < args.blocks; ++b) {
    const float* xb = args.xp + b * args.block_stride;
    for (int64_t t = 0; t < args.ntaps; ++t, w += args.w_step) {
      const float* x = xb + args.taps[t];
      if constexpr (kNchw && OB == 3)
        QUILT_B8_ASM(QUILT_B8_CH3("0"));
      else if constexpr (kNchw && OB == 2)
        QUILT_B8_ASM(QUILT_B8_CH2("0"));
      else if constexpr (kNchw)
        QUILT_B8_ASM(QUILT_B8_CH1("0"));
      else if constexpr (OB == 3)
        QUILT_B8_ASM(QUILT_B8_TAP(QUILT_B8_CH3));
      else if constexpr (OB == 2)
        QUILT_B8_ASM(QUILT_B8_TAP(QUILT_B8_CH2));
      else
        QUILT_B8_ASM(QUILT_B8_TAP(QUILT_B8_CH1));
    }
  }
  const __m256 sums[kAccumulators] = {r0, r1, r2, r3, r4, r5, r6, r7, r8, r9, r10, r11};
  for (int o = 0; o < OB; ++o)
    for (int p = 0; p < P; ++p)
      _mm256_store_ps(out + o * out_block + p * kLanes, sums[o * kPerBlock + p]);
}
#undef QUILT_B8_ASM
#undef QUILT_B8_TAP
#undef QUILT_B8_CH1
#undef QUILT_B8_CH2
#undef QUILT_B8_CH3
#undef QUILT_B8_P1
#undef QUILT_B8_P2
#undef QUILT_B8_P3
#undef QUILT_B8_W
#undef QUILT_B8_FMA
#undef QUILT_B8_BC
#undef QUILT_B8_IF

using DenseTile = void (*)(const DenseArgs&, float*, int64_t, bool, const float*);

template <int OB, int S, bool kNchw, int P>
constexpr DenseTile dense_tile_fn() {
  if constexpr (P > max_pixels(OB))
    return nullptr;
  else if constexpr (S > 0)
    return &dense_tile_asm<OB, P, S, kNchw>;
  else
    return &dense_tile<OB, P>;
}
template <int OB, int S, bool kNchw, size_t... I>
constexpr std::array<DenseTile, kMaxPixels> dense_tiles(std::index_sequence<I...>) {
  return {dense_tile_fn<OB, S, kNchw, static_cast<int>(I) + 1>()...};
}
template <int S, bool kNchw>
constexpr std::array<std::array<DenseTile, kMaxPixels>, kGroup> dense_table() {
  return {dense_tiles<1, S, kNchw>(std::make_index_sequence<kMaxPixels>{}),
          dense_tiles<2, S, kNchw>(std::make_index_sequence<kMaxPixels>{}),
          dense_tiles<3, S, kNchw>(std::make_index_sequence<kMaxPixels>{})};
}
// [NCHW input][S][OB - 1][P - 1]
using DenseTable = std::array<std::array<std::array<DenseTile, kMaxPixels>, kGroup>, 3>;
constexpr std::array<DenseTable, 2> kDenseTiles = {
    DenseTable{dense_table<0, false>(), dense_table<1, false>(), dense_table<2, false>()},
    DenseTable{dense_table<0, false>(), dense_table<1, true>(), dense_table<2, true>()}};

// Tiles of at most `most` pixels over a row of `width`, of nearly equal sizes: 7 = 4 + 3,
// 14 = 4 + 4 + 3 + 3 (every tile of whole blocks is an assembly one; a 3 x 3 tile's 6 loads for
// 9 FMAs keep the multipliers busier than a 3 x 2 tile's 5 for 6).
struct RowTiles {
  int64_t count, small, large;  // `large` tiles of small + 1 pixels first
  RowTiles(int64_t width, int64_t most)
      : count((width + most - 1) / most), small(width / count), large(width % count) {}
  int64_t size(int64_t i) const { return small + (i < large ? 1 : 0); }
};

// What the dense and depthwise kernels share: the layouts, the weights' shape, the geometry
// worked out once per shape, and a run's checked shapes and output.
class Blocked8Base : public Kernel {
 public:
  Blocked8Base(const NodeSignature& sig, bool in_blocked, bool out_blocked, bool residual_blocked)
      : in_blocked_(in_blocked),
        out_blocked_(out_blocked),
        residual_blocked_(residual_blocked),
        w_shape_(sig.constants[1]->shape()) {
    // The bias over whole blocks, zeros past the channels (and everywhere without one).
    bias_ = aligned_zeros<float>(blocks(w_shape_[0]) * kLanes);
    has_bias_ = sig.constants.size() > 2 && sig.constants[2];
    if (has_bias_) {
      const float* bp = sig.constants[2]->data<float>();
      std::copy(bp, bp + w_shape_[0], bias_.get());
    }
    memo_.keep({&sig.inputs[0], &sig.outputs[0]},
               [&](const auto& s) { return conv_geometry(sig.node, s[0], w_shape_, s[1]); });
  }

  // The weights and bias are copied at creation.
  bool reads_constant(size_t i) const override { return i != 1 && i != 2; }

 protected:
  // A run's input (its logical NCHW shape checked against c_in), geometry and output (y null
  // when it is empty).
  struct Run {
    std::vector<int64_t> x_shape;
    ShapeMemo<Geometry>::Held held;
    const Geometry* g = nullptr;
    Tensor* y = nullptr;
  };
  void start(KernelContext& ctx, int64_t c_in, Run& r) const {
    const std::vector<int64_t>& y_shape = ctx.output_shape(0);
    const int64_t c_out = w_shape_[0];
    r.x_shape = blocked_detail::checked_shapes(ctx, ctx.input(0), in_blocked_, c_in, c_out, kLanes);
    r.g = &memo_.get({r.x_shape, y_shape}, r.held,
                     [&] { return conv_geometry(ctx.node, r.x_shape, w_shape_, y_shape); });
    Tensor& y =
        out_blocked_
            ? ctx.output_private(0, {r.x_shape[0], blocks(c_out), r.g->out[1], r.g->out[2], kLanes})
            : ctx.output_uninitialized(0);
    r.y = y.numel() ? &y : nullptr;
  }

  bool in_blocked_, out_blocked_, residual_blocked_, has_bias_ = false;
  std::vector<int64_t> w_shape_;
  std::shared_ptr<float[]> bias_;  // 64-byte aligned
  ShapeMemo<Geometry> memo_;
};

class BlockedConv8Kernel : public Blocked8Base {
 public:
  BlockedConv8Kernel(const NodeSignature& sig, bool in_blocked, bool out_blocked,
                     bool residual_blocked)
      : Blocked8Base(sig, in_blocked, out_blocked, residual_blocked) {
    const Tensor& w = *sig.constants[1];
    const int64_t c_out = w.dim(0), depth = w.dim(1), taps = w.dim(2) * w.dim(3);
    c_in_ = depth;
    // Fewer than 8 input channels: an NCHW input, read a plane at a time (blocked, a network's
    // RGB stem would fill 3 of a block's 8 lanes).
    nchw_in_ = depth < kLanes;
    if (sig.node.attr_int("group", 1) != 1 || (nchw_in_ && in_blocked))
      throw std::logic_error(
          "the 8-lane blocked conv is dense, and reads fewer than 8 input channels as NCHW");
    const int64_t cbo = blocks(c_out);
    const float* wp = w.data<float>();
    // Per group of output blocks (Groups), [input block][tap][channel of the block][output
    // block of the group][8]: a tile's weights in the order it reads them. A group starts at
    // its first block's share (per_block floats). An NCHW input: [channel][tap][output block of
    // the group][8], a tap of one channel at a time.
    const int64_t per_block =
        nchw_in_ ? depth * taps * kLanes : blocks(depth) * taps * kLanes * kLanes;
    weights_ = aligned_zeros<float>(cbo * per_block);
    const Groups groups(cbo);
    for (int64_t m = 0; m < c_out; ++m) {
      const int64_t b = m / kLanes, grp = groups.of_block(b);
      const int64_t ob0 = groups.first(grp), obg = groups.size(grp);
      float* wg = weights_.get() + ob0 * per_block;
      for (int64_t c = 0; c < depth; ++c)
        for (int64_t t = 0; t < taps; ++t) {
          const int64_t at =
              nchw_in_ ? c * taps + t : ((c / kLanes) * taps + t) * kLanes + c % kLanes;
          wg[at * obg * kLanes + (b - ob0) * kLanes + m % kLanes] = wp[(m * depth + c) * taps + t];
        }
    }
  }

  void run(KernelContext& ctx) const override {
    Run r;
    start(ctx, c_in_, r);
    if (!r.y) return;
    const Tensor& x = ctx.input(0);
    Tensor& y = *r.y;
    const Geometry& g = *r.g;
    const int64_t n = r.x_shape[0], c_out = w_shape_[0];
    const int64_t oh = g.out[1], ow = g.out[2], cbo = blocks(c_out);
    const float* residual = blocked_detail::checked_residual(ctx, residual_blocked_, kLanes);
    // The sums in the blocked layout: the output itself, or a scratch the last rows are
    // finished from into an NCHW output.
    Tensor scratch;
    float* sums = y.data<float>();
    if (!out_blocked_) {
      scratch = Tensor::scratch(DType::Float32, {n, cbo, oh, ow, kLanes}, false);
      sums = scratch.data<float>();
    }
    // Windows that read padding, or an NCHW input (a region's first conv): a blocked copy with
    // the padding in it, so that every tile reads whole windows and a block's 8 channels from
    // one line. (Broadcasting each channel from its own NCHW plane instead, a 3x3 conv of 64
    // channels on 56x56 took 6.8 ms against 3.1 on a blocked copy, per node, one thread.)
    // An input of fewer than 8 channels stays NCHW (padded when a window reads padding).
    Input in{x.data<float>(), c_in_, g.in[1], g.in[2], nchw_in_};
    Tensor padded;
    if (nchw_in_) {
      if (blocked_detail::reads_padding(g)) in = pad_nchw(ctx, x.data<float>(), g, n, padded);
    } else if (blocked_detail::reads_padding(g) || !in_blocked_) {
      in = pad_input(ctx, x.data<float>(), g, n, padded);
    }
    Finish finish{
        ctx.activation, residual, residual_blocked_, y.data<float>(), out_blocked_, c_out, oh, ow};
    ctx.detail = nchw_in_
                     ? "blocked layout (8 channels a vector), direct tiles over NCHW input planes"
                     : "blocked layout (8 channels a vector), direct tiles";
    // 1x1 windows at stride 1 over a whole blocked plane: its rows are one row, so that tiles
    // run across them (a 14x14 map: 49 tiles of 4 pixels, not rows of 4 + 4 + 3 + 3), when
    // the output's channel groups alone give every thread four tasks.
    const int64_t groups = Groups(blocks(c_out)).count;
    if (g.kernel[1] == 1 && g.kernel[2] == 1 && g.stride[1] == 1 && g.stride[2] == 1 &&
        in.h == oh && in.w == ow && n * groups >= 4 * ctx.pool.threads()) {
      Geometry flat = g;
      flat.in = flat.out = {1, 1, oh * ow};
      in.w *= in.h;
      in.h = 1;
      finish.w *= finish.h;
      finish.h = 1;
      run_dense(ctx, flat, in, sums, finish, n);
      return;
    }
    run_dense(ctx, g, in, sums, finish, n);
  }

 private:
  // What follows a row's last sums: the residual (either layout), the activation, and the
  // store into an NCHW output.
  struct Finish {
    Activation act;
    const float* residual;
    bool residual_blocked;
    float* y;
    bool y_blocked;
    int64_t c, h, w;

    // Row `row` of block `cb` of image `img`: its sums at s (w pixels of 8 lanes: the output's
    // row when it is blocked, else a scratch's, which this may change). The layouts meet
    // through 8 x 8 transposes (channel_vectors.hpp): one float at a time, the NCHW edges of
    // MobileNetV3's pointwise pairs cost more than their products.
    void run(float* s, int64_t img, int64_t cb, int64_t row) const {
      const int64_t live = std::min(kLanes, c - cb * kLanes), hw = h * w;
      const float* blocked_residual =
          residual && residual_blocked ? residual + ((img * blocks(c) + cb) * h + row) * w * kLanes
                                       : nullptr;
      const float* nchw_residual = residual && !residual_blocked
                                       ? residual + (img * c + cb * kLanes) * hw + row * w
                                       : nullptr;
      if (y_blocked) {
        if (nchw_residual) {  // its rows as pixel vectors first
          float* r = thread_scratch(7, w * kLanes);
          rows_to_vectors8(nchw_residual, hw, live, w, r, nullptr);
          blocked_residual = r;
        }
        act.apply_added(s, blocked_residual, w * kLanes);
        return;
      }
      // Into NCHW: the blocked residual on the sums, the transpose, then the NCHW residual and
      // the activation on each channel's row.
      if (blocked_residual)
        for (int64_t i = 0; i < w * kLanes; ++i) s[i] += blocked_residual[i];
      float* dst = y + (img * c + cb * kLanes) * hw + row * w;
      vectors_to_rows8(s, w, live, dst, hw);
      if (!nchw_residual && act.none()) return;
      for (int64_t l = 0; l < live; ++l)
        act.apply_added(dst + l * hw, nchw_residual ? nchw_residual + l * hw : nullptr, w);
    }
  };

  // The input x (blocked or NCHW, as in_blocked_ says) as every window reads it, blocked, the
  // padding included: rows and columns [-pad, (out - 1) * stride + (kernel - 1) * dilation + 1 -
  // pad) of each plane, zeros outside the input and in the last block's lanes past c_in_.
  Input pad_input(KernelContext& ctx, const float* x, const Geometry& g, int64_t n,
                  Tensor& storage) const {
    const int64_t h = g.in[1], w = g.in[2], hw = h * w, cb = blocks(c_in_);
    const int64_t hp = (g.out[1] - 1) * g.stride[1] + (g.kernel[1] - 1) * g.dilation[1] + 1;
    const int64_t wp = (g.out[2] - 1) * g.stride[2] + (g.kernel[2] - 1) * g.dilation[2] + 1;
    const int64_t top = g.pad[1], left = g.pad[2];
    storage = Tensor::scratch(DType::Float32, {n, cb, hp, wp, kLanes}, false);
    // Input columns [c0, c1) land at padded columns [c0 + left, c1 + left).
    const int64_t c0 = std::max<int64_t>(0, -left), c1 = std::min(w, wp - left);
    const int64_t row = wp * kLanes;
    ctx.pool.parallel_for(n * cb, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t img = t / cb, b = t % cb;
        float* dst = storage.data<float>() + t * hp * row;
        for (int64_t r = 0; r < hp; ++r, dst += row) {
          const int64_t ih = r - top;
          if (ih < 0 || ih >= h || c1 <= c0) {
            std::fill(dst, dst + row, 0.f);
            continue;
          }
          std::fill(dst, dst + (c0 + left) * kLanes, 0.f);
          std::fill(dst + (c1 + left) * kLanes, dst + row, 0.f);
          float* out = dst + (c0 + left) * kLanes;
          if (in_blocked_) {
            const float* src = x + (t * hw + ih * w + c0) * kLanes;
            std::copy(src, src + (c1 - c0) * kLanes, out);
          } else {  // the block's channels per pixel, zero past the last
            const int64_t live = std::min(kLanes, c_in_ - b * kLanes);
            rows_to_vectors8(x + (img * c_in_ + b * kLanes) * hw + ih * w + c0, hw, live, c1 - c0,
                             out, nullptr);
          }
        }
      }
    });
    return {storage.data<float>(), c_in_, hp, wp};
  }

  // An NCHW input of fewer than 8 channels with the padding in it: planes of rows and columns
  // [-pad, ...) as pad_input's, zeros outside the input.
  Input pad_nchw(KernelContext& ctx, const float* x, const Geometry& g, int64_t n,
                 Tensor& storage) const {
    const int64_t h = g.in[1], w = g.in[2];
    const int64_t hp = (g.out[1] - 1) * g.stride[1] + (g.kernel[1] - 1) * g.dilation[1] + 1;
    const int64_t wp = (g.out[2] - 1) * g.stride[2] + (g.kernel[2] - 1) * g.dilation[2] + 1;
    const int64_t top = g.pad[1], left = g.pad[2];
    storage = Tensor::scratch(DType::Float32, {n, c_in_, hp, wp}, false);
    const int64_t c0 = std::max<int64_t>(0, -left), c1 = std::min(w, wp - left);
    ctx.pool.parallel_for(n * c_in_ * hp, 64, [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t plane = t / hp, ih = t % hp - top;
        float* dst = storage.data<float>() + t * wp;
        if (ih < 0 || ih >= h || c1 <= c0) {
          std::fill(dst, dst + wp, 0.f);
          continue;
        }
        std::fill(dst, dst + c0 + left, 0.f);
        std::fill(dst + c1 + left, dst + wp, 0.f);
        const float* src = x + (plane * h + ih) * w;
        std::copy(src + c0, src + c1, dst + c0 + left);
      }
    });
    return {storage.data<float>(), c_in_, hp, wp, true};
  }

  // Each kernel offset's distance from a window's start in the input; for an NCHW input, each
  // channel's offsets in turn (its taps are one channel's each).
  static std::vector<int64_t> tap_offsets(const Geometry& g, const Input& in) {
    std::vector<int64_t> taps;
    const int64_t pixel = in.nchw ? 1 : kLanes;
    for (int64_t c = 0; c < (in.nchw ? in.c : 1); ++c)
      for (int64_t ky = 0; ky < g.kernel[1]; ++ky)
        for (int64_t kx = 0; kx < g.kernel[2]; ++kx)
          taps.push_back(c * in.h * in.w + ky * g.dilation[1] * in.row() +
                         kx * g.dilation[2] * pixel);
    return taps;
  }

  // Bands of output rows: as many as keep a task's sums (ob blocks of a band) near kBandBytes,
  // then more while there are fewer than four tasks a thread.
  static int64_t band_rows(int64_t rows, int64_t row_bytes, int64_t other_tasks, int64_t threads) {
    constexpr int64_t kBandBytes = int64_t{96} << 10;
    int64_t band = std::clamp<int64_t>(kBandBytes / std::max<int64_t>(row_bytes, 1), 1, rows);
    while (band > 1 && other_tasks * ((rows + band - 1) / band) < 4 * threads)
      band = (band + 1) / 2;
    return band;
  }

  // Input blocks per pass of a task's tiles: as many as keep their weights for a group (taps x
  // 8 x 16 floats a block) within 16 KB, half of L1, so that every tile of the band reads them
  // from there; a pointwise conv's tiles then run 32 blocks (256 channels) a call, not 8
  // channels between loads and stores of their sums.
  static int64_t chunk_blocks(int64_t taps) {
    constexpr int64_t kBytes = int64_t{16} << 10;
    return std::max<int64_t>(1, kBytes / (taps * kLanes * kGroup * kLanes * 4));
  }

  void run_dense(KernelContext& ctx, const Geometry& g, const Input& in, float* sums,
                 const Finish& finish, int64_t n) const {
    // An NCHW input is one "block" whose taps are each one channel's (tap_offsets).
    const int64_t oh = g.out[1], ow = g.out[2], cbo = blocks(finish.c);
    const int64_t cbi = in.nchw ? 1 : blocks(in.c);
    const Groups gr(cbo);
    const int64_t groups = gr.count;
    const std::vector<int64_t> taps = tap_offsets(g, in);
    const int64_t ntaps = static_cast<int64_t>(taps.size());
    const int64_t band = band_rows(oh, kGroup * kLanes * ow * 4, n * groups, ctx.pool.threads());
    const int64_t bands = (oh + band - 1) / band;
    const int64_t pstep = g.stride[2] * (in.nchw ? 1 : kLanes), out_block = oh * ow * kLanes;
    const int64_t in_image = in.image();
    // The whole blocks (8 channels each) at stride 1 or 2 take the tiles that know their
    // strides; the rest (other strides, a ragged last block) the others.
    const int64_t whole = in.nchw ? 1 : in.c / kLanes;
    const int stride_kind =
        g.stride[2] == 1 || g.stride[2] == 2 ? static_cast<int>(g.stride[2]) : 0;
    const int64_t chunk = chunk_blocks(ntaps);
    ctx.pool.for_each_task(n * groups * bands, [&](int64_t t) {
      // Bands outermost: a thread's run of tasks (ThreadPool::for_each_task) is whole bands of
      // rows over every group, not a group's every row, so its work does not depend on the
      // groups' sizes (3 + 1).
      const int64_t grp = t % groups, bd = t / groups % bands, img = t / groups / bands;
      const int64_t ob0 = gr.first(grp), ob = gr.size(grp);
      const int64_t y0 = bd * band, y1 = std::min(oh, y0 + band);
      const RowTiles tiles(ow, max_pixels(static_cast<int>(ob)));
      const int64_t tap_floats = (in.nchw ? 1 : kLanes) * ob * kLanes;  // DenseArgs::w_step
      const float* wg = weights_.get() + ob0 * cbi * ntaps * (tap_floats / ob);
      float* s0 = sums + (img * cbo + ob0) * out_block;
      for (int64_t b0 = 0; b0 < cbi;) {
        // A chunk of whole blocks, or the ragged last one alone.
        const int64_t b1 = b0 < whole ? std::min(whole, b0 + chunk) : b0 + 1;
        const bool fast = stride_kind > 0 && b0 < whole;
        const int64_t live = in.nchw ? 1 : b0 < whole ? kLanes : in.c - b0 * kLanes;
        const auto& table =
            kDenseTiles[in.nchw ? 1 : 0][static_cast<size_t>(fast ? stride_kind : 0)]
                       [static_cast<size_t>(ob - 1)];
        DenseArgs a{nullptr,   pstep,       b1 - b0, in.block(),
                    live,      taps.data(), ntaps,   wg + b0 * ntaps * tap_floats,
                    tap_floats};
        const float* xb = in.data + img * in_image + b0 * in.block();
        for (int64_t yy = y0; yy < y1; ++yy) {
          const float* xr = xb + yy * g.stride[1] * in.row();
          for (int64_t i = 0, x = 0; i < tiles.count; ++i) {
            const int64_t np = tiles.size(i);
            a.xp = xr + x * pstep;
            table[static_cast<size_t>(np - 1)](a, s0 + (yy * ow + x) * kLanes, out_block, b0 == 0,
                                               bias_.get() + ob0 * kLanes);
            x += np;
          }
          if (b1 == cbi)  // the row's sums are final: finish it while it is in L1
            for (int64_t o = 0; o < ob; ++o)
              finish.run(s0 + o * out_block + yy * ow * kLanes, img, ob0 + o, yy);
        }
        b0 = b1;
      }
    });
  }

  int64_t c_in_ = 0;
  bool nchw_in_ = false;
  std::shared_ptr<float[]> weights_;  // 64-byte aligned
};

// Depthwise convs (one input channel per output channel) on small planes: the NCHW kernel's
// 8-channel tiles (conv_depthwise.cpp), which transpose each block of planes into pixel vectors
// and back; here a blocked input is copied in row by row and a blocked output written in place,
// so that inside a region neither transpose runs.
class BlockedDepthwise8Kernel : public Blocked8Base {
 public:
  BlockedDepthwise8Kernel(const NodeSignature& sig, bool in_blocked, bool out_blocked,
                          bool residual_blocked)
      : Blocked8Base(sig, in_blocked, out_blocked, residual_blocked) {
    const Tensor& w = *sig.constants[1];
    weights16_ = depthwise_weights16(w.data<float>(), w.dim(0), w.dim(2) * w.dim(3));
  }

  void run(KernelContext& ctx) const override {
    const int64_t c = w_shape_[0];
    Run r;
    start(ctx, c, r);
    if (!r.y) return;
    const Geometry& g = *r.g;
    DepthwiseLayouts io;
    io.x_blocked = in_blocked_;
    io.y_blocked = out_blocked_;
    io.residual = blocked_detail::checked_residual(ctx, residual_blocked_, kLanes);
    io.residual_blocked = residual_blocked_;
    if (!depthwise_conv2d_blocked8(depthwise_geometry(g), r.x_shape[0], c,
                                   ctx.input(0).data<float>(), nullptr,
                                   has_bias_ ? bias_.get() : nullptr, r.y->data<float>(),
                                   ctx.activation, ctx.pool, weights16_.get(), io))
      ctx.node.fail(
          "the blocked layout's depthwise kernel does not take this geometry "
          "(rows of at most 28 outputs, 784 outputs, 3,600 padded input pixels)",
          ErrorCode::Runtime);
    ctx.detail = "blocked layout (8 channels a vector), depthwise";
  }

 private:
  std::shared_ptr<float[]> weights16_;
};

}  // namespace

std::unique_ptr<Kernel> make_blocked_conv8(const NodeSignature& sig, bool in_blocked,
                                           bool out_blocked, bool residual_blocked) {
  if (sig.node.attr_int("group", 1) != 1)
    return std::make_unique<BlockedDepthwise8Kernel>(sig, in_blocked, out_blocked,
                                                     residual_blocked);
  return std::make_unique<BlockedConv8Kernel>(sig, in_blocked, out_blocked, residual_blocked);
}

}  // namespace quilt::cpu
