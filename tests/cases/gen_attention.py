"""Cases for the attention family: Attention (opsets 23, 24), RotaryEmbedding and
RMSNormalization (opset 23).

Expected values come from onnxruntime where it implements the spec; elsewhere (noted per case)
from onnx's reference evaluator or numpy:
- onnxruntime 1.23 had no opset 24, so every opset-24 Attention case uses the reference (1.32
  runs opset 24; moving these cases to it is still to do).
- onnxruntime applies softcap after the mask (the spec: before), so cases with both use the
  reference.
- onnxruntime numbers qk_matmul_output_mode differently from the spec (its 1 and 2 are swapped),
  so modes 1-3 use the reference. (The reference's mode 0 with softcap returns the softcapped
  scores, against the spec's text; onnxruntime returns the raw product, as the spec says.)
- onnxruntime refuses a mask whose key axis is 1 (opset 23 broadcasts it, per the function body):
  those use the reference on the mask broadcast by numpy.
- onnxruntime also refuses other valid masks (a broadcast query axis, a per-query-head mask with
  GQA): every case onnxruntime refuses falls back to the reference.
- onnxruntime 1.32 gives 0 for a query that may see no key, where the spec's softmax gives NaN:
  such cases use the reference.
"""
import numpy as np
import onnx
from onnx import helper, numpy_helper

from casegen import Cases, rand

cases = Cases("attention")
F16 = np.float16
F64 = np.float64


def reference(graph_node, inputs, opset):
    from onnx.reference import ReferenceEvaluator
    g = helper.make_graph(
        [graph_node], "ref",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for k, v in inputs.items()],
        [helper.make_empty_tensor_value_info(o) for o in graph_node.output if o])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(m).run(None, inputs)


def case(name, op, inputs, outputs=("Y",), opset=23, source="ort", rtol=1e-4, atol=1e-5,
         ref_inputs=None, **attrs):
    """One node. inputs: name -> array; a name of None skips that optional input. outputs may
    contain "" for skipped optional outputs. source: "ort" or "ref" (onnx reference evaluator,
    fed ref_inputs when given: the same inputs rewritten into a form it handles as the spec)."""
    in_names = [k if v is not None else "" for k, v in inputs.items()]
    while in_names and in_names[-1] == "":
        in_names.pop()
    feeds = {k: v for k, v in inputs.items() if v is not None}
    n = helper.make_node(op, in_names, list(outputs), name=name, **attrs)
    outs = [o for o in outputs if o]
    expected = None
    if source == "ort":
        try:
            cases.model(name, [n], feeds, outs, opset=opset, rtol=rtol, atol=atol)
            return
        except Exception:  # noqa: BLE001 - onnxruntime refuses some valid cases (see top)
            cases.names.discard(name)
            import shutil
            shutil.rmtree(cases.dir / name, ignore_errors=True)
            source = "ref"
    if source == "ref":
        ref_node = n
        ref_feeds = feeds
        if ref_inputs is not None:
            ref_feeds = {k: v for k, v in ref_inputs.items() if v is not None}
            ref_names = [k if v is not None else "" for k, v in ref_inputs.items()]
            ref_node = helper.make_node(op, ref_names, list(outputs), **attrs)
        expected = dict(zip(outs, reference(ref_node, ref_feeds, opset)))
        expected = {k: np.asarray(v).astype(feeds[in_names[0]].dtype) for k, v in expected.items()}
    cases.model(name, [n], feeds, outs, opset=opset, rtol=rtol, atol=atol, expected=expected)


def qkv(b, hq, hkv, sq, skv, d, dv=None, dtype=np.float32, three_d=False):
    dv = dv or d
    if three_d:
        return {"Q": rand(b, sq, hq * d, dtype=dtype), "K": rand(b, skv, hkv * d, dtype=dtype),
                "V": rand(b, skv, hkv * dv, dtype=dtype)}
    return {"Q": rand(b, hq, sq, d, dtype=dtype), "K": rand(b, hkv, skv, d, dtype=dtype),
            "V": rand(b, hkv, skv, dv, dtype=dtype)}


def with_opt(base, mask=None, past_key=None, past_value=None, nonpad=None):
    d = dict(base)
    d["attn_mask"] = mask
    d["past_key"] = past_key
    d["past_value"] = past_value
    if nonpad is not None:
        d["nonpad_kv_seqlen"] = nonpad
    return d


