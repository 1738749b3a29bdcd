"""Cases of the misc op family (Einsum, Unique, Det, random generators), checked against
onnxruntime."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from casegen import Cases, rand, randint

c = Cases("misc")


def reference(op_type, inputs, n_outputs, opset, domain="", domain_opset=1, **attrs):
    """Outputs of onnx's reference implementation, for dtypes onnxruntime has no kernel for."""
    from onnx.reference import ReferenceEvaluator
    outs = [f"y{i}" for i in range(n_outputs)] if n_outputs > 1 else ["y"]
    node = helper.make_node(op_type, list(inputs), outs, domain=domain, **attrs)
    graph = helper.make_graph(
        [node], "ref",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for k, v in inputs.items()],
        [helper.make_empty_tensor_value_info(o) for o in outs])
    imports = [helper.make_opsetid("", opset)]
    if domain:
        imports.append(helper.make_opsetid(domain, domain_opset))
    model = helper.make_model(graph, opset_imports=imports)
    return dict(zip(outs, ReferenceEvaluator(model).run(None, inputs)))


def domain_node(name, op_type, inputs, domain, domain_opset=1, n_outputs=1, opset=17, **attrs):
    """A node of another domain (ai.onnx.ml, preview): casegen imports only the default domain,
    so the domain's opset is added to the written model afterwards. Expected values come from
    onnx's reference implementation."""
    import onnx
    expected = reference(op_type, inputs, n_outputs, opset, domain, domain_opset, **attrs)
    c.node(name, op_type, inputs, n_outputs=n_outputs, opset=opset, expected=expected,
           domain=domain, **attrs)
    path = c.dir / name / "model.onnx"
    model = onnx.load(path)
    model.opset_import.append(helper.make_opsetid(domain, domain_opset))
    onnx.save(model, path)


def einsum(name, equation, *operands, opset=12, numpy=False, **kw):
    """numpy=True: expected values from np.einsum (onnxruntime's shape inference refuses
    ellipses of different ranks, which numpy broadcasts)."""
    expected = {"y": np.einsum(equation, *operands)} if numpy else None
    c.node(name, "Einsum", {f"x{i}": v for i, v in enumerate(operands)}, opset=opset,
           expected=expected, equation=equation, **kw)


# ---- Einsum ----
einsum("einsum_matmul", "ij,jk->ik", rand(3, 4), rand(4, 5))
einsum("einsum_matmul_implicit", "ij,jk", rand(3, 4), rand(4, 5))
einsum("einsum_batch_matmul", "bij,bjk->bik", rand(2, 3, 4), rand(2, 4, 5))
einsum("einsum_transpose", "ij->ji", rand(3, 4))
einsum("einsum_transpose_implicit", "ba", rand(3, 4))
einsum("einsum_permute3", "abc->cab", rand(2, 3, 4))
einsum("einsum_sum_all", "ij->", rand(3, 4))
einsum("einsum_sum_axis", "ijk->ik", rand(2, 3, 4))
einsum("einsum_trace", "ii", rand(4, 4))
einsum("einsum_diag", "ii->i", rand(4, 4))
einsum("einsum_batch_diag", "...ii->...i", rand(2, 3, 3))
einsum("einsum_diag3", "iji->j", rand(3, 2, 3))
einsum("einsum_inner", "i,i", rand(5), rand(5))
einsum("einsum_outer", "i,j->ij", rand(3), rand(4))
einsum("einsum_hadamard", "ij,ij->ij", rand(3, 4), rand(3, 4))
einsum("einsum_matvec", "ij,j->i", rand(3, 4), rand(4))
einsum("einsum_three", "ij,jk,kl->il", rand(2, 3), rand(3, 4), rand(4, 5))
einsum("einsum_three_mixed", "abc,cd,bd->ad", rand(2, 3, 4), rand(4, 5), rand(3, 5))
einsum("einsum_ellipsis_bcast", "...ij,...jk->...ik", rand(2, 1, 3, 4), rand(3, 4, 2),
       numpy=True)
