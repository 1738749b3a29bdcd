"""Classic machine learning (ai.onnx.ml) through Quilt's Python APIs and the CLI: scikit-learn
pipelines converted by skl2onnx give onnxruntime's labels exactly and its probabilities to 1e-5;
malformed ensembles and linear models are load errors that say what is wrong; classifiers with
ZipMap return onnxruntime's list of dicts; string class labels come back as strings, as
onnxruntime's.
The per-op cases against onnxruntime are tests/cases/gen_ml.py."""
import warnings

import numpy as np
import onnxruntime as ort
import pytest
from conftest import model_bytes, run_cli, vi
from onnx import TensorProto, helper

import quilt
import quilt.onnxruntime as qort

ML = "ai.onnx.ml"
warnings.filterwarnings("ignore")


def skl_model(estimator, x, y, zipmap=False):
    from sklearn.base import is_classifier
    from skl2onnx import to_onnx
    estimator.fit(x, y)
    options = {"zipmap": False} if is_classifier(estimator) and not zipmap else None
    return to_onnx(estimator, x[:1], options=options, target_opset={"": 17, ML: 3}).SerializeToString()


@pytest.fixture(scope="module")
def digits():
    from sklearn.datasets import load_digits
    d = load_digits()
    return d.data.astype(np.float32), d.target.astype(np.int64)


def test_pipelines_match_onnxruntime_through_its_api(digits):
    from sklearn import ensemble, linear_model, preprocessing, svm
    from sklearn.pipeline import make_pipeline
    x, y = digits
    for estimator in [ensemble.RandomForestClassifier(30, max_depth=8, random_state=0),
                      ensemble.GradientBoostingClassifier(n_estimators=5, max_depth=3, random_state=0),
                      make_pipeline(preprocessing.StandardScaler(), linear_model.LogisticRegression(max_iter=300)),
                      svm.SVC(probability=True, random_state=0)]:
        model = skl_model(estimator, x[:600], y[:600])
        feed = {"X": x[600:900]}
        want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feed)
        got = qort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feed)
        np.testing.assert_array_equal(got[0], want[0], err_msg=str(estimator))
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-5, err_msg=str(estimator))
        assert (got[0] == estimator.predict(x[600:900])).mean() > 0.99


def test_string_class_labels_match_onnxruntime(digits):
    """Classifiers trained on string labels: lowered at load to integer labels and a LabelEncoder
    (a host step), the labels come back as strings, exactly onnxruntime's."""
    from sklearn import ensemble, linear_model, svm
    x, y = digits
    names = np.array(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"])
    for estimator, labels in [(ensemble.RandomForestClassifier(20, max_depth=6, random_state=0), names[y]),
                              (linear_model.LogisticRegression(max_iter=300), names[y]),
                              (svm.SVC(probability=True, random_state=0), names[y]),
                              (ensemble.RandomForestClassifier(10, max_depth=4, random_state=0),
                               np.where(y < 5, "small", "large")),
                              (linear_model.LogisticRegression(max_iter=300), np.where(y < 5, "small", "large"))]:
        model = skl_model(estimator, x[:600], labels[:600])
        feed = {"X": x[600:900]}
        want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feed)
        session = qort.InferenceSession(model)
        got = session.run(None, feed)
        assert got[0].dtype == object and got[0].tolist() == want[0].tolist(), str(estimator)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-5, err_msg=str(estimator))
    plan = quilt.Session(model).plan()
    assert [n["backend"] for n in plan["nodes"] if n["op_type"] == "ai.onnx.ml.LabelEncoder"] == ["host"]


def test_cli_runs_a_converted_forest(tmp_path, digits):
    from sklearn import ensemble
    x, y = digits
    path = tmp_path / "forest.onnx"
    path.write_bytes(skl_model(ensemble.RandomForestRegressor(10, max_depth=6, random_state=0), x, y.astype(np.float32)))
    np.save(tmp_path / "x.npy", x[:50])
    r = run_cli("run", path, "--input", f"X={tmp_path / 'x.npy'}", "--output-dir", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"X": x[:50]})[0]
    np.testing.assert_allclose(np.load(tmp_path / "out" / "variable.npy"), want, rtol=1e-5, atol=1e-5)


