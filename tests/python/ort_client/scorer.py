"""A small scoring library written the way onnxruntime clients are: it imports onnxruntime at
the top, builds SessionOptions, picks providers from get_available_providers(), sizes its input
from get_inputs()[0].shape and turns onnxruntime's exceptions into its own. It knows nothing of
Quilt: tests/python/test_switch.py runs it unchanged on onnxruntime and on Quilt."""
import numpy as np
import onnxruntime as ort
from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidArgument, InvalidProtobuf, NoSuchFile


class ScorerError(Exception):
    pass


class Scorer:
    def __init__(self, model_path, threads=1, prefer_gpu=True):
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.enable_mem_pattern = False
        options.log_severity_level = 3
        providers = ["CPUExecutionProvider"]
        if prefer_gpu and "CUDAExecutionProvider" in ort.get_available_providers():
            providers.insert(0, "CUDAExecutionProvider")
        try:
            self.session = ort.InferenceSession(model_path, sess_options=options, providers=providers)
        except (NoSuchFile, InvalidProtobuf, Fail) as e:
            raise ScorerError(f"cannot load {model_path}: {type(e).__name__}") from e
        first = self.session.get_inputs()[0]
        self.input_name = first.name
        self.features = first.shape[1]
        self.outputs = [o.name for o in self.session.get_outputs()]
        self.producer = self.session.get_modelmeta().producer_name

    def score(self, rows):
        """Probabilities for each row of features (short rows are zero-padded)."""
        batch = np.zeros((len(rows), self.features), dtype=np.float32)
        for i, row in enumerate(rows):
            batch[i, : len(row)] = row[: self.features]
        try:
            return self.session.run([self.outputs[0]], {self.input_name: batch})[0]
        except InvalidArgument as e:
            raise ScorerError(f"bad batch: {type(e).__name__}") from e

    def score_raw(self, array):
        try:
            return self.session.run(None, {self.input_name: array})[0]
        except InvalidArgument as e:
            raise ScorerError(f"bad batch: {type(e).__name__}") from e