einsum("einsum_ellipsis_same", "...ij,...jk->...ik", rand(2, 3, 3, 4), rand(2, 3, 4, 2))
einsum("einsum_ellipsis_mid", "i...j,j...->i...", rand(2, 3, 4), rand(4, 3))
einsum("einsum_bcast_one", "ij,ij->i", rand(3, 1), rand(3, 4))
einsum("einsum_scalar", ",ij->ij", np.array(2.5, dtype=np.float32), rand(2, 3))
einsum("einsum_uppercase", "Ab,bC->AC", rand(2, 3), rand(3, 4))
einsum("einsum_spaces", "ij , jk -> ki", rand(2, 3), rand(3, 4))
einsum("einsum_sum_out_unshared", "ij,kl->ik", rand(2, 3), rand(4, 5))
einsum("einsum_bilinear", "bn,anm,bm->ba", rand(2, 3), rand(4, 3, 5), rand(2, 5))
# onnxruntime crashes on empty operands: numpy gives the answer.
einsum("einsum_zero_dim", "ij,jk->ik", rand(0, 3), rand(3, 2), numpy=True)
einsum("einsum_zero_contract", "ij,jk->ik", rand(2, 0), rand(0, 3), numpy=True)
einsum("einsum_large", "bij,bkj->bik", rand(4, 33, 65), rand(4, 17, 65))
einsum("einsum_double", "bij,bjk->bik", rand(2, 3, 4, dtype=np.float64),
       rand(2, 4, 5, dtype=np.float64))
einsum("einsum_int64", "ij,jk->ik", randint(3, 4, low=-5), randint(4, 2, low=-5))
einsum("einsum_int32_trace", "ii->", randint(3, 3, dtype=np.int32))
einsum("einsum_int32_reduce", "ijk->j", randint(2, 3, 4, dtype=np.int32))
einsum("einsum_empty_equation", "", np.array(3.0, dtype=np.float32), numpy=True)
einsum("einsum_ellipsis_bcast_ones", "...i,...i->...", rand(2, 1, 4), rand(1, 3, 4), numpy=True)
einsum("einsum_repeat_and_bcast", "iij,kj->ik", rand(3, 3, 1), rand(2, 5), numpy=True)
einsum("einsum_opset17", "ij,jk->ik", rand(3, 4), rand(4, 5), opset=17)

# ---- Unique ----
def unique(name, x, spec=False, **attrs):
    # onnxruntime's Unique handles float, int64 and int8 only (spec: onnx's reference instead).
    expected = None
    if spec or x.dtype not in (np.float32, np.int64, np.int8):
        expected = reference("Unique", {"x": x}, 4, 11, **attrs)
    c.node(name, "Unique", {"x": x}, n_outputs=4, opset=11, expected=expected, **attrs)


unique("unique_sorted_flat", np.array([2.0, 1.0, 1.0, 3.0, 4.0, 3.0], dtype=np.float32))
unique("unique_unsorted_flat", np.array([2.0, 1.0, 1.0, 3.0, 4.0, 3.0], dtype=np.float32),
       sorted=0)
unique("unique_2d_flat", randint(3, 4, high=4))
unique("unique_axis0", np.array([[1, 0, 0], [1, 0, 0], [2, 3, 4]], dtype=np.int64), axis=0)
unique("unique_axis1", np.array([[1, 0, 0, 1], [1, 0, 0, 1], [2, 3, 3, 2]], dtype=np.int32),
       axis=1)
unique("unique_axis_neg", np.array([[[1, 1], [0, 1]], [[1, 1], [0, 1]]], dtype=np.float32),
       axis=-1)
unique("unique_axis_unsorted", np.array([[3, 1], [1, 2], [3, 1], [0, 0]], dtype=np.int64),
       axis=0, sorted=0)
