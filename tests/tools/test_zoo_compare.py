#!/usr/bin/env python3
"""Tests of tools/zoo.py's pure parts: numpy only, plus onnx and onnxruntime (from
tools/requirements.txt) for the Split rewrite; no torch, no Quilt build.

    .venv/bin/python tests/tools/test_zoo_compare.py
"""
import sys
import unittest
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import zoo  # noqa: E402


class CompareTest(unittest.TestCase):
    def setUp(self):
        self.ref = np.random.default_rng(0).standard_normal((4, 1000)).astype(np.float32) * 50

    def test_identical_passes(self):
        ok, diff, cosine, why = zoo.compare(self.ref.copy(), self.ref)
        self.assertTrue(ok, why)
        self.assertEqual(diff, 0.0)
        self.assertAlmostEqual(cosine, 1.0)

    def test_rounding_noise_relative_to_scale_passes(self):
        # Errors of 1e-5 of the output's scale, also on elements near zero.
        noise = np.random.default_rng(1).standard_normal(self.ref.shape) * 1e-5 * np.abs(self.ref).max()
        ok, _, cosine, why = zoo.compare((self.ref + noise).astype(np.float32), self.ref)
        self.assertTrue(ok, why)
        self.assertGreater(cosine, 0.9999)

    def test_one_wrong_element_fails(self):
        bad = self.ref.copy()
        bad[2, 7] += 0.01 * np.abs(self.ref).max()
        ok, diff, _, why = zoo.compare(bad, self.ref)
        self.assertFalse(ok)
        self.assertIn("allclose", why)
        self.assertGreater(diff, 0.0)

    def test_scaled_output_fails_on_allclose(self):
        ok, _, cosine, why = zoo.compare(self.ref * 1.01, self.ref)
        self.assertFalse(ok)  # cosine is 1 for a scaled copy: allclose must catch it
        self.assertAlmostEqual(cosine, 1.0)

    def test_low_cosine_fails(self):
        other = np.random.default_rng(2).standard_normal(self.ref.shape).astype(np.float32)
        ok, _, cosine, why = zoo.compare(other, self.ref)
        self.assertFalse(ok)
        self.assertLess(cosine, 0.9999)
        self.assertIn("cosine", why)

    def test_shape_and_dtype_mismatch(self):
        self.assertFalse(zoo.compare(self.ref[:2], self.ref)[0])
        self.assertIn("dtype", zoo.compare(self.ref.astype(np.float64), self.ref)[3])

    def test_nan_where_reference_is_finite_fails(self):
        bad = self.ref.copy()
        bad[0, 0] = np.nan
        self.assertFalse(zoo.compare(bad, self.ref)[0])

    def test_matching_infinities_pass(self):
        ref = self.ref.copy()
        ref[1, 1] = -np.inf
        self.assertTrue(zoo.compare(ref.copy(), ref)[0])

    def test_all_zero(self):
        z = np.zeros((3, 3), np.float32)
        self.assertTrue(zoo.compare(z, z)[0])
        self.assertFalse(zoo.compare(z + 1, z)[0])

    def test_integers_exact(self):
        ids = np.arange(10, dtype=np.int64)
        self.assertTrue(zoo.compare(ids.copy(), ids)[0])
        other = ids.copy()
        other[3] = 4
        self.assertFalse(zoo.compare(other, ids)[0])


