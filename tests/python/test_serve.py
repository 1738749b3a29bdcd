"""quilt.serve without a Ray cluster: the request formats (JSON, .npy, .npz) and their errors
(4xx with a message that says what is wrong), a model that does not load (a replica error naming
it), and batching along the batch dim against unbatched runs (ModelServer.run, the code a
@serve.batch batch runs). The replica class is driven directly with starlette requests; the Ray
Serve deployment itself, on two nodes, is tests/python/test_serve_cluster.py."""
from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import mlp_bytes, model_bytes, vi
from onnx import TensorProto, helper, numpy_helper
from starlette.requests import Request

import quilt
import quilt.serve
from quilt._serving import (JSON_TYPE, NPY_TYPE, NPZ_TYPE, ModelLoadError, ModelServer, RequestError,
                            decode_response, encode_request)

SOURCE = Path(os.environ.get("QUILT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
DIGITS = str(SOURCE / "tools" / "models" / "digits_cnn.onnx")  # image [batch, 1, 8, 8] -> probabilities
X = np.random.default_rng(3).standard_normal((1, 1, 8, 8)).astype(np.float32)


@pytest.fixture(scope="module")
def digits():
    return ModelServer(DIGITS, session_options={"threads": 1})


@pytest.fixture(scope="module")
def direct():
    return quilt.Session(DIGITS, threads=1)


def http(body: bytes, content_type: str | None = JSON_TYPE, method: str = "POST", accept: str | None = None,
         query: bytes = b"") -> Request:
    headers = [(b"content-type", content_type.encode())] if content_type else []
    if accept:
        headers.append((b"accept", accept.encode()))

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}
    return Request({"type": "http", "method": method, "path": "/", "headers": headers, "query_string": query},
                   receive)


@pytest.fixture(scope="module")
def replica():
    """The deployment's class itself (no Ray: batching off, as @serve.batch needs a replica)."""
    return quilt.serve.QuiltModel.func_or_class(DIGITS, "quilt", {"threads": 1}, False, 8, 0.005, True)


def call(replica, request):
    response = asyncio.run(replica(request))
    return response.status_code, response.headers, response.body


# -- formats -------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["json", "npy", "npz"])
def test_each_format_answers_what_a_direct_run_does(replica, direct, fmt):
    body, ctype = encode_request({"image": X}, fmt)
    status, headers, content = call(replica, http(body, ctype))
    assert status == 200, content
    assert headers["content-type"].startswith(ctype)
    assert headers["x-quilt-engine"] == "quilt" and headers["x-quilt-backend"] == "cpu"
    (got,) = decode_response(content, headers["content-type"]).values()
    np.testing.assert_array_equal(got, direct.run({"image": X})["probabilities"])


def test_accept_picks_the_response_format_and_json_names_outputs(replica, direct):
    body, ctype = encode_request({"image": X}, "npy")
    status, headers, content = call(replica, http(body, ctype, accept=JSON_TYPE))
    assert status == 200 and headers["content-type"] == JSON_TYPE
    doc = json.loads(content)["outputs"]["probabilities"]
    assert doc["dtype"] == "float32" and doc["shape"] == [1, 10]
    np.testing.assert_array_equal(np.array(doc["data"], np.float32), direct.run({"image": X})["probabilities"])
    status, headers, content = call(replica, http(*encode_request({"image": X}, "json"), accept=NPZ_TYPE))
    assert status == 200 and headers["content-type"] == NPZ_TYPE
    assert list(decode_response(content, NPZ_TYPE)) == ["probabilities"]


def test_get_describes_the_model(replica):
    status, _, content = call(replica, http(b"", None, method="GET"))
    info = json.loads(content)
    assert status == 200
    assert info["inputs"] == [{"name": "image", "dtype": "float32", "shape": ["batch", 1, 8, 8]}]
    assert info["outputs"] == [{"name": "probabilities", "dtype": "float32", "shape": ["batch", 10]}]
    assert info["engine"] == "quilt" and info["backend"] == "cpu"


def test_outputs_can_be_chosen_in_json_and_in_the_query(tmp_path):
    path = tmp_path / "mlp.onnx"
    path.write_bytes(mlp_bytes())
    server = ModelServer(str(path))
    x = np.ones((3, 8), np.float32)
    request = server.parse(json.dumps({"inputs": {"x": x.tolist()}, "outputs": ["z"]}).encode(), JSON_TYPE)
    (outcome,) = server.run([request])
    assert list(outcome.outputs) == ["z"] and outcome.outputs["z"].shape == (3,)
    request = server.parse(*encode_request({"x": x}, "npy"), {"outputs": "y,z"})
    (outcome,) = server.run([request])
    content, media_type = server.encode(outcome, request)
    assert media_type == NPZ_TYPE  # a .npy request with two outputs is answered with an .npz
    assert sorted(decode_response(content, media_type)) == ["y", "z"]
    with pytest.raises(RequestError) as e:
        server.encode(outcome, request, accept=NPY_TYPE)
    assert e.value.status == 406 and "holds one array, but 2 outputs" in e.value.message


# -- request errors: 4xx, and what they say ------------------------------------------------------

def npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def npy(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


BAD_REQUESTS = [
    ("invalid JSON", b'{"inputs": {"image": [1, 2', JSON_TYPE, 400, ["body: invalid JSON"]),
    ("JSON without inputs", b'{"image": [1]}', JSON_TYPE, 400, ['expected {"inputs": {"NAME": [...]']),
    ("JSON with an unknown key", b'{"inputs": {}, "input": 1}', JSON_TYPE, 400, ["unknown key 'input'"]),
    ("unknown input name", json.dumps({"inputs": {"img": X.tolist()}}).encode(), JSON_TYPE, 400,
     ["unknown input 'img'", "the model's inputs: image float32 [batch, 1, 8, 8]"]),
    ("missing input", b'{"inputs": {}}', JSON_TYPE, 400, ["missing input 'image'"]),
    ("ragged JSON", b'{"inputs": {"image": [[1, 2], [3]]}}', JSON_TYPE, 400, ["input 'image'", "rectangular"]),
    ("strings for floats", b'{"inputs": {"image": ["a"]}}', JSON_TYPE, 400, ["expected numbers for float32"]),
    ("wrong dtype (.npy)", npy(X.astype(np.float64)), NPY_TYPE, 400,
     ["input 'image' has dtype float64, expected float32"]),
    ("wrong dtype (.npz)", npz(image=X.astype(np.int32)), NPZ_TYPE, 400,
     ["input 'image' has dtype int32, expected float32"]),
    ("wrong name (.npz)", npz(picture=X), NPZ_TYPE, 400, ["unknown input 'picture'"]),
    ("wrong rank", npy(X[0]), NPY_TYPE, 400, ["input 'image' has shape [1, 8, 8]", "rank 3, expected 4"]),
    ("wrong dim", npy(np.zeros((1, 1, 8, 9), np.float32)), NPY_TYPE, 400,
     ["input 'image' has shape [1, 1, 8, 9]", "dim 3 is 9, expected 8"]),
    ("truncated .npy", npy(X)[:70], NPY_TYPE, 400, ["body: not a"]),
    ("pickled .npy", npy(np.array([{"a": 1}], dtype=object)), NPY_TYPE, 400, ["without pickle"]),
    ("not an .npz", b"PK\x03\x04garbage", NPZ_TYPE, 400, ["not a valid .npz archive"]),
    ("empty body", b"", JSON_TYPE, 415, ["neither JSON", "(it is empty)"]),
    ("text body", b"hello", "text/plain", 415, ["neither JSON"]),
    ("type and body disagree", npy(X), JSON_TYPE, 415, ["Content-Type is application/json but the body is npy"]),
    ("unknown output", json.dumps({"inputs": {"image": X.tolist()}, "outputs": ["p"]}).encode(), JSON_TYPE, 400,
     ["unknown output 'p'", "the model's outputs: probabilities"]),
]


@pytest.mark.parametrize("what,body,ctype,status,words", BAD_REQUESTS, ids=[b[0] for b in BAD_REQUESTS])
def test_bad_requests_are_4xx_saying_what_is_wrong(replica, what, body, ctype, status, words):
    got, headers, content = call(replica, http(body, ctype))
    assert got == status, content
    assert headers["content-type"] == JSON_TYPE
    error = json.loads(content)
    assert error["status"] == status and error["model"] == DIGITS
    for w in words:
        assert w in error["error"], error["error"]
    # The replica still answers.
    assert call(replica, http(*encode_request({"image": X}, "npy")))[0] == 200


def test_methods_other_than_get_and_post_are_refused(replica):
    status, _, content = call(replica, http(b"", None, method="PUT"))
    assert status == 405 and "POST a request, or GET the model's description" in json.loads(content)["error"]


def test_a_runtime_error_caused_by_the_data_is_a_400_for_that_request_only(tmp_path):
    # Gather with an index from the request: one out of range fails alone, not its batch.
    data = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "data")
    model = model_bytes([helper.make_node("Gather", ["data", "i"], ["y"], axis=0)],
                        [vi("i", TensorProto.INT64, ["batch"])], [vi("y", TensorProto.FLOAT, ["batch", 3])], [data])
    path = tmp_path / "gather.onnx"
    path.write_bytes(model)
    server = ModelServer(str(path))
    requests = [server.parse(*encode_request({"i": np.array([k], np.int64)}, "npy")) for k in (0, 9, 3)]
    good0, bad, good3 = server.run(requests)
    np.testing.assert_array_equal(good0.outputs["y"], [[0, 1, 2]])
    np.testing.assert_array_equal(good3.outputs["y"], [[9, 10, 11]])
    assert isinstance(bad.error, RequestError) and bad.error.status == 400
    assert "out of range" in bad.error.message or "index" in bad.error.message, bad.error.message
    server.check_health()  # a bad request does not make the replica unhealthy


# -- a model that does not load ------------------------------------------------------------------

def test_a_model_that_does_not_load_is_a_replica_error_naming_it(tmp_path):
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"\x08\x07" + bytes(range(256)) * 4)
    with pytest.raises(ModelLoadError) as e:
        quilt.serve.QuiltModel.func_or_class(str(broken), "quilt", {"threads": 1}, True, 8, 0.005, True)
    message = str(e.value)
    assert message.startswith(f"quilt.serve: cannot load model '{broken}' with quilt: "), message
    assert "InvalidModel" in message or "Io" in message, message
    with pytest.raises(ModelLoadError, match=f"cannot load model '{tmp_path / 'missing.onnx'}' with quilt: "
                                             "FileNotFoundError: no such file"):
        quilt.serve.QuiltModel.func_or_class(str(tmp_path / "missing.onnx"), "quilt", {}, True, 8, 0.005, True)