# ---- Attention, 4-D ----
case("attn_4d_basic", "Attention", qkv(2, 3, 3, 4, 6, 8))
case("attn_4d_single", "Attention", qkv(1, 1, 1, 1, 1, 4))
case("attn_4d_odd", "Attention", qkv(1, 2, 2, 5, 3, 7, dv=5))
case("attn_4d_self", "Attention", qkv(2, 2, 2, 7, 7, 6))
case("attn_4d_q_longer", "Attention", qkv(1, 2, 2, 9, 4, 8))
case("attn_4d_gqa", "Attention", qkv(2, 6, 2, 4, 5, 8))
case("attn_4d_mqa", "Attention", qkv(1, 4, 1, 3, 6, 8, dv=3))
case("attn_4d_scale", "Attention", qkv(2, 3, 3, 4, 6, 8), scale=0.3)
case("attn_4d_scale_big", "Attention", qkv(1, 2, 2, 4, 6, 8), scale=2.5)
case("attn_4d_softcap", "Attention", qkv(2, 3, 3, 4, 6, 8), softcap=0.7)
case("attn_4d_softcap_scale", "Attention", qkv(2, 2, 2, 4, 6, 8), softcap=3.0, scale=2.0)
case("attn_4d_causal", "Attention", qkv(2, 3, 3, 5, 5, 8), is_causal=1)
case("attn_4d_causal_q_shorter", "Attention", qkv(2, 3, 3, 3, 6, 8), is_causal=1)
case("attn_4d_causal_gqa", "Attention", qkv(1, 4, 2, 6, 6, 4), is_causal=1)
case("attn_4d_heads_attr", "Attention", qkv(1, 4, 2, 3, 5, 4), q_num_heads=4, kv_num_heads=2)

# ---- masks ----
case("attn_mask_2d", "Attention", with_opt(qkv(2, 3, 3, 4, 6, 8), rand(4, 6)))
case("attn_mask_3d", "Attention", with_opt(qkv(2, 3, 3, 4, 6, 8), rand(3, 4, 6)))
case("attn_mask_4d", "Attention", with_opt(qkv(2, 3, 3, 4, 6, 8), rand(2, 3, 4, 6)))
case("attn_mask_4d_bcast_heads", "Attention", with_opt(qkv(2, 3, 3, 4, 6, 8), rand(2, 1, 4, 6)))
case("attn_mask_4d_bcast_batch", "Attention", with_opt(qkv(2, 3, 3, 4, 6, 8), rand(1, 3, 1, 6)))
case("attn_mask_bool_2d", "Attention",
     with_opt(qkv(2, 3, 3, 4, 6, 8), np.random.default_rng(1).random((4, 6)) > 0.3))
case("attn_mask_bool_4d", "Attention",
     with_opt(qkv(2, 3, 3, 4, 6, 8), np.random.default_rng(2).random((2, 1, 4, 6)) > 0.3))
neg = rand(4, 6)
neg[:, 4:] = -np.inf
# onnxruntime applies softcap after the mask; the spec (and its poison test) before it.
case("attn_mask_neginf_softcap", "Attention", with_opt(qkv(1, 2, 2, 4, 6, 8), neg), softcap=0.5,
     source="ref")
case("attn_mask_causal", "Attention", with_opt(qkv(2, 3, 3, 4, 6, 8), rand(4, 6)), is_causal=1)
# Query 0 may see no key (the causal mask allows key 0, the bool mask forbids it): the spec's
# softmax over only -inf gives NaN there, onnxruntime 1.32 gives 0 (1.23 gave NaN). The
# reference runs the same mask as 0/-inf (its bool path turns 0 * -inf into NaN everywhere).
base = qkv(2, 3, 3, 6, 6, 8)
bool_mask = np.random.default_rng(3).random((6, 6)) > 0.2
case("attn_mask_bool_causal", "Attention", with_opt(base, bool_mask), is_causal=1, source="ref",
     ref_inputs=with_opt(base, np.where(bool_mask, 0, -np.inf).astype(np.float32)))