def tree(width=2, **changes):
    """A one-tree classifier (2 classes) as serialized bytes, with attributes changed."""
    attrs = dict(nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0],
                 nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"], nodes_values=[0.5, 0, 0],
                 nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0], class_ids=[0, 1],
                 class_nodeids=[1, 2], class_treeids=[0, 0], class_weights=[1.0, 1.0], classlabels_int64s=[3, 4])
    attrs.update(changes)
    attrs = {k: v for k, v in attrs.items() if v is not None}
    node = helper.make_node("TreeEnsembleClassifier", ["x"], ["label", "scores"], domain=ML, **attrs)
    return model_bytes([node], [vi("x", TensorProto.FLOAT, [None, width])],
                       [vi("label", TensorProto.INT64, None), vi("scores", TensorProto.FLOAT, None)],
                       domains=[(ML, 3)])


MALFORMED = [
    ("child out of range", tree(nodes_truenodeids=[7, 0, 0]), "node 0 of tree 0 has true child 7, which is not in the tree"),
    ("cycle", tree(nodes_modes=["BRANCH_LEQ", "BRANCH_LEQ", "LEAF"], nodes_truenodeids=[1, 0, 0],
                   nodes_falsenodeids=[2, 2, 0]), "tree 0 has a cycle: node 1 of tree 0 leads back to node 0"),
    ("self loop", tree(nodes_falsenodeids=[0, 0, 0]), "has a cycle"),
    ("class id past the labels", tree(class_ids=[0, 2]), "'class_ids' has 2, out of range for 2 classes"),
    ("too few labels", tree(classlabels_int64s=[3]), "must list at least 2 classes"),
    ("short nodes list", tree(nodes_featureids=[0, 0]), "'nodes_featureids' has 2 entries, nodes_treeids 3"),
    ("short weights", tree(class_weights=[1.0]), "'class_weights' has 1 entries, class_ids 2"),
    ("leaf without weight", tree(class_ids=[0], class_nodeids=[1], class_treeids=[0], class_weights=[1.0]),
     "node 2 of tree 0 is a leaf without a weight"),
    ("weight for a missing node", tree(class_nodeids=[1, 9]), "a weight is for node 9 of tree 0, which is not in"),
    ("duplicate node", tree(nodes_nodeids=[0, 1, 1]), "node 1 of tree 0 appears twice"),
    ("unknown mode", tree(nodes_modes=["BRANCH_SOMETIMES", "LEAF", "LEAF"]), "nodes_modes has 'BRANCH_SOMETIMES'"),
    ("negative feature", tree(nodes_featureids=[-1, 0, 0]), "has feature id -1"),
    ("base values", tree(base_values=[0.1, 0.2, 0.3]), "'base_values' has 3 entries, expected 2 (one per class)"),
    ("values twice", tree(nodes_values_as_tensor=helper.make_tensor("v", TensorProto.DOUBLE, [3], [0.5, 0, 0])),
     "attributes 'nodes_values' and 'nodes_values_as_tensor' are both set"),
    ("post transform", tree(post_transform="SQUASH"), "'post_transform' is 'SQUASH'"),
]


