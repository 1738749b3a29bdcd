"""The zoo's "ml" family: classic machine-learning models as their users deploy them, trained at
export time on generated or scikit-learn-bundled data (fixed seeds) and converted by skl2onnx
(scikit-learn) and onnxmltools (XGBoost, LightGBM), at the converters' default opsets.

- rf_classifier / rf_classifier_nozipmap: a random forest (iris-like generated data, 4 classes),
  with skl2onnx's default ZipMap (probabilities as a list of {label: probability}) and without it.
- gb_classifier / gb_classifier_nozipmap: gradient boosting, the same two ways.
- rf_regressor, rf_regressor_multi, gb_regressor: forest regressors (one and three targets; the
  three-target one is declared [N, 1] by skl2onnx, see docs/CLASSIC_ML.md) and gradient boosting.
- logreg_pipeline, linreg_pipeline: StandardScaler + LogisticRegression / LinearRegression.
- svc: an RBF SVC with probabilities (no ZipMap).
- tfidf_text: TfidfVectorizer + LogisticRegression on generated sentences (a string input).
- xgb_classifier, lgbm_classifier: XGBoost and LightGBM classifiers through onnxmltools.

Each builder returns (model, inputs); the inputs (the rows the model is checked and benchmarked
on) come from the same seed as the training data. `check --family ml` compares labels exactly
and probabilities and scores to ML_ATOL (ZipMap's outputs as lists of dicts: the same keys, each
value to ML_ATOL).
"""
import warnings

import numpy as np

SEED = 0
ROWS = 200  # rows per checked input
ML_ATOL = 1e-5  # the tolerance for probabilities and scores

# ---------------------------------------------------------------- data and conversion ----


def _classification(classes=4, features=10, rows=1200):
    from sklearn.datasets import make_classification

    x, y = make_classification(rows, features, n_informative=6, n_classes=classes, random_state=SEED)
    return x.astype(np.float32), y.astype(np.int64)


def _regression(targets=1, features=8, rows=1200):
    from sklearn.datasets import make_regression

    x, y = make_regression(rows, features, n_targets=targets, noise=0.5, random_state=SEED)
    return x.astype(np.float32), y.astype(np.float32)


def _skl(estimator, x, y, zipmap=True):
    """Fits estimator and converts it with skl2onnx's defaults (ZipMap on for a classifier unless
    zipmap=False); the input is named X, float32 [None, features]; inputs: the first ROWS rows."""
    from skl2onnx import to_onnx

    warnings.filterwarnings("ignore")
    estimator.fit(x, y)
    options = None if zipmap else {"zipmap": False}
    model = to_onnx(estimator, x[:1], options=options)
    return model, {model.graph.input[0].name: x[:ROWS]}


# The parametrised builders return a builder; scikit-learn is imported only when one runs, so
# that importing tools/zoo.py (its onnxruntime benchmark child too) does not load it (~70 MiB).
def rf_classifier(zipmap=True):
    def build():
        from sklearn.ensemble import RandomForestClassifier

        return _skl(RandomForestClassifier(50, max_depth=8, random_state=SEED), *_classification(),
                    zipmap)
    return build


def gb_classifier(zipmap=True):
    def build():
        from sklearn.ensemble import GradientBoostingClassifier

        return _skl(GradientBoostingClassifier(n_estimators=30, max_depth=3, random_state=SEED),
                    *_classification(), zipmap)
    return build


def rf_regressor(targets=1):
    def build():
        from sklearn.ensemble import RandomForestRegressor

        return _skl(RandomForestRegressor(50, max_depth=8, random_state=SEED), *_regression(targets))
    return build


def gb_regressor():
    from sklearn.ensemble import GradientBoostingRegressor

    return _skl(GradientBoostingRegressor(n_estimators=50, max_depth=3, random_state=SEED), *_regression())


def logreg_pipeline():
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return _skl(make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)), *_classification())


def linreg_pipeline():
    from sklearn.linear_model import LinearRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return _skl(make_pipeline(StandardScaler(), LinearRegression()), *_regression())


def svc():
    from sklearn.svm import SVC

    x, y = _classification(3, rows=600)
    return _skl(SVC(probability=True, random_state=SEED), x, y, zipmap=False)