unique("unique_single", np.array([7], dtype=np.int64))
unique("unique_double", np.array([0.5, -1.0, 0.5, 2.0], dtype=np.float64))
unique("unique_int8", np.array([3, -2, 3, 0, -2], dtype=np.int8))
# Empty slices along the axis are all equal: one group (fuzz_run: an empty input declared with
# 2^31 of them was sized by that count). onnxruntime 1.32 aborts when the slices after the axis
# are empty, hence the spec's reference for those two.
unique("unique_axis_empty_slices_outer", np.zeros((0, 5), np.float32), axis=1)
unique("unique_axis_empty_slices_inner", np.zeros((5, 0), np.float32), axis=0, spec=True)
unique("unique_axis_empty_slices_3d", np.zeros((2, 4, 0), np.float32), axis=1, spec=True)
# An empty input whose slices before the axis number 2^32 - 2 (fuzz_run: the copy looped over
# them all, 11 s under ASan); the expected outputs written out (onnx's reference would loop too).
_huge = np.zeros((2, 2**31 - 1, 10, 0), np.float32)
c.node("unique_axis_empty_huge_outer", "Unique", {"x": _huge}, n_outputs=4, opset=11, axis=2,
       expected=dict(zip(["y0", "y1", "y2", "y3"], [
           np.zeros((2, 2**31 - 1, 1, 0), np.float32), np.array([0], np.int64),
           np.zeros(10, np.int64), np.array([10], np.int64)])))
# The same with the axis itself empty: no slice at all, so nothing to copy (fuzz_run: the copy
# looped over the 2^32 - 2 outer slices anyway, 58 s under ASan).
_huge_axis = np.zeros((2, 2**31 - 1, 0), np.float32)
c.node("unique_axis_empty_axis_huge_outer", "Unique", {"x": _huge_axis}, n_outputs=4, opset=11,
       axis=2, expected=dict(zip(["y0", "y1", "y2", "y3"], [
           np.zeros((2, 2**31 - 1, 0), np.float32), np.zeros(0, np.int64),
           np.zeros(0, np.int64), np.zeros(0, np.int64)])))
c.node("unique_one_output", "Unique", {"x": randint(10, high=5)}, opset=11)

# ---- Det ----
c.node("det_2d", "Det", {"x": rand(3, 3)}, opset=11)
c.node("det_batched", "Det", {"x": rand(2, 3, 4, 4)}, opset=11)
c.node("det_1x1", "Det", {"x": rand(5, 1, 1)}, opset=11)
c.node("det_singular", "Det", {"x": np.array([[1, 2], [2, 4]], dtype=np.float32)}, opset=11)
c.node("det_pivot", "Det", {"x": np.array([[0, 1, 2], [1, 0, 3], [4, -3, 8]], dtype=np.float32)},
       opset=11)
xd = rand(3, 5, 5, dtype=np.float64)
# onnxruntime's Det is float-only.
c.node("det_double", "Det", {"x": xd}, opset=11, expected={"y": np.linalg.det(xd)})
c.node("det_large", "Det", {"x": rand(20, 20)}, opset=11, rtol=1e-3, atol=1e-5)


# ---- random generators: degenerate parameters make the values deterministic ----
def const_model(name, node, inputs, expected, opset=17):
    c.model(name, [node], inputs, ["y"], opset=opset, expected={"y": expected})


const_model("random_uniform_point", helper.make_node(
    "RandomUniform", [], ["y"], low=2.0, high=2.0, shape=[2, 3], seed=1.0),
    {}, np.full((2, 3), 2.0, dtype=np.float32))
const_model("random_uniform_double", helper.make_node(
    "RandomUniform", [], ["y"], low=-1.5, high=-1.5, shape=[4], dtype=TensorProto.DOUBLE),
    {}, np.full((4,), -1.5, dtype=np.float64))