class HelpersTest(unittest.TestCase):
    def test_inputs_are_deterministic(self):
        specs = zoo.MODELS["bert_base"][1]
        a, b = zoo.make_inputs(specs), zoo.make_inputs(specs)
        self.assertEqual(sorted(a), ["attention_mask", "input_ids"])
        np.testing.assert_array_equal(a["input_ids"], b["input_ids"])
        self.assertEqual(a["input_ids"].dtype, np.int64)
        self.assertTrue(0 <= a["input_ids"].min() and a["input_ids"].max() < 30522)
        self.assertTrue(np.all(a["attention_mask"] == 1))
        image = zoo.make_inputs(zoo.MODELS["resnet50"][1])["input"]
        self.assertEqual((image.shape, image.dtype), ((1, 3, 224, 224), np.float32))

    def test_error_line_picks_the_error(self):
        text = "loading model\n[Conv node \"c1\"] kernel_shape has rank 3, expected 2\nmore\n"
        self.assertEqual(zoo.error_line(text), '[Conv node "c1"] kernel_shape has rank 3, expected 2')
        self.assertEqual(zoo.error_line(""), "no message")
        listed = "quilt: model 'm.onnx' uses ops Quilt does not implement:\n  - Foo (opset 1) at node \"n\"\n"
        self.assertEqual(zoo.error_line(listed),
                         "quilt: model 'm.onnx' uses ops Quilt does not implement: Foo (opset 1) at node \"n\"")

    def test_table(self):
        table = zoo.format_table(["a", "bb"], [["xyz", 1]]).splitlines()
        self.assertEqual(table[0], "| a   | bb |")
        self.assertEqual(table[2], "| xyz | 1  |")

    def test_half_bench_table(self):
        # A half-precision run's row carries Quilt's float32 run and the ratio to it.
        results = {"m": {"quilt": {"cpu": {"ms": 2.0, "creation": 1.0, "peak": 10.0}},
                         "ort": {"ms": 4.0, "creation": 2.0, "peak": 20.0}, "fp32": {"ms": 5.0}}}
        header, rows, means = zoo.bench_table(results, ["cpu"], "bf16 compute")
        self.assertEqual(header[:6], ["model", "Quilt ms (cpu, bf16 compute)", "ORT ms", "Quilt/ORT",
                                      "Quilt fp32 ms (cpu)", "bf16 compute / Quilt fp32"])
        self.assertEqual(rows[0][:6], ["m", "2", "4", "0.50", "5", "0.40"])
        self.assertAlmostEqual(means["cpu"], 0.5)
        header, rows, _ = zoo.bench_table(results, ["cpu"])  # float32: no such columns
        self.assertNotIn("Quilt fp32 ms (cpu)", header)
        self.assertEqual(len(rows[0]), len(header))

    def test_memory_section(self):
        # Peak memory per backend list against the first, raw and without the device runtime's
        # fixed memory (runtime_memory, measured by the real tool: test_zoo_runtime_memory.py).
        results = {"m": {"quilt": {"cpu": {"ms": 1.0, "creation": 1.0, "peak": 50.0},
                                   "opencl,cpu": {"ms": 1.0, "creation": 1.0, "peak": 120.0,
                                                  "devices": ["cpu", "opencl:0"]}},
                         "ort": {"ms": 1.0, "creation": 1.0, "peak": 60.0}},
                   # planned on the CPU alone: PoCL never loaded, nothing left out
                   "small": {"quilt": {"cpu": {"ms": 1.0, "creation": 1.0, "peak": 10.0},
                                       "opencl,cpu": {"ms": 1.0, "creation": 1.0, "peak": 11.0,
                                                      "devices": ["cpu"]}},
                             "ort": {"ms": 1.0, "creation": 1.0, "peak": 60.0}}}
        measured = zoo.runtime_memory
        try:
            zoo.runtime_memory = lambda quilt, backend, threads: 65.0
            text = zoo.memory_section(results, ["cpu", "opencl,cpu"], "quilt", 2)
            zoo.runtime_memory = lambda quilt, backend, threads: None
            unmeasured = zoo.memory_section(results, ["cpu", "opencl,cpu"], "quilt", 2)
        finally:
            zoo.runtime_memory = measured
        self.assertIn("`opencl,cpu`: **65.0 MiB**", text)
        row = next(l for l in text.splitlines() if l.startswith("| m "))
        self.assertEqual([c.strip() for c in row.strip("|").split("|")],
                         ["m", "50.0", "120.0", "2.40", "1.10"])
        row = next(l for l in text.splitlines() if l.startswith("| small "))
        self.assertEqual([c.strip() for c in row.strip("|").split("|")],
                         ["small", "10.0", "11.0", "1.10", "1.10 (not used)"])
        self.assertIn("not measured", unmeasured)
        row = next(l for l in unmeasured.splitlines() if l.startswith("| m "))
        self.assertEqual(row.strip("| ").split("|")[-1].strip(), "—")
        self.assertEqual(zoo.memory_section(results, ["cpu"], "quilt", 2), "")  # no device list

    def test_select(self):
        self.assertEqual(zoo.select("gpt2, mnist"), ["gpt2", "mnist"])
        self.assertEqual(len(zoo.select(None)), 15 + 13)  # classic, small and ml
        ml = zoo.select(None, "ml")
        self.assertEqual(len(ml), 13)
        self.assertIn("tfidf_text", ml)
        self.assertEqual(zoo.family("lgbm_classifier"), "ml")
        self.assertEqual(len(zoo.select(None, "classic")), 11)
        self.assertEqual(zoo.select(None, "small"), ["vad", "ocr_cls", "mlp", "kws"])
        self.assertEqual(zoo.select("kws", "small"), ["kws"])
        quantized = zoo.select(None, "quantized")  # not in the default selection
        self.assertEqual(len(quantized), 16)
        self.assertIn("gpt2-int4", quantized)
        self.assertIn("yolov5s-int8-qop", quantized)
        self.assertFalse(set(quantized) & set(zoo.select(None)))
        self.assertEqual(zoo.family("bert_base-int8-dynamic"), "quantized")
        with self.assertRaises(SystemExit):
            zoo.select("nope")
        with self.assertRaises(SystemExit):  # not of the family asked for
            zoo.select("gpt2", "small")
        # One file per small model (no -op17 variant to find missing).
        self.assertEqual([p.name for p in zoo.model_files(Path("/z"), "vad")], ["vad.onnx"])