case("attn_mask_gqa", "Attention", with_opt(qkv(2, 6, 3, 4, 6, 8), rand(2, 6, 4, 6)))
# Opset 23 broadcasts a key axis of 1; onnxruntime refuses it, the reference pads it instead.
m1 = rand(4, 1)
base = qkv(2, 3, 3, 4, 6, 8)
case("attn_mask_key_axis_1", "Attention", with_opt(base, m1), source="ref",
     ref_inputs=with_opt(base, np.ascontiguousarray(np.broadcast_to(m1, (4, 6)))))

# ---- 3-D inputs ----
case("attn_3d_basic", "Attention", qkv(2, 3, 3, 4, 6, 8, three_d=True), q_num_heads=3,
     kv_num_heads=3)
case("attn_3d_diff_v", "Attention", qkv(2, 3, 3, 4, 6, 8, dv=5, three_d=True), q_num_heads=3,
     kv_num_heads=3)
case("attn_3d_gqa", "Attention", qkv(2, 6, 2, 4, 6, 4, three_d=True), q_num_heads=6,
     kv_num_heads=2)
case("attn_3d_causal_mask", "Attention", with_opt(qkv(1, 2, 2, 5, 5, 4, three_d=True), rand(5, 5)),
     q_num_heads=2, kv_num_heads=2, is_causal=1)
case("attn_3d_softcap_scale", "Attention", qkv(2, 2, 2, 3, 4, 6, three_d=True), q_num_heads=2,
     kv_num_heads=2, softcap=2.0, scale=0.5)

# ---- KV cache ----
for tag, three_d, hq, hkv, dv in (("4d", False, 3, 3, 8), ("4d_gqa", False, 6, 2, 8),
                                   ("4d_diff_v", False, 2, 2, 5), ("3d", True, 3, 3, 8),
                                   ("3d_gqa", True, 4, 2, 6)):
    base = qkv(2, hq, hkv, 3, 4, 8, dv=dv, three_d=three_d)
    past = {"past_key": rand(2, hkv, 5, 8), "past_value": rand(2, hkv, 5, dv)}
    heads = {"q_num_heads": hq, "kv_num_heads": hkv} if three_d else {}
    case(f"attn_past_{tag}", "Attention", with_opt(base, None, **past),
         ("Y", "present_key", "present_value"), **heads)
    case(f"attn_past_{tag}_mask", "Attention", with_opt(base, rand(3, 9), **past),
         ("Y", "present_key", "present_value"), **heads)
    case(f"attn_past_{tag}_causal", "Attention", with_opt(base, None, **past),
         ("Y", "present_key", "present_value"), is_causal=1, **heads)
case("attn_past_only_y", "Attention",
     with_opt(qkv(1, 2, 2, 1, 1, 8), None, rand(1, 2, 7, 8), rand(1, 2, 7, 8)), is_causal=1)
case("attn_past_empty", "Attention",
     with_opt(qkv(1, 2, 2, 3, 3, 4), None, rand(1, 2, 0, 4), rand(1, 2, 0, 4)),
     ("Y", "present_key", "present_value"), is_causal=1)
case("attn_present_without_past", "Attention", qkv(2, 2, 2, 3, 3, 4, three_d=True),
     ("Y", "present_key", "present_value"), q_num_heads=2, kv_num_heads=2)

# ---- qk_matmul_output ----
base = with_opt(qkv(2, 3, 3, 4, 6, 8), rand(4, 6))
case("attn_qk_mode0", "Attention", base, ("Y", "", "", "qk"))
# Mode 0 is the raw scaled product, also with softcap (numpy); Y from the reference.
feeds = {k: v for k, v in base.items() if v is not None}
y_ref = reference(helper.make_node("Attention", list(feeds), ["Y"], softcap=1.5), feeds, 23)[0]
raw = np.matmul(feeds["Q"], feeds["K"].transpose(0, 1, 3, 2)) / np.sqrt(8)
cases.model("attn_qk_mode0_softcap",
            [helper.make_node("Attention", list(feeds), ["Y", "", "", "qk"],
                              name="attn_qk_mode0_softcap", softcap=1.5)],
            feeds, ["Y", "qk"], opset=23, rtol=1e-4, atol=1e-5,
            expected={"Y": y_ref.astype(np.float32), "qk": raw.astype(np.float32)})
for mode in (1, 2, 3):
    case(f"attn_qk_mode{mode}", "Attention", base, ("Y", "", "", "qk"), source="ref",
         qk_matmul_output_mode=mode, softcap=1.5)