const_model("random_normal_point", helper.make_node(
    "RandomNormal", [], ["y"], mean=3.0, scale=0.0, shape=[3, 1, 2]),
    {}, np.full((3, 1, 2), 3.0, dtype=np.float32))
const_model("random_uniform_like", helper.make_node(
    "RandomUniformLike", ["x"], ["y"], low=0.5, high=0.5),
    {"x": rand(2, 5)}, np.full((2, 5), 0.5, dtype=np.float32))
const_model("random_uniform_like_dtype", helper.make_node(
    "RandomUniformLike", ["x"], ["y"], low=1.0, high=1.0, dtype=TensorProto.DOUBLE),
    {"x": randint(3, 2)}, np.full((3, 2), 1.0, dtype=np.float64))
const_model("random_normal_like", helper.make_node(
    "RandomNormalLike", ["x"], ["y"], mean=-2.0, scale=0.0, seed=7.0),
    {"x": rand(4, dtype=np.float64)}, np.full((4,), -2.0, dtype=np.float64))
p = np.array([[0, 1, 1], [0, 0, 1]], dtype=np.float32)
const_model("bernoulli_certain", helper.make_node("Bernoulli", ["x"], ["y"]), {"x": p}, p,
            opset=15)
const_model("bernoulli_int_out", helper.make_node(
    "Bernoulli", ["x"], ["y"], dtype=TensorProto.INT64, seed=3.0),
    {"x": p.astype(np.float64)}, p.astype(np.int64), opset=15)
const_model("bernoulli_bool_out", helper.make_node(
    "Bernoulli", ["x"], ["y"], dtype=TensorProto.BOOL),
    {"x": p}, p.astype(bool), opset=15)


# ---- ops from newer opsets (onnxruntime 1.23 lacked them): onnx's reference gives the answer ----
def ref_node(name, op_type, inputs, opset, n_outputs=1, **attrs):
    expected = reference(op_type, inputs, n_outputs, opset, **attrs)
    c.node(name, op_type, inputs, n_outputs=n_outputs, opset=opset, expected=expected, **attrs)


ref_node("bitcast_float_int32", "BitCast", {"x": rand(3, 4)}, 26, to=TensorProto.INT32)
ref_node("bitcast_int64_double", "BitCast", {"x": randint(5, low=-100, high=100)}, 26,
         to=TensorProto.DOUBLE)
ref_node("bitcast_uint8_int8", "BitCast", {"x": randint(6, high=255, dtype=np.uint8)}, 26,
         to=TensorProto.INT8)
ref_node("bitcast_scalar", "BitCast", {"x": np.array(-1.5, dtype=np.float32)}, 26,
         to=TensorProto.UINT32)

cache = rand(2, 3, 6, 4)
ref_node("tensor_scatter_linear", "TensorScatter",
         {"cache": cache, "update": rand(2, 3, 2, 4), "idx": np.array([0, 3], dtype=np.int64)}, 24)
ref_node("tensor_scatter_circular", "TensorScatter",
         {"cache": cache, "update": rand(2, 3, 3, 4), "idx": np.array([5, 2], dtype=np.int64)}, 24,
         mode="circular")
ref_node("tensor_scatter_no_indices", "TensorScatter", {"cache": rand(2, 5, 3),
                                                        "update": rand(2, 2, 3)}, 24, axis=1)
ref_node("tensor_scatter_last_axis", "TensorScatter",
         {"cache": randint(2, 3, 5), "update": randint(2, 3, 2),
          "idx": np.array([1, 3], dtype=np.int64)}, 24, axis=-1)

ref_node("causal_conv_basic", "CausalConvWithState", {"x": rand(2, 3, 7), "w": rand(3, 1, 4)},
         27, n_outputs=2)
ref_node("causal_conv_bias_past_silu", "CausalConvWithState",
         {"x": rand(1, 4, 5), "w": rand(4, 1, 3), "b": rand(4), "past": rand(1, 4, 2)}, 27,
         n_outputs=2, activation="silu")