# Generated text: each class has its own words, all classes share the filler words, so the
# classifier learns from word counts; punctuation and case test the normalizer and tokenizer.
TOPICS = {
    "sport": "match goal team player score league coach season ball win",
    "cooking": "recipe oven flour sugar butter bake salt pepper sauce dinner",
    "finance": "market stock price bank loan interest profit budget tax fund",
}
FILLER = "the a of and to in is was it for on with as at by this that very".split()


def _sentences(rows, seed):
    rng = np.random.default_rng(seed)
    labels = list(TOPICS)
    text, y = [], []
    for _ in range(rows):
        label = int(rng.integers(len(labels)))
        words = TOPICS[labels[label]].split()
        chosen = [str(w) for w in rng.choice(words, int(rng.integers(2, 6)))]
        chosen += [str(w) for w in rng.choice(FILLER, int(rng.integers(2, 8)))]
        chosen += [str(w) for w in rng.choice(TOPICS[labels[(label + 1) % 3]].split(), 1)]
        rng.shuffle(chosen)
        sentence = " ".join(w.capitalize() if rng.random() < 0.2 else w for w in chosen)
        text.append(sentence + (", " + str(rng.choice(FILLER)) if rng.random() < 0.3 else "") + ".")
        y.append(label)
    return np.array(text, dtype=object).reshape(-1, 1), np.array(y, dtype=np.int64)


def tfidf_text():
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import StringTensorType
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    warnings.filterwarnings("ignore")
    x, y = _sentences(600, SEED)
    pipeline = make_pipeline(TfidfVectorizer(), LogisticRegression(max_iter=1000))
    pipeline.fit(x.ravel(), y)
    # StringNormalizer's locale: onnxruntime constructs skl2onnx's default, en_US.UTF-8, and fails
    # where that locale is not installed; C.UTF-8 is always there (the lowercasing is ASCII's).
    model = to_onnx(pipeline, initial_types=[("text", StringTensorType([None, 1]))],
                    options={LogisticRegression: {"zipmap": False}, TfidfVectorizer: {"locale": "C.UTF-8"}})
    return model, {"text": x[:ROWS].astype(str)}


def _onnxmltools(estimator, x, y):
    from onnxmltools.convert.common.data_types import FloatTensorType

    warnings.filterwarnings("ignore")
    estimator.fit(x, y)
    initial = [("X", FloatTensorType([None, x.shape[1]]))]
    return estimator, initial, {"X": x[:ROWS]}


def xgb_classifier():
    from onnxmltools import convert_xgboost
    from xgboost import XGBClassifier

    estimator, initial, inputs = _onnxmltools(
        XGBClassifier(n_estimators=40, max_depth=5, learning_rate=0.2, random_state=SEED, n_jobs=2),
        *_classification())
    return convert_xgboost(estimator, initial_types=initial), inputs


def lgbm_classifier():
    from lightgbm import LGBMClassifier
    from onnxmltools import convert_lightgbm

    estimator, initial, inputs = _onnxmltools(
        LGBMClassifier(n_estimators=40, num_leaves=15, random_state=SEED, n_jobs=2, verbose=-1),
        *_classification())
    return convert_lightgbm(estimator, initial_types=initial, zipmap=False), inputs


# name -> builder; every input is "given" (written by export).
ML_MODELS = {
    "rf_classifier": rf_classifier(),
    "rf_classifier_nozipmap": rf_classifier(zipmap=False),
    "gb_classifier": gb_classifier(),
    "gb_classifier_nozipmap": gb_classifier(zipmap=False),
    "rf_regressor": rf_regressor(),
    "rf_regressor_multi": rf_regressor(targets=3),
    "gb_regressor": gb_regressor,
    "logreg_pipeline": logreg_pipeline,
    "linreg_pipeline": linreg_pipeline,
    "svc": svc,
    "tfidf_text": tfidf_text,
    "xgb_classifier": xgb_classifier,
    "lgbm_classifier": lgbm_classifier,
}


# name -> the zoo's input specs (name, shape, "given"): X [ROWS, features] float32, or the text.
ML_INPUTS = {name: [("X", (ROWS, 8), "given")] if "regressor" in name or name == "linreg_pipeline"
             else [("text", (ROWS, 1), "given")] if name == "tfidf_text"
             else [("X", (ROWS, 10), "given")] for name in ML_MODELS}