case("attn_qk_mode2_causal_past", "Attention",
     with_opt(qkv(1, 2, 2, 3, 3, 4), rand(1, 1, 3, 8), rand(1, 2, 5, 4), rand(1, 2, 5, 4)),
     ("Y", "present_key", "present_value", "qk"), source="ref", qk_matmul_output_mode=2,
     is_causal=1)
case("attn_qk_mode3_gqa", "Attention", qkv(1, 4, 2, 3, 5, 4), ("Y", "", "", "qk"), source="ref",
     qk_matmul_output_mode=3)

# ---- softmax_precision ----
case("attn_softmax_f32", "Attention", with_opt(qkv(2, 2, 2, 4, 6, 8), rand(4, 6)),
     softmax_precision=1)
case("attn_softmax_f64", "Attention", with_opt(qkv(2, 2, 2, 4, 6, 8), rand(4, 6)),
     softmax_precision=11)

# ---- float16 and float64 ----
case("attn_f16_basic", "Attention", qkv(2, 3, 3, 4, 6, 8, dtype=F16), rtol=2e-3, atol=1e-3)
case("attn_f16_mask_past", "Attention",
     with_opt(qkv(1, 4, 2, 3, 4, 8, dtype=F16), rand(3, 7, dtype=F16), rand(1, 2, 3, 8, dtype=F16),
              rand(1, 2, 3, 8, dtype=F16)),
     ("Y", "present_key", "present_value"), rtol=2e-3, atol=1e-3)
case("attn_f16_3d_causal", "Attention", qkv(2, 2, 2, 5, 5, 4, dtype=F16, three_d=True),
     q_num_heads=2, kv_num_heads=2, is_causal=1, rtol=2e-3, atol=1e-3)
# onnxruntime's float64 kernel loses precision (errors ~3e-6 relative): the reference is exact.
case("attn_f64_basic", "Attention", qkv(2, 3, 3, 4, 6, 8, dtype=F64), source="ref", rtol=1e-9,
     atol=1e-12)
case("attn_f64_3d_past_mask", "Attention",
     with_opt(qkv(1, 2, 2, 3, 4, 4, dtype=F64, three_d=True), rand(3, 6, dtype=F64),
              rand(1, 2, 2, 4, dtype=F64), rand(1, 2, 2, 4, dtype=F64)),
     ("Y", "present_key", "present_value"), q_num_heads=2, kv_num_heads=2, source="ref", rtol=1e-9,
     atol=1e-12)

# ---- opset 24 (reference: written when onnxruntime, at 1.23, had no opset 24) ----
base = qkv(2, 3, 3, 4, 6, 8, dv=5)
case("attn24_basic", "Attention", base, opset=24, source="ref")
# The reference cannot add the padding mask to a bias without a batch axis: it is fed an
# all-zero mask with one, which changes nothing.
case("attn24_nonpad", "Attention", with_opt(base, nonpad=np.array([6, 3], np.int64)), opset=24,
     source="ref",
     ref_inputs=with_opt(base, np.zeros((2, 1, 4, 6), np.float32),
                         nonpad=np.array([6, 3], np.int64)))
case("attn24_nonpad_mask_short", "Attention",
     with_opt(base, rand(2, 3, 4, 4), nonpad=np.array([4, 2], np.int64)), opset=24, source="ref")
case("attn24_mask_short_bool", "Attention",
     with_opt(base, np.random.default_rng(4).random((4, 5)) > 0.2), opset=24, source="ref")
case("attn24_mask_short_causal", "Attention", with_opt(qkv(1, 2, 2, 6, 6, 4), rand(6, 4)),
     opset=24, source="ref", is_causal=1)
base = qkv(2, 4, 2, 3, 7, 4, three_d=True)
case("attn24_nonpad_gqa_3d", "Attention", with_opt(base, nonpad=np.array([7, 5], np.int64)),
     opset=24, source="ref", q_num_heads=4, kv_num_heads=2,
     ref_inputs=with_opt(base, np.zeros((2, 1, 3, 7), np.float32),
                         nonpad=np.array([7, 5], np.int64)))