def test_a_model_that_loads_but_cannot_run_fails_at_load_with_the_warm_up(tmp_path):
    # Reshape x [4] to the shape given as an input: the generated inputs ask for 0 or 1 elements.
    model = model_bytes([helper.make_node("Reshape", ["x", "shape"], ["y"], allowzero=1)],
                        [vi("x", TensorProto.FLOAT, [4]), vi("shape", TensorProto.INT64, [1])],
                        [vi("y", TensorProto.FLOAT, None)])
    path = tmp_path / "unrunnable.onnx"
    path.write_bytes(model)
    with pytest.raises(ModelLoadError, match="the warm-up run on generated inputs failed"):
        quilt.serve.QuiltModel.func_or_class(str(path), "quilt", {}, True, 8, 0.005, True)


def test_app_refuses_unknown_options_and_engines():
    with pytest.raises(TypeError, match="unknown option threds"):
        quilt.serve.app(DIGITS, threds=2)
    with pytest.raises(ValueError, match="unknown engine 'tensorrt'"):
        quilt.serve.app(DIGITS, engine="tensorrt")
    with pytest.raises(ValueError, match="replicas, max_batch_size and max_constructor_retries must be at least 1"):
        quilt.serve.app(DIGITS, replicas=0)


def test_the_command_refuses_bad_usage_before_starting_ray(tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "quilt.serve", *args], capture_output=True, text=True,
                              timeout=120)
    r = run(str(tmp_path / "nope.onnx"))
    assert r.returncode == 2 and "model '" in r.stderr and "no such file" in r.stderr, r.stderr
    r = run(DIGITS, "--backend-option", "example")
    assert r.returncode == 2 and "expected BACKEND:KEY=VALUE, got 'example'" in r.stderr, r.stderr
    r = run(DIGITS, "--fixed-dim", "batch=x")
    assert r.returncode == 2 and "--fixed-dim batch: 'x' is not an integer" in r.stderr, r.stderr
    r = run("--help")
    assert r.returncode == 0 and "--replicas" in r.stdout and "--address" in r.stdout