class SplitRewriteTest(unittest.TestCase):
    def test_num_outputs_becomes_split_input(self):
        import tempfile

        import onnx
        import onnxruntime as ort
        from onnx import TensorProto, helper

        # What onnx's version converter leaves when it takes a dynamo export from 18 to 17.
        node = helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3)
        graph = helper.make_graph(
            [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 7])],
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, None]) for n in "abc"])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "split.onnx"
            onnx.save(model, path)
            with self.assertRaises(onnx.checker.ValidationError):
                onnx.checker.check_model(str(path))
            self.assertEqual(zoo._split_sizes_as_input(path), 1)
            onnx.checker.check_model(str(path))
            x = np.arange(14, dtype=np.float32).reshape(2, 7)
            a, b, c = ort.InferenceSession(str(path)).run(None, {"x": x})
            np.testing.assert_array_equal(a, x[:, :3])  # opset 18: ceil(7/3) = 3, 3, then 1
            np.testing.assert_array_equal(b, x[:, 3:6])
            np.testing.assert_array_equal(c, x[:, 6:])
            self.assertEqual(zoo._split_sizes_as_input(path), 0)


class ReducedPrecisionTest(unittest.TestCase):
    """--precision bf16 is judged by cosine and argmax agreement, not by the fp32 tolerance."""

    def setUp(self):
        self.ref = np.random.default_rng(2).standard_normal((64, 1000)).astype(np.float32) * 5

    def test_bfloat16_sized_noise_passes(self):
        # bfloat16 rounds to 8 significant bits: relative errors of ~4e-3 per element.
        noisy = self.ref * (1 + np.random.default_rng(3).uniform(-4e-3, 4e-3, self.ref.shape))
        ok, _, cosine, agree, why = zoo.compare_reduced(noisy.astype(np.float32), self.ref)
        self.assertTrue(ok, why)
        self.assertGreater(cosine, 0.9999)
        self.assertGreaterEqual(agree, 0.99)
        self.assertFalse(zoo.compare(noisy.astype(np.float32), self.ref)[0])  # fp32's bound fails it

    def test_changed_decisions_fail(self):
        swapped = self.ref.copy()
        for row in range(4):  # 4 of 64 rows' top class replaced by their lowest
            top, low = swapped[row].argmax(), swapped[row].argmin()
            swapped[row, top], swapped[row, low] = swapped[row, low], swapped[row, top]
        ok, _, cosine, agree, why = zoo.compare_reduced(swapped, self.ref)
        self.assertFalse(ok)
        self.assertAlmostEqual(agree, 60 / 64)
        self.assertIn("argmax agreement 0.9375 < 0.99", why)

    def test_argmax_axis(self):
        seg = np.zeros((1, 3, 2, 2), np.float32)
        seg[0, 2] = 1  # class 2 everywhere
        other = seg.copy()
        other[0, 2, 0, 0], other[0, 0, 0, 0] = 0, 1  # one pixel moves to class 0
        self.assertAlmostEqual(zoo.argmax_agreement(other, seg), 0.75)  # per pixel, over axis 1
        self.assertIsNone(zoo.argmax_agreement(np.int64(3), np.int64(3)))
        ok, _, cosine, _, why = zoo.compare_reduced(-self.ref, self.ref)
        self.assertFalse(ok)
        self.assertIn("cosine", why)