case("attn24_past_softcap", "Attention",
     with_opt(qkv(1, 2, 2, 2, 2, 4), rand(2, 5), rand(1, 2, 3, 4), rand(1, 2, 3, 4)),
     ("Y", "present_key", "present_value"), opset=24, source="ref", softcap=1.0)

# ---- larger: several row blocks, threads ----
case("attn_big_causal", "Attention", qkv(2, 8, 4, 100, 100, 32), is_causal=1, rtol=1e-3,
     atol=1e-5)
case("attn_big_3d_mask", "Attention",
     with_opt(qkv(1, 8, 8, 70, 130, 16, dv=24, three_d=True), rand(70, 130)), q_num_heads=8,
     kv_num_heads=8, rtol=1e-3, atol=1e-5)

# Heads above OpenBLAS's threading threshold take the one-head-at-a-time path; the second one
# needs two blocks of query rows.
case("attn_big_head_qk_mask", "Attention",
     with_opt(qkv(1, 2, 2, 80, 120, 40), rand(2, 80, 120)), ("Y", "", "", "qk"), source="ref",
     qk_matmul_output_mode=2, softcap=2.0, rtol=1e-3, atol=1e-5)
case("attn_big_head_blocks_past", "Attention",
     with_opt(qkv(1, 1, 1, 2100, 500, 8), None, rand(1, 1, 100, 8), rand(1, 1, 100, 8)),
     ("Y", "present_key", "present_value"), is_causal=1, rtol=1e-3, atol=1e-5)

# ---- RotaryEmbedding ----
def caches(rows, half, batch=None, dtype=np.float32):
    shape = (rows, half) if batch is None else (batch, rows, half)
    theta = rand(*shape, low=0, high=6.3)
    return {"cos_cache": np.cos(theta).astype(dtype), "sin_cache": np.sin(theta).astype(dtype)}


def positions(b, s, hi):
    return np.random.default_rng(b * 100 + s).integers(0, hi, (b, s)).astype(np.int64)


case("rope_4d", "RotaryEmbedding",
     {"X": rand(2, 4, 3, 8), **caches(50, 4), "position_ids": positions(2, 3, 50)})
case("rope_4d_interleaved", "RotaryEmbedding",
     {"X": rand(2, 4, 3, 8), **caches(50, 4), "position_ids": positions(2, 3, 50)}, interleaved=1)
case("rope_3d", "RotaryEmbedding",
     {"X": rand(2, 3, 24), **caches(10, 3), "position_ids": positions(2, 3, 10)}, num_heads=4)
case("rope_3d_interleaved_partial", "RotaryEmbedding",
     {"X": rand(2, 5, 32), **caches(10, 2), "position_ids": positions(2, 5, 10)}, num_heads=4,
     interleaved=1, rotary_embedding_dim=4)
case("rope_partial", "RotaryEmbedding",
     {"X": rand(1, 2, 5, 10), **caches(8, 3), "position_ids": positions(1, 5, 8)},
     rotary_embedding_dim=6)
case("rope_no_positions", "RotaryEmbedding", {"X": rand(2, 3, 4, 6), **caches(4, 3, batch=2)})
case("rope_no_positions_3d_interleaved", "RotaryEmbedding",
     {"X": rand(2, 4, 12), **caches(4, 3, batch=2)}, num_heads=2, interleaved=1)
case("rope_no_positions_partial", "RotaryEmbedding", {"X": rand(1, 2, 3, 8), **caches(3, 1, 1)},
     rotary_embedding_dim=2)
case("rope_f16", "RotaryEmbedding",
     {"X": rand(2, 4, 3, 8, dtype=F16), **caches(50, 4, dtype=F16),
      "position_ids": positions(2, 3, 50)}, rtol=2e-3, atol=2e-3)
case("rope_f16_3d_interleaved", "RotaryEmbedding",
     {"X": rand(2, 3, 16, dtype=F16), **caches(3, 4, batch=2, dtype=F16)}, num_heads=2,
     interleaved=1, rtol=2e-3, atol=2e-3)
case("rope_big", "RotaryEmbedding",
     {"X": rand(2, 8, 64, 64), **caches(128, 32), "position_ids": positions(2, 64, 128)})