ref_node("causal_conv_k1", "CausalConvWithState", {"x": rand(2, 2, 3), "w": rand(2, 1, 1)}, 27,
         n_outputs=2)
ref_node("causal_conv_short", "CausalConvWithState", {"x": rand(1, 2, 2), "w": rand(2, 1, 5)},
         27, n_outputs=2, activation="swish")

ref_node("linear_attention_linear", "LinearAttention",
         {"q": rand(2, 3, 8), "k": rand(2, 3, 8), "v": rand(2, 3, 6)}, 27, n_outputs=2,
         q_num_heads=2, kv_num_heads=2, update_rule="linear")
ref_node("linear_attention_gated_delta_gqa", "LinearAttention",
         {"q": rand(1, 4, 16), "k": rand(1, 4, 8), "v": rand(1, 4, 4), "past": rand(1, 2, 4, 2),
          "decay": rand(1, 4, 8, low=-0.5, high=0.0), "beta": rand(1, 4, 1, low=0.0)}, 27,
         n_outputs=2, q_num_heads=4, kv_num_heads=2, scale=0.3)
ref_node("linear_attention_gated_per_head", "LinearAttention",
         {"q": rand(2, 2, 6), "k": rand(2, 2, 6), "v": rand(2, 2, 6), "past": rand(2, 3, 2, 2),
          "decay": rand(2, 2, 3, low=-0.5, high=0.0)}, 27, n_outputs=2, q_num_heads=3,
         kv_num_heads=3, update_rule="gated")

ref_node("deform_conv_basic", "DeformConv", {"x": rand(1, 2, 5, 5), "w": rand(3, 2, 2, 2),
                                             "offset": rand(1, 8, 4, 4, low=-1.5, high=1.5)}, 19)
ref_node("deform_conv_full", "DeformConv",
         {"x": rand(2, 4, 6, 5), "w": rand(4, 2, 3, 2),
          "offset": rand(2, 2 * 2 * 6, 3, 2, low=-2, high=2), "b": rand(4),
          "mask": rand(2, 2 * 6, 3, 2, low=0.0)}, 19,
         group=2, offset_group=2, pads=[1, 0, 1, 1], strides=[2, 2], dilations=[1, 2])

c.node("tfidf_tf", "TfIdfVectorizer", {"x": np.array([[1, 2, 3, 2, 3], [3, 1, 2, 2, 1]],
                                                     dtype=np.int64)}, opset=9, mode="TF",
       min_gram_length=1, max_gram_length=2, max_skip_count=1, ngram_counts=[0, 3],
       ngram_indexes=[0, 1, 2, 3, 4], pool_int64s=[1, 2, 3, 2, 3, 3, 1])
# onnxruntime aborts on this one (1-D int32 input): onnx's reference gives the answer.
ref_node("tfidf_tfidf_int32", "TfIdfVectorizer", {"x": np.array([4, 5, 4, 6, 5, 4], dtype=np.int32)},
       9, mode="TFIDF", min_gram_length=2, max_gram_length=2, max_skip_count=2,
       ngram_counts=[0, 2], ngram_indexes=[1, 0, 3, 2], pool_int64s=[4, 5, 4, 5, 4, 6],
       weights=[0.5, 2.0, 3.0, 1.5])
# Huge gram lengths and skips count what fits the row: here the same as 2 and 3 (rows of 5).
tfidf_x = np.array([[1, 2, 3, 2, 3], [3, 1, 2, 2, 1]], dtype=np.int64)
tfidf_attrs = dict(mode="TF", min_gram_length=1, ngram_counts=[0, 3], ngram_indexes=[0, 1, 2, 3, 4],
                   pool_int64s=[1, 2, 3, 2, 3, 3, 1])