# -- batching along the batch dim ----------------------------------------------------------------

def test_batched_runs_answer_what_unbatched_runs_do(digits, direct):
    assert digits.info()["batching"] and digits.info()["batch_dim"] == "batch"
    rng = np.random.default_rng(11)
    # Requests of 1, 2 and 3 rows, in all three formats.
    sizes = [1, 2, 1, 3, 1, 1]
    arrays = [rng.standard_normal((n, 1, 8, 8)).astype(np.float32) for n in sizes]
    requests = [digits.parse(*encode_request({"image": a}, ["json", "npy", "npz"][k % 3]))
                for k, a in enumerate(arrays)]
    assert [r.rows for r in requests] == sizes
    outcomes = digits.run(requests)
    assert {o.batch_rows for o in outcomes} == {sum(sizes)}  # one run for all of them
    for a, o in zip(arrays, outcomes):
        alone = direct.run({"image": a})["probabilities"]
        np.testing.assert_allclose(o.outputs["probabilities"], alone, rtol=1e-6, atol=1e-7)
        # and as a batch of one through the server
        (single,) = digits.run([digits.parse(*encode_request({"image": a}, "npy"))])
        assert single.batch_rows == len(a)


def test_requests_that_cannot_share_a_run_run_apart(tmp_path):
    path = tmp_path / "mlp.onnx"
    path.write_bytes(mlp_bytes())
    server = ModelServer(str(path))
    x = np.random.default_rng(5).standard_normal((4, 8)).astype(np.float32)
    all_outputs = server.parse(*encode_request({"x": x[:1]}, "npy"))
    only_z = server.parse(json.dumps({"inputs": {"x": x[1:3].tolist()}, "outputs": ["z"]}).encode(), JSON_TYPE)
    also_all = server.parse(*encode_request({"x": x[3:]}, "npz"))
    a, z, b = server.run([all_outputs, only_z, also_all])
    assert a.batch_rows == b.batch_rows == 2 and z.batch_rows == 2  # {a, b} together, z alone
    session = quilt.Session(str(path))
    for o, rows in ((a, x[:1]), (z, x[1:3]), (b, x[3:])):
        want = session.run({"x": rows})
        for name, value in o.outputs.items():
            np.testing.assert_allclose(value, want[name], rtol=1e-6, atol=1e-7)
    assert list(z.outputs) == ["z"]


