"""Seed corpora and a dictionary for the fuzzers of tests/fuzz (run by tools/fuzz.sh).

    make_seeds.py OUT_DIR TEST_MODELS_DIR

OUT_DIR/models/: every model.onnx of onnx's backend test data (node, simple, pytorch-*, light)
up to 64 KiB, the test models (tests/models/gen_test_models.py's output),
tools/models/digits_cnn.onnx and the regression inputs below, named by content hash (duplicates
once).
OUT_DIR/npy/: .npy files of every dtype Quilt reads, format versions 1-3, 0-d to 4-d, Fortran
order and big-endian (which must be refused), and the digits samples.
OUT_DIR/onnx.dict: libFuzzer dictionary of op names, attribute names and domains.
"""
import hashlib
import io
import os
import sys
from pathlib import Path

import numpy as np
import onnx

MAX_BYTES = 64 * 1024


def put(folder: Path, data: bytes, suffix: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / (hashlib.sha1(data).hexdigest()[:16] + suffix)).write_bytes(data)


def regressions():
    """Inputs that once made a fuzzer report, written as recipes: each fuzz_* run of the test
    command starts from them, so the defect they found cannot come back unnoticed."""
    from onnx import TensorProto, helper
    # A DFT of 2^23 + 1 points on a 4-sample signal: a 64 MiB output, but Bluestein tables of
    # 512 MiB, over ASan's allocation cap in fuzz_run; the tables were std::vectors (out-of-memory
    # abort), now an OutOfMemory error.
    dft = helper.make_graph(
        [helper.make_node("DFT", ["x", "n"], ["y"], onesided=0)], "dft_huge_length",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("n", TensorProto.INT64, [], [(1 << 23) + 1])])
    yield helper.make_model(dft, opset_imports=[helper.make_opsetid("", 17)])
    # A reflect Pad whose input declares a dim of 2^31: the CPU kernel planned an index per output
    # position along every axis while the session was created (16 GB, an out-of-memory abort in
    # fuzz_model and fuzz_run); now only outputs with few positions are planned then.
    pad = helper.make_graph(
        [helper.make_node("Pad", ["x"], ["y"], mode="reflect", pads=[0, 0, 1, 1, 0, 0, 1, 1])],
        "pad_declared_huge", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1 << 31, 2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    yield helper.make_model(pad, opset_imports=[helper.make_opsetid("", 6)])
    # MaxUnpool whose I has fewer elements than X (a dim unknown at load): the CPU kernel read I
    # past its end (ASan heap-buffer-overflow in fuzz_run); I must now have X's shape.
    unpool = helper.make_graph(
        [helper.make_node("MaxUnpool", ["x", "i"], ["y"], kernel_shape=[2, 2])], "maxunpool_short_indices",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 1, 4, 2]),
         helper.make_tensor_value_info("i", TensorProto.INT64, [1, 1, "h", 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    yield helper.make_model(unpool, opset_imports=[helper.make_opsetid("", 22)])
    # TfIdfVectorizer with an n-gram index of INT64_MAX: its inference computed the width
    # INT64_MAX + 1 (UBSan in fuzz_model); now an error.
    tfidf = helper.make_graph(
        [helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode="TF", min_gram_length=1, max_gram_length=1,
                          max_skip_count=0, ngram_counts=[0], ngram_indexes=[0, (1 << 63) - 1],
                          pool_int64s=[1, 2])], "tfidf_huge_index",
        [helper.make_tensor_value_info("x", TensorProto.INT64, [2, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    yield helper.make_model(tfidf, opset_imports=[helper.make_opsetid("", 9)])
    # A Pad without pads in a Scan body whose state has no element type: inference let it through
    # without a rank, and the CPU kernel, compiled on the run with a rank-1 input, read pads[0]
    # of an empty list (UBSan in fuzz_run); now an error naming the node.
    yield scan_pad_without_pads()
    # A Conv whose W has a spatial dim of 0 and no kernel_shape: the CPU depthwise kernel indexed
    # its empty tap list (UBSan in fuzz_run); now a load error.
    conv = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[0, 7, 1, 1], strides=[2, 2])], "conv_zero_window",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, "h", 48]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, [1, 1, 0, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    yield helper.make_model(conv, opset_imports=[helper.make_opsetid("", 22)])
    # LabelEncoder with float values at float32's largest: the CPU kernel also cast each to int64
    # (undefined past 2^63; UBSan in fuzz_model); float keys and values keep no integer form now.
    label = helper.make_graph(
        [helper.make_node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml", keys_floats=[3.4e38],
                          values_floats=[-3.4e38])], "label_encoder_extreme_floats",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    yield helper.make_model(label, opset_imports=[helper.make_opsetid("", 17),
                                                  helper.make_opsetid("ai.onnx.ml", 2)])
    # Unique along an axis of 2^31 - 1 empty slices: its grouping was sized by that count (a
    # 16 GB index at shape inference; fuzz_run, ASan out of memory). Empty slices are one group.
    unique = helper.make_graph(
        [helper.make_node("Unique", ["x"], ["y", "i", "v", "c"], axis=2)], "unique_empty_slices",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2, 2**31 - 1, 0])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT if n == "y" else TensorProto.INT64,
                                       None) for n in "yivc"])
    yield helper.make_model(unique, opset_imports=[helper.make_opsetid("", 11)])
    # Split with an unnamed output and a dim known only at run time: the CPU kernel read the
    # unnamed output's shape, which has no type there (fuzz_run, UBSan; a SIGSEGV in a release
    # build when the unnamed output is not the last).
    split = helper.make_graph(
        [helper.make_node("Split", ["x"], ["y0", "", "y2"], axis=1)], "split_unnamed_output",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "n"])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y0", "y2")])
    yield helper.make_model(split, opset_imports=[helper.make_opsetid("", 18)])
    # Trilu with a k input on an empty input declaring a 2^63 - 1 dim: k was clamped to
    # [-(rows + 1), cols + 1], which overflowed (fuzz_run, UBSan); it is clamped to [-rows, cols].
    trilu = helper.make_graph(
        [helper.make_node("Trilu", ["x", "k"], ["y"])], "trilu_k_huge_rows",
        [helper.make_tensor_value_info("x", TensorProto.INT64, [2**63 - 1, 0]),
         helper.make_tensor_value_info("k", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    yield helper.make_model(trilu, opset_imports=[helper.make_opsetid("", 14)])
    # MaxPool with a stride of 2^63 - 1 along a dim with one output: rounding the valid output
    # range up ((a + stride - 1) / stride) overflowed (fuzz_run, UBSan).
    pool = helper.make_graph(
        [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2, 2], pads=[1] * 6,
                          strides=[2, 2, 2**63 - 1])], "maxpool_stride_huge",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 5, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    yield helper.make_model(pool, opset_imports=[helper.make_opsetid("", 18)])
    # Shrink of int64 with a bias of -3.4e38: the result's conversion back to int64 was undefined
    # (fuzz_run, UBSan).
    shrink = helper.make_graph(
        [helper.make_node("Shrink", ["x"], ["y"], bias=-3.4e38, lambd=1.0)], "shrink_int_bias_huge",
        [helper.make_tensor_value_info("x", TensorProto.INT64, [6])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    yield helper.make_model(shrink, opset_imports=[helper.make_opsetid("", 17)])
    # LSTM on an empty batch declared 2^31 steps long: the CPU kernel ran every step on no rows
    # (fuzz_run: 117 s under ASan, 18 s in a release build); an empty batch returns at once.
    lstm = helper.make_graph(
        [helper.make_node("LSTM", ["X", "W", "R"], ["", "Y_h"], hidden_size=3)],
        "lstm_empty_batch_long",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2**31, 0, 2]),
         helper.make_tensor_value_info("W", TensorProto.FLOAT, [1, 12, 2]),
         helper.make_tensor_value_info("R", TensorProto.FLOAT, [1, 12, 3])],
        [helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, None)])
    yield helper.make_model(lstm, opset_imports=[helper.make_opsetid("", 22)])
    # Unique along an axis of an empty input with 2^32 - 2 slices before it: the output copy
    # looped over them all (fuzz_run: 11 s under ASan).
    unique_outer = helper.make_graph(
        [helper.make_node("Unique", ["x"], ["y"], axis=2)], "unique_empty_huge_outer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2**31 - 1, 10, 0])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    yield helper.make_model(unique_outer, opset_imports=[helper.make_opsetid("", 11)])
    # The same with the axis itself empty (a mutation of the seed above): the copy still looped
    # over the 2^32 - 2 outer slices (fuzz_run: 58 s under ASan, a timeout); an empty output
    # copies nothing now.
    unique_axis = helper.make_graph(
        [helper.make_node("Unique", ["x"], ["y"], axis=2)], "unique_empty_axis_huge_outer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2**31 - 1, 0])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    yield helper.make_model(unique_axis, opset_imports=[helper.make_opsetid("", 11)])
    # MatMulInteger of two empty vectors: the CPU kernel divided A's size by the depth, 0
    # (fuzz_run, UBSan: division by zero).
    mmi = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "matmul_integer_empty_depth",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [0]),
         helper.make_tensor_value_info("b", TensorProto.UINT8, [0])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)])
    yield helper.make_model(mmi, opset_imports=[helper.make_opsetid("", 13)])
    # RoiAlign with spatial_scale 7.6e22 (the suite's mode_max case, mutated): a roi of a pixel
    # became 1e22 wide and its adaptive grid's float -> int64 conversion overflowed (fuzz_run,
    # UBSan); now an error naming the roi, and rois far larger than the image are sampled only
    # where they cover it.
    roi = helper.make_graph(
        [helper.make_node("RoiAlign", ["X", "rois", "batch_indices"], ["Y"], mode="max",
                          coordinate_transformation_mode="output_half_pixel", output_height=5,
                          output_width=5, spatial_scale=7.55578637259143e22)],
        "roialign_huge_spatial_scale",
        [helper.make_tensor_value_info("rois", TensorProto.FLOAT, [3, 4]),
         helper.make_tensor_value_info("X", TensorProto.FLOAT, [10, 1, 10, 1]),
         helper.make_tensor_value_info("batch_indices", TensorProto.INT64, [3])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    yield helper.make_model(roi, opset_imports=[helper.make_opsetid("", 16)])


def scan_pad_without_pads():
    from onnx import TensorProto, helper
    body = helper.make_graph(
        [helper.make_node("Add", ["sum_in", "next"], ["sum_out"]),
         helper.make_node("Pad", ["sum_out"], ["scan_out"], name="pad")], "body",
        [helper.make_tensor_value_info("sum_in", TensorProto.UNDEFINED, [2]),
         helper.make_tensor_value_info("next", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("sum_out", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("scan_out", TensorProto.FLOAT, None)])
    graph = helper.make_graph(
        [helper.make_node("Scan", ["initial", "x"], ["y", "z"], num_scan_inputs=1, body=body)],
        "scan_pad_without_pads",
        [helper.make_tensor_value_info("initial", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])


def main() -> None:
    out, test_models = Path(sys.argv[1]), Path(sys.argv[2])
    root = Path(__file__).resolve().parents[2]
    data = Path(onnx.__file__).parent / "backend" / "test" / "data"
    models = [p for s in ("node", "simple", "pytorch-converted", "pytorch-operator", "light")
              for p in sorted((data / s).glob("*/model.onnx"))]
    models += sorted(test_models.rglob("*.onnx")) + [root / "tools" / "models" / "digits_cnn.onnx"]
    n = 0
    for p in models:
        b = p.read_bytes()
        if len(b) <= MAX_BYTES:
            put(out / "models", b, ".onnx")
            n += 1
    for model in regressions():
        put(out / "models", model.SerializeToString(), ".onnx")
        n += 1

    m = 0
    for dtype in ("<f4", "<f8", "<f2", "<i8", "<i4", "<i2", "|i1", "<u8", "<u4", "<u2", "|u1", "|b1"):
        for shape in ((), (0,), (3,), (2, 3), (1, 2, 2, 2)):
            a = (np.arange(int(np.prod(shape)), dtype=np.int64) % 3).astype(dtype).reshape(shape)
            for version in ((1, 0), (2, 0), (3, 0)):
                f = io.BytesIO()
                np.lib.format.write_array(f, a, version=version)
                put(out / "npy", f.getvalue(), ".npy")
                m += 1
    for odd in (np.asfortranarray(np.ones((2, 3), "<f4")), np.ones((2, 2), ">f4")):
        f = io.BytesIO()
        np.lib.format.write_array(f, odd, version=(1, 0))
        put(out / "npy", f.getvalue(), ".npy")
    for p in sorted((root / "tools" / "models").glob("*.npy")):
        put(out / "npy", p.read_bytes(), ".npy")

    words = set()
    for schema in onnx.defs.get_all_schemas_with_history():
        words.add(schema.name)
        words.update(schema.attributes.keys())
        if schema.domain:
            words.add(schema.domain)
    words.update(["descr", "fortran_order", "shape", "False", "True", "<f4", "<i8", "|b1"])
    with open(out / "onnx.dict", "w") as f:
        for w in sorted(words):
            f.write('"' + w.replace("\\", "\\\\").replace('"', '\\"') + '"\n')
    print(f"seeds: {n} models, {m + 2} npy files, {len(words)} dictionary words in {out}")


if __name__ == "__main__":
    main()