c.node("tfidf_huge_lengths", "TfIdfVectorizer", {"x": tfidf_x}, opset=9,
       expected=reference("TfIdfVectorizer", {"x": tfidf_x}, 1, 9, max_gram_length=2,
                          max_skip_count=3, **tfidf_attrs),
       max_gram_length=2**62, max_skip_count=2**62, **tfidf_attrs)


# ---- ImageDecoder: images encoded here, expected pixels known by construction ----
def bmp_bytes(rgb, top_down=False):
    h, w, _ = rgb.shape
    stride = (w * 3 + 3) // 4 * 4
    rows = rgb[:, :, ::-1] if top_down else rgb[::-1, :, ::-1]
    body = b"".join(r.tobytes() + b"\0" * (stride - w * 3) for r in rows)
    header = (b"BM" + (54 + len(body)).to_bytes(4, "little") + b"\0\0\0\0" +
              (54).to_bytes(4, "little") + (40).to_bytes(4, "little") +
              w.to_bytes(4, "little") + (-h if top_down else h).to_bytes(4, "little", signed=True) +
              (1).to_bytes(2, "little") + (24).to_bytes(2, "little") + b"\0" * 24)
    return np.frombuffer(header + body, dtype=np.uint8)


img = randint(5, 7, 3, high=256, dtype=np.uint8)
luma = ((img[..., 0].astype(np.uint32) * 19595 + img[..., 1].astype(np.uint32) * 38470 +
         img[..., 2].astype(np.uint32) * 7471 + 0x8000) >> 16).astype(np.uint8)[..., None]
c.node("image_bmp_rgb", "ImageDecoder", {"x": bmp_bytes(img)}, opset=20, expected={"y": img})
c.node("image_bmp_top_down_bgr", "ImageDecoder", {"x": bmp_bytes(img, top_down=True)}, opset=20,
       expected={"y": img[..., ::-1]}, pixel_format="BGR")
c.node("image_bmp_grayscale", "ImageDecoder", {"x": bmp_bytes(img)}, opset=20,
       expected={"y": luma}, pixel_format="Grayscale")
ppm = np.frombuffer(b"P6\n# comment\n7 5\n255\n" + img.tobytes(), dtype=np.uint8)
c.node("image_ppm_rgb", "ImageDecoder", {"x": ppm}, opset=20, expected={"y": img})
pgm = np.frombuffer(b"P2 3 2 255\n0 10 20\n255 128 7\n", dtype=np.uint8)
c.node("image_pgm_ascii_grayscale", "ImageDecoder", {"x": pgm}, opset=20,
       expected={"y": np.array([[0, 10, 20], [255, 128, 7]], dtype=np.uint8)[..., None]},
       pixel_format="Grayscale")


# ---- other domains ----
TRAINING = "ai.onnx.preview.training"
r, t = np.array(0.1, dtype=np.float32), np.array(3, dtype=np.int64)
domain_node("adagrad_two", "Adagrad",
            {"r": r, "t": t, "x1": rand(3), "x2": rand(2, 2), "g1": rand(3), "g2": rand(2, 2),
             "h1": rand(3, low=0.0), "h2": rand(2, 2, low=0.0)},
            TRAINING, n_outputs=4, decay_factor=0.1, epsilon=1e-5, norm_coefficient=0.01)
domain_node("momentum_standard", "Momentum",
            {"r": r, "t": t, "x": rand(4), "g": rand(4), "v": rand(4)}, TRAINING, n_outputs=2,
            alpha=0.9, beta=0.5, mode="standard", norm_coefficient=0.02)
domain_node("momentum_nesterov_first", "Momentum",
            {"r": r, "t": np.array(0, dtype=np.int64), "x": rand(2, 3), "g": rand(2, 3),
             "v": rand(2, 3)}, TRAINING, n_outputs=2, alpha=0.8, beta=0.3, mode="nesterov",
            norm_coefficient=0.0)