@pytest.mark.parametrize("what,model,words", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_tree_ensembles_are_load_errors(what, model, words):
    with pytest.raises(quilt.InvalidModel) as got:
        quilt.Session(model)
    assert words in str(got.value) and "TreeEnsembleClassifier" in str(got.value), str(got.value)


def test_malformed_linear_models_and_svms_are_load_errors():
    x = [vi("x", TensorProto.FLOAT, [None, 2])]
    two = [vi("label", TensorProto.INT64, None), vi("scores", TensorProto.FLOAT, None)]
    cases = [
        (helper.make_node("LinearClassifier", ["x"], ["label", "scores"], domain=ML, coefficients=[1.0, 2, 3, 4, 5, 6],
                          intercepts=[0.0, 0, 0], classlabels_ints=[1, 2]),
         "'classlabels_ints' has 2 labels for 3 classes"),
        (helper.make_node("LinearRegressor", ["x"], ["y"], domain=ML, coefficients=[1.0, 2, 3], targets=2),
         "'coefficients' has 3 entries, not a multiple of targets 2"),
        (helper.make_node("SVMClassifier", ["x"], ["label", "scores"], domain=ML, coefficients=[1.0, 2, 3],
                          support_vectors=[0.0, 1, 2, 3], vectors_per_class=[1, 1], rho=[0.1],
                          classlabels_ints=[0, 1], kernel_type="RBF", kernel_params=[0.1, 0.0, 3.0]),
         "'coefficients' has 3 entries, expected (classes - 1) x vectors = 2"),
        (helper.make_node("SVMRegressor", ["x"], ["y"], domain=ML, coefficients=[1.0, 2], support_vectors=[1.0, 2, 3],
                          n_supports=2, rho=[0.1], kernel_type="CUBIC"),
         "'kernel_type' is 'CUBIC'"),
    ]
    for node, words in cases:
        outs = two if len(node.output) == 2 else [vi("y", TensorProto.FLOAT, None)]
        with pytest.raises(quilt.InvalidModel) as got:
            quilt.Session(model_bytes([node], x, outs, domains=[(ML, 1)]))
        assert words in str(got.value), str(got.value)


def test_too_few_features_is_a_run_error():
    s = quilt.Session(tree(width=None, nodes_featureids=[1, 0, 0]))
    with pytest.raises(quilt.InvalidArgument, match="the trees read feature 1 but X has 1 features"):
        s.run({"x": np.zeros((3, 1), np.float32)})
    # The session still runs; this ensemble's labels are onnxruntime's (1 and 0 here: for two
    # classes that both have weights it answers 1 or 0 whatever the class labels).
    model = tree(width=None, nodes_featureids=[1, 0, 0])
    feed = {"x": np.array([[0, 0.2], [0, 0.9]], np.float32)}
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feed)
    got = s.run(feed)
    np.testing.assert_array_equal(got["label"], want[0])
    np.testing.assert_allclose(got["scores"], want[1])


def test_classifiers_with_zipmap_match_onnxruntime(digits):
    """skl2onnx's default: output_probability is ZipMap's sequence of maps, which Quilt returns
    as onnxruntime does (a list of {label: probability} dicts of Python floats)."""
    from sklearn import ensemble, linear_model, preprocessing
    from sklearn.pipeline import make_pipeline
    x, y = digits
    for estimator in [ensemble.RandomForestClassifier(20, max_depth=8, random_state=0),
                      ensemble.GradientBoostingClassifier(n_estimators=5, max_depth=3, random_state=0),
                      make_pipeline(preprocessing.StandardScaler(), linear_model.LogisticRegression(max_iter=300))]:
        model = skl_model(estimator, x[:600], y[:600], zipmap=True)
        feed = {"X": x[600:800]}
        want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feed)
        session = qort.InferenceSession(model, providers=["CPUExecutionProvider"])
        assert session.get_outputs()[1].type == "seq(map(int64,tensor(float)))"
        got = session.run(None, feed)
        np.testing.assert_array_equal(got[0], want[0], err_msg=str(estimator))
        assert isinstance(got[1], list) and len(got[1]) == len(want[1])
        for g, w in zip(got[1], want[1]):
            assert isinstance(g, dict) and list(g) == list(w), str(estimator)
            assert all(isinstance(v, float) for v in g.values())
            np.testing.assert_allclose(list(g.values()), list(w.values()), rtol=1e-5, atol=1e-5)
    # String class labels: maps keyed by the labels.
    model = skl_model(linear_model.LogisticRegression(max_iter=100), x[:200],
                      np.array(["even", "odd"])[y[:200] % 2], zipmap=True)
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"X": x[:5]})
    got = quilt.Session(model).run({"X": x[:5]})
    assert got["output_label"].tolist() == want[0].tolist()
    assert [list(m) for m in got["output_probability"]] == [list(m) for m in want[1]]