def export_ml(names, out, log):
    """Writes each model, onnx.checker on it, and its inputs (.npy; strings as numpy str_)."""
    import time

    import onnx

    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        t0 = time.perf_counter()
        model, inputs = ML_MODELS[name]()
        path = out / f"{name}.onnx"
        onnx.save(model, path)
        onnx.checker.check_model(str(path))
        inputs_dir = out / f"{name}.inputs"
        inputs_dir.mkdir(exist_ok=True)
        for input_name, value in inputs.items():
            np.save(inputs_dir / f"{input_name}.npy", value)
        opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in model.opset_import)
        ops = sorted({n.op_type for n in model.graph.node})
        log(f"{path.name:<28} {path.stat().st_size / 2**10:8.1f} KiB  {time.perf_counter() - t0:5.1f} s  "
            f"opsets {opsets}  ops {', '.join(ops)}")
    return 0


# ------------------------------------------------------------------------------- check ----
def _as_rows(maps):
    """ZipMap's output (a list of dicts, keys int or str; from Quilt's JSON keys are str) as
    (keys as str, [N, C] float64 array)."""
    if not maps:
        return [], np.zeros((0, 0))
    keys = sorted(str(k) for k in maps[0])
    rows = [[float(row[k]) for k in sorted(row, key=str)] for row in maps]
    if any(sorted(str(k) for k in row) != keys for row in maps):
        return None, None
    return keys, np.array(rows, dtype=np.float64)


def compare_ml(actual, reference, atol=ML_ATOL):
    """One output of an ml model against onnxruntime's: (ok, max abs diff, why). Labels (integer
    or string tensors) must be equal; float tensors within atol * max(1, max|reference|) (atol
    itself for probabilities; relative to the scale for a regressor's values, where float32's
    own rounding is larger than 1e-5: its ulp at 400 is 3e-5); ZipMap's lists of dicts must have
    the same rows and keys, each value within atol."""
    if isinstance(reference, list):
        if not isinstance(actual, list) or len(actual) != len(reference):
            return False, float("nan"), f"expected a list of {len(reference)} maps"
        keys_a, a = _as_rows(actual)
        keys_r, r = _as_rows(reference)
        if keys_a is None or keys_a != keys_r:
            return False, float("nan"), f"map keys {keys_a} != {keys_r}"
    else:
        a, r = np.asarray(actual), np.asarray(reference)
        if a.shape != r.shape:
            return False, float("nan"), f"shape {list(a.shape)} != {list(r.shape)}"
        if r.dtype.kind in "OUS" or a.dtype.kind in "OUS":
            same = a.astype(str).tolist() == r.astype(str).tolist()
            return same, 0.0 if same else float("nan"), "" if same else "labels differ"
        if not np.issubdtype(r.dtype, np.floating):
            same = a.dtype == r.dtype and np.array_equal(a, r)
            return same, 0.0 if same else float("nan"), "" if same else f"labels differ ({a.dtype}, {r.dtype})"
        if a.dtype != r.dtype:
            return False, float("nan"), f"dtype {a.dtype} != {r.dtype}"
        a, r = a.astype(np.float64), r.astype(np.float64)
    if a.size == 0:
        return True, 0.0, ""
    diff = float(np.abs(a - r).max())
    bound = atol * max(1.0, float(np.abs(r).max()))
    ok = bool(diff <= bound)
    return ok, diff, "" if ok else f"max diff {diff:.3g} > {bound:.3g}"


def ml_bench_text():
    """(models_text, reproduce, title, rewrites) of the ml family's benchmark page."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent / "requirements.txt").read_text()
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", text, re.M))
    versions = ", ".join(f"{p} {pins.get(p, '?')}" for p in
                         ("scikit-learn", "skl2onnx", "onnxmltools", "xgboost-cpu", "lightgbm"))
    return (f"the ml family (tools/zoo_ml.py), trained at export time on generated data and converted "
            f"with {versions} (tools/requirements.txt), with their inputs `<model>.inputs/*.npy` "
            f"({ROWS} rows each)",
            "tools/zoo.py export --family ml   # the models and their inputs into $QUILT_ZOO_DIR",
            "Benchmarks of the classic-ML models: Quilt and onnxruntime side by side",
            "this file")