class QuantizedTest(unittest.TestCase):
    def setUp(self):
        self.ref = np.random.default_rng(2).standard_normal((2, 500)).astype(np.float32) * 4

    def test_steps_of_the_output_pass_and_more_fail(self):
        step = 0.05
        near = self.ref.copy()
        near[0, :50] += 3 * step  # three quantization steps on a tenth of the elements
        ok, diff, _, why = zoo.compare_quantized(near, self.ref, step)
        self.assertTrue(ok, why)
        self.assertAlmostEqual(diff, 3 * step, places=5)
        far = self.ref.copy()
        far[1, 3] += 5 * step
        ok, _, _, why = zoo.compare_quantized(far, self.ref, step)
        self.assertFalse(ok)
        self.assertIn("5.0 steps", why)

    def test_step_defaults_to_an_int8_step_of_the_range(self):
        scale = float(np.abs(self.ref).max())
        moved = self.ref.copy()
        moved[0, :10] += 3.5 * scale / 127
        ok, _, _, why = zoo.compare_quantized(moved, self.ref)
        self.assertTrue(ok, why)
        moved[0, 0] += scale / 127
        ok, _, _, _ = zoo.compare_quantized(moved, self.ref)
        self.assertFalse(ok)

    def test_as_close_to_float(self):
        rng = np.random.default_rng(3)
        fp32 = self.ref.astype(np.float64)
        ort = fp32 + rng.standard_normal(fp32.shape) * 0.2  # onnxruntime's quantization noise
        same_noise = fp32 + rng.standard_normal(fp32.shape) * 0.2  # another tie pattern
        ok, quilt_cos, ort_cos = zoo.as_close_to_float(same_noise, ort, fp32)
        self.assertTrue(ok, (quilt_cos, ort_cos))
        wrong = fp32[:, ::-1] + rng.standard_normal(fp32.shape) * 0.2  # a wrong kernel
        ok, quilt_cos, ort_cos = zoo.as_close_to_float(wrong, ort, fp32)
        self.assertFalse(ok)
        self.assertLess(quilt_cos, ort_cos)

    def test_gemm_as_matmul_computes_the_same(self):
        import onnx
        import onnxruntime
        from onnx import TensorProto, helper, numpy_helper

        rng = np.random.default_rng(4)
        w, b = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal(5).astype(np.float32)
        wt = rng.standard_normal((4, 5)).astype(np.float32)
        graph = helper.make_graph(
            [helper.make_node("Gemm", ["x", "w", "b"], ["h"], name="g1"),
             helper.make_node("Gemm", ["h", "wt"], ["y"], name="g2", transB=1),
             helper.make_node("Gemm", ["y", "y"], ["z"], name="kept", transB=1)],  # B not constant
            "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 6])],
            [helper.make_tensor_value_info("z", TensorProto.FLOAT, [3, 3])],
            [numpy_helper.from_array(v, k) for k, v in {"w": w, "b": b, "wt": wt}.items()])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        x = rng.standard_normal((3, 6)).astype(np.float32)
        run = lambda m: onnxruntime.InferenceSession(  # noqa: E731
            m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        want = run(model)
        self.assertEqual(zoo.gemm_as_matmul(model), 2)
        self.assertEqual([n.op_type for n in model.graph.node], ["MatMul", "Add", "MatMul", "Gemm"])
        np.testing.assert_allclose(run(model), want, rtol=1e-5, atol=1e-5)
        onnx.checker.check_model(model)


class CompareMlTest(unittest.TestCase):
    """compare_ml: the ml family's rule (labels exact, probabilities and ZipMap's dicts to 1e-5)."""

    def test_labels_must_be_equal(self):
        labels = np.array([0, 2, 1], np.int64)
        self.assertTrue(zoo.compare_ml(labels.copy(), labels)[0])
        ok, _, why = zoo.compare_ml(np.array([0, 2, 2], np.int64), labels)
        self.assertFalse(ok)
        self.assertIn("labels differ", why)

    def test_string_labels_from_npy_and_onnxruntime_compare(self):
        # Quilt's .npy holds numpy str_, onnxruntime returns object arrays of str.
        ref = np.array(["sport", "finance"], dtype=object)
        self.assertTrue(zoo.compare_ml(np.array(["sport", "finance"]), ref)[0])
        self.assertFalse(zoo.compare_ml(np.array(["sport", "sport"]), ref)[0])

    def test_probabilities_within_1e_5(self):
        ref = np.array([[0.25, 0.75], [0.5, 0.5]], np.float32)
        self.assertTrue(zoo.compare_ml(ref + np.float32(5e-6), ref)[0])
        ok, diff, why = zoo.compare_ml(ref + np.float32(3e-5), ref)
        self.assertFalse(ok)
        self.assertIn("> 1e-05", why)
        # A regressor's values: 1e-5 of their scale (float32's ulp at 400 is 3e-5).
        values = np.array([[412.5], [-87.25]], np.float32)
        self.assertTrue(zoo.compare_ml(values + np.float32(3e-3), values)[0])
        self.assertFalse(zoo.compare_ml(values + np.float32(5e-3), values)[0])
        self.assertFalse(zoo.compare_ml(ref.astype(np.float64), ref)[0])  # a different dtype
        self.assertFalse(zoo.compare_ml(ref[:1], ref)[0])  # a different shape

    def test_zipmap_lists_of_dicts(self):
        # onnxruntime's dicts have int keys, Quilt's JSON string keys.
        ref = [{0: 0.25, 1: 0.75}, {0: 1.0, 1: 0.0}]
        self.assertTrue(zoo.compare_ml([{"0": 0.25, "1": 0.75}, {"0": 1.0, "1": 0.0}], ref)[0])
        self.assertFalse(zoo.compare_ml([{"0": 0.25, "1": 0.75}, {"0": 0.9, "1": 0.1}], ref)[0])
        ok, _, why = zoo.compare_ml([{"0": 0.25, "2": 0.75}, {"0": 1.0, "2": 0.0}], ref)
        self.assertFalse(ok)
        self.assertIn("map keys", why)
        self.assertFalse(zoo.compare_ml([{"0": 0.25, "1": 0.75}], ref)[0])  # a row missing
        self.assertFalse(zoo.compare_ml(np.array([[0.25, 0.75], [1.0, 0.0]]), ref)[0])  # not maps


class MultiplyAddsTest(unittest.TestCase):
    """zoo.multiply_adds against counts worked out by hand, on a model built with onnx.helper."""

    def model(self, nodes, inputs, initializers, tmp):
        import onnx
        from onnx import TensorProto, helper, numpy_helper
        graph = helper.make_graph(
            nodes, "m", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
            [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)],
            [numpy_helper.from_array(np.zeros(s, np.float32), n) for n, s in initializers])
        path = Path(tmp) / "m.onnx"
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
        return path

    def test_counts_each_kind(self):
        import tempfile
        from onnx import helper
        H = helper.make_node
        with tempfile.TemporaryDirectory() as tmp:
            path = self.model([
                # [1, 3, 8, 8] -> [1, 4, 4, 4]: 64 outputs x 3 channels x 9 taps
                H("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4),
                # grouped: [1, 4, 4, 4] -> [1, 4, 4, 4], 2 groups: 64 outputs x 2 x 1
                H("Conv", ["c", "g"], ["d"], kernel_shape=[1, 1], group=2),
                # transposed: 64 inputs x (2 outputs / 1 group) x 4 taps -> [1, 2, 8, 8]
                H("ConvTranspose", ["d", "t"], ["e"], kernel_shape=[2, 2], strides=[2, 2]),
                H("Reshape", ["e", "s"], ["f"]),                  # [16, 8]
                H("Gemm", ["f", "b"], ["h"], transB=1),           # 16 x 5 outputs x 8
                H("MatMul", ["h", "m"], ["y"]),                   # 16 x 3 outputs x 5
            ], [("x", [1, 3, 8, 8])], [("w", [4, 3, 3, 3]), ("g", [4, 2, 1, 1]),
                                       ("t", [4, 2, 2, 2]), ("b", [5, 8]), ("m", [5, 3])], tmp)
            import onnx
            from onnx import numpy_helper
            m = onnx.load(str(path))
            m.graph.initializer.append(numpy_helper.from_array(np.array([16, 8], np.int64), "s"))
            onnx.save(m, str(path))
            self.assertEqual(zoo.multiply_adds(path),
                             64 * 27 + 64 * 2 + 64 * 2 * 4 + 16 * 5 * 8 + 16 * 3 * 5)

    def test_taps_that_only_read_padding_are_not_counted(self):
        import tempfile
        from onnx import helper
        with tempfile.TemporaryDirectory() as tmp:
            # 3x3 input, 3x3 kernel at dilation 4, pads 4: taps 0 and 2 of each dim only read
            # padding, tap 1 reads the input for every output (as DeepLabV3's atrous convs).
            path = self.model([helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3],
                                                dilations=[4, 4], pads=[4, 4, 4, 4])],
                              [("x", [1, 2, 3, 3])], [("w", [5, 2, 3, 3])], tmp)
            self.assertEqual(zoo.multiply_adds(path), 5 * 9 * 2 * 1)
            # SAME_UPPER on 5x5 at stride 2 with a 4x4 kernel: every tap reads inside somewhere.
            path = self.model([helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[4, 4],
                                                strides=[2, 2], auto_pad="SAME_UPPER")],
                              [("x", [1, 1, 5, 5])], [("w", [2, 1, 4, 4])], tmp)
            self.assertEqual(zoo.multiply_adds(path), 2 * 9 * 16)

    def test_unknown_shape_is_none(self):
        import tempfile
        from onnx import helper
        with tempfile.TemporaryDirectory() as tmp:
            path = self.model([helper.make_node("MatMul", ["x", "m"], ["y"])],
                              [("x", ["n", 4])], [("m", [4, 2])], tmp)
            self.assertIsNone(zoo.multiply_adds(path))


class SharedCoresTest(unittest.TestCase):
    def test_the_zen3_vms_two_states(self):
        # Measured on the AMD EPYC Zen 3 VM: 2 threads at 102 GFLOP/s against 99 at one (its
        # virtual CPUs on one core), and 197-200 an hour later.
        self.assertTrue(zoo.cores_shared(99.0, 102.0, 2))
        self.assertFalse(zoo.cores_shared(99.0, 197.0, 2))

    def test_the_bound_and_what_is_not_measured(self):
        self.assertFalse(zoo.cores_shared(100.0, 160.0, 2))
        self.assertTrue(zoo.cores_shared(100.0, 159.9, 2))
        self.assertFalse(zoo.cores_shared(100.0, 100.0, 1))
        self.assertFalse(zoo.cores_shared(None, 102.0, 2))
        self.assertFalse(zoo.cores_shared(99.0, None, 2))


if __name__ == "__main__":
    unittest.main()