def test_a_fixed_batch_of_one_is_batched_when_it_runs_like_one(tmp_path):
    path = tmp_path / "mlp1.onnx"
    path.write_bytes(mlp_bytes(batch=1))
    server = ModelServer(str(path))
    info = server.info()
    assert info["batching"] and info["batch_dim"] == 1, info
    x = np.random.default_rng(6).standard_normal((5, 1, 8)).astype(np.float32)
    outcomes = server.run([server.parse(*encode_request({"x": row}, "npy")) for row in x])
    assert {o.batch_rows for o in outcomes} == {5}
    session = quilt.Session(str(path))
    for row, o in zip(x, outcomes):
        np.testing.assert_allclose(o.outputs["y"], session.run({"x": row})["y"], rtol=1e-6, atol=1e-7)
    # Each request still sends one item.
    with pytest.raises(RequestError, match=r"dim 0 is 2, expected 1 \(the model's fixed batch; send one item"):
        server.parse(*encode_request({"x": x[:2, 0]}, "npy"))


def test_a_fixed_batch_of_one_that_mixes_items_is_not_batched(tmp_path):
    # y = x - its sum over dim 0: a batch of 2 would mix its items.
    axes = numpy_helper.from_array(np.array([0], np.int64), "axes")
    model = model_bytes([helper.make_node("ReduceSum", ["x", "axes"], ["m"], keepdims=1),
                         helper.make_node("Sub", ["x", "m"], ["y"])],
                        [vi("x", TensorProto.FLOAT, [1, 4])], [vi("y", TensorProto.FLOAT, [1, 4])], [axes])
    path = tmp_path / "mixing.onnx"
    path.write_bytes(model)
    server = ModelServer(str(path))
    info = server.info()
    assert not info["batching"]
    assert "does not batch when its batch dim is made symbolic" in info["batching_refused"], info
    requests = [server.parse(*encode_request({"x": np.full((1, 4), k, np.float32)}, "npy")) for k in range(3)]
    assert all(o.batch_rows == 1 and np.all(o.outputs["y"] == 0) for o in server.run(requests))


def test_a_symbolic_batch_that_fixed_dims_pins_is_not_batched():
    server = ModelServer(DIGITS, session_options={"fixed_dims": {"batch": 1}})
    assert not server.info()["batching"]
    assert server.info()["batching_refused"] == "fixed_dims sets the batch dim 'batch' to 1"
    assert server.run([server.parse(*encode_request({"image": X}, "npy"))])[0].batch_rows == 1


def test_build_app_for_ray_serves_own_cli_converts_its_string_arguments():
    # `serve run quilt.serve:build_app model=... replicas=2 ...` passes every value as a string.
    application = quilt.serve.build_app({"model": DIGITS, "replicas": "2", "threads": "1", "batching": "false",
                                         "batch_wait_ms": "2.5", "backends": "cpu", "name": "digits"})
    from ray import serve
    assert isinstance(application, serve.Application)
    deployment = application._bound_deployment  # Ray's, read only to check the conversion
    assert deployment.name == "digits" and deployment.num_replicas == 2
    assert deployment.init_args == (DIGITS, "quilt", {"threads": 1, "backends": ["cpu"]}, False, 8, 0.0025, True)
    with pytest.raises(ValueError, match="build_app needs model=PATH"):
        quilt.serve.build_app({"replicas": "2"})
    with pytest.raises(ValueError, match="invalid literal for int"):
        quilt.serve.build_app({"model": DIGITS, "replicas": "two"})