# ---- RMSNormalization ----
for shape, axis, scale_shape in (((3, 4), -1, (4,)), ((3, 4), 0, (3, 4)), ((2, 3, 5), 1, (3, 5)),
                                 ((2, 3, 5), -2, (3, 5)), ((2, 3, 4, 5), 2, (4, 5)),
                                 ((2, 3, 4, 5), -4, (2, 3, 4, 5)), ((7,), 0, (7,)),
                                 ((2, 3, 4, 5), 1, (3, 4, 5))):
    tag = "x".join(map(str, shape))
    case(f"rms_{tag}_axis{axis}", "RMSNormalization",
         {"X": rand(*shape), "scale": rand(*scale_shape)}, axis=axis)
case("rms_default_axis", "RMSNormalization", {"X": rand(2, 3, 6), "scale": rand(6)})
case("rms_epsilon", "RMSNormalization", {"X": rand(2, 3, 6, low=-0.01, high=0.01),
                                         "scale": rand(6)}, epsilon=0.01)
case("rms_zero_row", "RMSNormalization", {"X": np.zeros((2, 4), np.float32), "scale": rand(4)})
case("rms_scale_broadcast_axis2", "RMSNormalization",
     {"X": rand(2, 3, 4, 5), "scale": rand(1, 5)}, axis=2)
# onnxruntime accepts only scale shaped like X[axis:] (or broadcasting when axis is 2):
# the reference checks the spec's unidirectional broadcasting.
case("rms_scale_bcast_ref", "RMSNormalization", {"X": rand(2, 3, 4, 5), "scale": rand(3, 1, 1)},
     axis=1, source="ref")
case("rms_scale_outer_ref", "RMSNormalization", {"X": rand(2, 3, 4, 5), "scale": rand(2, 1, 1, 5)},
     axis=3, source="ref")
case("rms_f16", "RMSNormalization", {"X": rand(2, 3, 8, dtype=F16), "scale": rand(8, dtype=F16)},
     rtol=2e-3, atol=1e-3)
case("rms_f64", "RMSNormalization", {"X": rand(2, 3, 8, dtype=F64), "scale": rand(3, 8, dtype=F64)},
     axis=1, rtol=1e-6, atol=1e-7)
case("rms_big", "RMSNormalization", {"X": rand(64, 512), "scale": rand(512)}, rtol=1e-4, atol=1e-5)
case("rms_long_row", "RMSNormalization", {"X": rand(3, 40000, low=5, high=6), "scale": rand(40000)},
     rtol=1e-4, atol=1e-5)


# stash_type 11 computes stage one in float64 (numpy; the reference implements only 1).
def rms_numpy(x, w, axis, eps=1e-5):
    xd = x.astype(np.float64)
    axes = tuple(range(axis % x.ndim, x.ndim))
    n = xd / np.sqrt(np.mean(xd * xd, axis=axes, keepdims=True) + np.float64(np.float32(eps)))
    return (n.astype(x.dtype) * w).astype(x.dtype)


for dtype, tag, tol in ((np.float32, "f32", 1e-6), (F16, "f16", 1e-3)):
    x, w = rand(3, 4, 10, dtype=dtype), rand(4, 10, dtype=dtype)
    cases.model(f"rms_stash_f64_{tag}",
                [helper.make_node("RMSNormalization", ["X", "scale"], ["Y"], axis=1,
                                  stash_type=11)],
                {"X": x, "scale": w}, ["Y"], opset=23, rtol=tol, atol=tol,
                expected={"Y": rms_numpy(x, w, 1)})


# Copies of some cases whose inputs have symbolic dims, so that session creation infers with
# unknown sizes and run time with the real ones.
def make_dynamic(src):
    import shutil
    dst = f"{src}_dynamic"
    shutil.copytree(cases.dir / src, cases.dir / dst)
    m = onnx.load(cases.dir / dst / "model.onnx")
    for vi in list(m.graph.input) + list(m.graph.output):
        for i, dim in enumerate(vi.type.tensor_type.shape.dim):
            dim.dim_param = f"{vi.name}_d{i}"
    onnx.save(m, cases.dir / dst / "model.onnx")
    cases.names.add(dst)


for src in ("attn_past_3d_gqa_mask", "attn_past_4d_causal", "attn_qk_mode2",
            "attn24_nonpad_mask_short",
            "attn_mask_key_axis_1", "rope_3d_interleaved_partial", "rope_no_positions",
            "rms_2x3x5_axis1", "rms_scale_bcast_ref"):
    make_dynamic(src)
