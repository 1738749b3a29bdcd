"""Tree ensembles converted by skl2onnx, Quilt against onnxruntime in one process.

usage: .venv/bin/python tools/bench_ml.py [--trees 500] [--depth 8] [--threads 2] [--runs 200]

Trains a RandomForestClassifier (3 classes) and a RandomForestRegressor with --trees trees of
depth --depth on 4,000 generated rows of 20 features, converts them with skl2onnx (classifier
without ZipMap), and times quilt.Session and onnxruntime.InferenceSession on 1 and 1,000 rows:
median of --runs runs (a tenth of them for 1,000 rows) after one warm-up run, the two runtimes
alternating per model and row count. Prints the medians, Quilt/onnxruntime, and the largest
difference between their outputs. The machine may be shared: read the ratios, not the times.
docs/CLASSIC_ML.md has a run.
"""
import argparse
import time
import warnings

import numpy as np


def median_ms(run, n):
    run()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    return float(np.median(times)) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trees", type=int, default=500)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    import onnxruntime as ort
    from skl2onnx import to_onnx
    from sklearn.datasets import make_classification, make_regression
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    import quilt

    opsets = {"": 17, "ai.onnx.ml": 3}
    xc, yc = make_classification(4000, 20, n_informative=10, n_classes=3, random_state=0)
    xr, yr = make_regression(4000, 20, random_state=0)
    xc, xr = xc.astype(np.float32), xr.astype(np.float32)
    forest = dict(n_estimators=args.trees, max_depth=args.depth, random_state=0, n_jobs=args.threads)
    models = {
        "RandomForestClassifier": (to_onnx(RandomForestClassifier(**forest).fit(xc, yc), xc[:1],
                                           options={"zipmap": False}, target_opset=opsets), xc),
        "RandomForestRegressor": (to_onnx(RandomForestRegressor(**forest).fit(xr, yr), xr[:1],
                                          target_opset=opsets), xr),
    }
    print(f"{args.trees} trees of depth {args.depth}, {args.threads} threads; onnxruntime {ort.__version__}")
    print(f"{'model':<24} {'rows':>5} {'onnxruntime ms':>15} {'quilt ms':>10} {'ratio':>6} {'max diff':>9}")
    for name, (model, x) in models.items():
        data = model.SerializeToString()
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        o = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
        q = quilt.Session(data, threads=args.threads)
        for rows in (1, 1000):
            feed = {"X": x[:rows]}
            want, got = o.run(None, feed), list(q.run(feed).values())
            diff = max(float(np.abs(np.asarray(g, np.float64) - w).max()) for g, w in zip(got, want))
            runs = args.runs if rows == 1 else max(3, args.runs // 10)
            t_ort = median_ms(lambda: o.run(None, feed), runs)
            t_quilt = median_ms(lambda: q.run(feed), runs)
            print(f"{name:<24} {rows:>5} {t_ort:>15.3f} {t_quilt:>10.3f} {t_quilt / t_ort:>6.2f} {diff:>9.2g}")


if __name__ == "__main__":
    main()