domain_node("adam_two", "Adam",
            {"r": r, "t": t, "x1": rand(3), "x2": rand(2), "g1": rand(3), "g2": rand(2),
             "v1": rand(3), "v2": rand(2), "h1": rand(3, low=0.0), "h2": rand(2, low=0.0)},
            TRAINING, n_outputs=6, alpha=0.85, beta=0.95, epsilon=1e-4, norm_coefficient=0.01,
            norm_coefficient_post=0.02)

ML = "ai.onnx.ml"
domain_node("binarizer", "Binarizer", {"x": rand(3, 4)}, ML, threshold=0.25)
domain_node("binarizer_int", "Binarizer", {"x": randint(6, low=-3, high=3)}, ML)
domain_node("array_feature_extractor", "ArrayFeatureExtractor",
            {"x": rand(2, 3, 5), "i": np.array([4, 0, 4], dtype=np.int64)}, ML)
domain_node("array_feature_extractor_1d", "ArrayFeatureExtractor",
            {"x": randint(6), "i": np.array([[2, 5]], dtype=np.int64)}, ML)
tree = dict(tree_roots=[0], nodes_featureids=[0, 1, 0], nodes_truenodeids=[1, 0, 2],
            nodes_falsenodeids=[2, 1, 3], nodes_trueleafs=[0, 1, 1], nodes_falseleafs=[0, 1, 1],
            nodes_modes=numpy_helper.from_array(np.array([0, 3, 1], dtype=np.uint8), "modes"),
            nodes_splits=numpy_helper.from_array(np.array([0.1, -0.2, 0.5], dtype=np.float32),
                                                 "splits"),
            leaf_targetids=[0, 1, 1, 0],
            leaf_weights=numpy_helper.from_array(np.array([1.5, -2.0, 3.0, 0.25],
                                                          dtype=np.float32), "weights"),
            n_targets=2)
domain_node("tree_ensemble_sum", "TreeEnsemble", {"x": rand(6, 2)}, ML, domain_opset=5,
            aggregate_function=1, **tree)
domain_node("tree_ensemble_max", "TreeEnsemble", {"x": rand(6, 2)}, ML, domain_opset=5,
            aggregate_function=3, **tree)

PREVIEW = "ai.onnx.preview"
domain_node("flex_attention", "FlexAttention",
            {"q": rand(1, 2, 3, 4), "k": rand(1, 2, 5, 4), "v": rand(1, 2, 5, 6)}, PREVIEW)
domain_node("flex_attention_gqa_scaled", "FlexAttention",
            {"q": rand(2, 4, 3, 4), "k": rand(2, 2, 2, 4), "v": rand(2, 2, 2, 4)}, PREVIEW,
            scale=0.5)


