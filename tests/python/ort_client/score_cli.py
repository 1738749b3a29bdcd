"""Scores rows with a model and prints a JSON report (which onnxruntime module served it, the
scores, and how the library's errors came out). usage: score_cli.py MODEL [SPAWN]"""
import json
import subprocess
import sys

import numpy as np
import onnxruntime

from scorer import Scorer, ScorerError


def main():
    model = sys.argv[1]
    scorer = Scorer(model)
    report = {
        "module": onnxruntime.__file__,
        "version": onnxruntime.__version__,
        "providers": scorer.session.get_providers(),
        "features": scorer.features,
        "producer": scorer.producer,
        "scores": scorer.score([[0.5] * 8, [1, 2, 3], list(range(10))]).tolist(),
    }
    errors = []
    try:
        Scorer(model + ".missing")
    except ScorerError as e:
        errors.append(str(e).replace(model, "MODEL"))
    try:
        scorer.score_raw(np.zeros((2, 3), np.float32))
    except ScorerError as e:
        errors.append(str(e))
    report["errors"] = errors
    if len(sys.argv) > 2:  # a child Python process imports onnxruntime too
        child = subprocess.run([sys.executable, "-c", "import onnxruntime; print(onnxruntime.__file__)"],
                               capture_output=True, text=True, check=True)
        report["child_module"] = child.stdout.strip()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