def test_both_kinds_of_class_labels_is_a_load_error(digits):
    with pytest.raises(quilt.InvalidModel, match="has both 'classlabels_strings' and 'classlabels_int64s'"):
        quilt.Session(tree(classlabels_strings=["a", "b"]))


def test_a_categorical_pipeline_on_strings_matches_onnxruntime():
    """OneHotEncoder on string columns (skl2onnx: Gather of each column, OneHotEncoder with
    cats_strings, Concat) into a logistic regression, with a category unseen in training."""
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import StringTensorType
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder
    rng = np.random.default_rng(0)
    colors, sizes = np.array(["red", "green", "blue", "cyan"]), np.array(["S", "M", "L"])
    x = np.stack([colors[rng.integers(0, 4, 300)], sizes[rng.integers(0, 3, 300)]], 1).astype(object)
    y = ((x[:, 0] == "red") | (x[:, 1] == "L")).astype(np.int64)
    pipe = make_pipeline(OneHotEncoder(handle_unknown="ignore"), LogisticRegression()).fit(x, y)
    model = to_onnx(pipe, initial_types=[("cats", StringTensorType([None, 2]))], options={"zipmap": False},
                    target_opset={"": 17, ML: 3}).SerializeToString()
    feed = {"cats": x[:50].copy()}
    feed["cats"][3, 0] = "purple"
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feed)
    got = qort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feed)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)
    assert (got[0] == pipe.predict(feed["cats"])).all()


def one_hot(x_type=TensorProto.STRING, **attrs):
    return model_bytes([helper.make_node("OneHotEncoder", ["x"], ["y"], domain=ML, **attrs)],
                       [vi("x", x_type, [3])], [vi("y", TensorProto.FLOAT, None)], domains=[(ML, 1)])


def test_one_hot_encoder_on_strings_says_what_is_wrong():
    x = {"x": np.array(["cat", "fish", "dog"], dtype=object)}
    with pytest.raises(quilt.InvalidArgument, match="X has category 'fish', which is not in cats_strings "
                                                    r"\(and zeros is 0\)"):
        quilt.Session(one_hot(cats_strings=["cat", "dog"], zeros=0)).run(x)
    got = quilt.Session(one_hot(cats_strings=["cat", "dog"])).run(x)["y"]
    np.testing.assert_array_equal(got, [[1, 0], [0, 0], [0, 1]])
    with pytest.raises(quilt.InvalidModel, match="attribute 'cats_strings' lists 'dog' twice"):
        quilt.Session(one_hot(cats_strings=["dog", "cat", "dog"]))
    with pytest.raises(quilt.InvalidModel, match="attribute 'cats_int64s' is required for numeric X"):
        quilt.Session(one_hot(TensorProto.INT64, cats_strings=["cat"]))
    with pytest.raises(quilt.InvalidModel, match="attribute 'cats_strings' is required for string X"):
        quilt.Session(one_hot(cats_int64s=[1, 2]))


def test_gather_on_strings_names_an_index_out_of_range():
    model = model_bytes([helper.make_node("Gather", ["x", "i"], ["y"], axis=1)],
                        [vi("x", TensorProto.STRING, [2, 3]), vi("i", TensorProto.INT64, [1])],
                        [vi("y", TensorProto.STRING, None)])
    x = np.array([["a", "b", "c"], ["d", "e", "f"]], dtype=object)
    assert quilt.Session(model).run({"x": x, "i": np.array([-1])})["y"].tolist() == [["c"], ["f"]]
    with pytest.raises(quilt.InvalidArgument, match=r"index 3 is out of range \[-3, 2\] for an axis of size 3"):
        quilt.Session(model).run({"x": x, "i": np.array([3])})