def tiff_bytes(pixels, rows_per_strip, big_endian=False):
    """Baseline uncompressed TIFF of an H x W x C uint8 image (C = 3 RGB or 1 grey)."""
    h, w, ch = pixels.shape
    e = ">" if big_endian else "<"
    import struct
    data = pixels.tobytes()
    strips = [(r, min(rows_per_strip, h - r)) for r in range(0, h, rows_per_strip)]
    tags = 10
    ifd_size = 2 + tags * 12 + 4
    extra_at = 8 + ifd_size
    bits_at = extra_at
    offsets_at = bits_at + 2 * ch
    counts_at = offsets_at + 4 * len(strips)
    pixels_at = counts_at + 4 * len(strips)
    offsets = [pixels_at + r * w * ch for r, _ in strips]
    counts = [n * w * ch for _, n in strips]

    def entry(tag, typ, n, value_or_offset, inline=None):
        if inline is not None:
            return struct.pack(e + "HHI", tag, typ, n) + inline.ljust(4, b"\0")
        return struct.pack(e + "HHII", tag, typ, n, value_or_offset)
    ent = [entry(256, 4, 1, w), entry(257, 4, 1, h),
           entry(258, 3, ch, bits_at) if ch > 2 else
           entry(258, 3, 1, 0, struct.pack(e + "H", 8)),
           entry(259, 3, 1, 0, struct.pack(e + "H", 1)),
           entry(262, 3, 1, 0, struct.pack(e + "H", 2 if ch == 3 else 1)),
           entry(273, 4, len(strips), offsets_at) if len(strips) > 1 else
           entry(273, 4, 1, offsets[0]),
           entry(277, 3, 1, 0, struct.pack(e + "H", ch)),
           entry(278, 4, 1, rows_per_strip),
           entry(279, 4, len(strips), counts_at) if len(strips) > 1 else
           entry(279, 4, 1, counts[0]),
           entry(284, 3, 1, 0, struct.pack(e + "H", 1))]
    out = (b"MM\0*" if big_endian else b"II*\0") + struct.pack(e + "I", 8)
    out += struct.pack(e + "H", tags) + b"".join(ent) + struct.pack(e + "I", 0)
    out += struct.pack(e + "H" * ch, *([8] * ch)) if ch > 2 else b"\0" * (2 * ch)
    out += struct.pack(e + "I" * len(strips), *offsets) + struct.pack(e + "I" * len(strips), *counts)
    return np.frombuffer(out + data, dtype=np.uint8)


c.node("image_tiff_rgb_strips", "ImageDecoder", {"x": tiff_bytes(img, 2)}, opset=20,
       expected={"y": img})
grey = randint(4, 3, 1, high=256, dtype=np.uint8)
c.node("image_tiff_grey_big_endian", "ImageDecoder", {"x": tiff_bytes(grey, 4, big_endian=True)},
       opset=20, expected={"y": grey}, pixel_format="Grayscale")


def png_bytes(pixels, filters, level=6):
    """8-bit grey or RGB PNG with the given per-row filter types (0-4), zlib at `level`."""
    import struct
    import zlib
    h, w, ch = pixels.shape
    stride = w * ch
    rows = []
    for y in range(h):
        cur = pixels[y].reshape(-1).astype(np.int32)
        up = pixels[y - 1].reshape(-1).astype(np.int32) if y else np.zeros(stride, np.int32)
        left = np.concatenate([np.zeros(ch, np.int32), cur[:-ch]])
        upleft = np.concatenate([np.zeros(ch, np.int32), up[:-ch]])
        f = filters[y % len(filters)]
        if f == 0:
            pred = np.zeros(stride, np.int32)
        elif f == 1:
            pred = left
        elif f == 2:
            pred = up
        elif f == 3:
            pred = (left + up) // 2
        else:
            p = left + up - upleft
            pa, pb, pc = abs(p - left), abs(p - up), abs(p - upleft)
            pred = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, up, upleft))
        rows.append(bytes([f]) + ((cur - pred) % 256).astype(np.uint8).tobytes())

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(
            ">I", zlib.crc32(kind + body) & 0xffffffff)
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2 if ch == 3 else 0, 0, 0, 0)
    return np.frombuffer(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) +
                         chunk(b"IDAT", zlib.compress(b"".join(rows), level)) +
                         chunk(b"IEND", b""), dtype=np.uint8)


big = randint(20, 33, 3, high=256, dtype=np.uint8)
big[5:12] = big[4]  # repeats, so the compressor emits back-references
c.node("image_png_rgb_all_filters", "ImageDecoder", {"x": png_bytes(big, [0, 1, 2, 3, 4])},
       opset=20, expected={"y": big})
c.node("image_png_stored_bgr", "ImageDecoder", {"x": png_bytes(img, [4, 3], level=0)}, opset=20,
       expected={"y": img[..., ::-1]}, pixel_format="BGR")
c.node("image_png_grey", "ImageDecoder", {"x": png_bytes(grey, [1, 2, 4])}, opset=20,
       expected={"y": grey}, pixel_format="Grayscale")
