#!/usr/bin/python3
"""A DLRM export of ferry reads in PyTorch (Debian's python3-torch, numpy).

ferry trains a small DLRM on generated Criteo data (`ferry data ctr`) and
exports it (ps/dlrm_export.h); scripts/ferry_dlrm_torch.py scores the
test rows in PyTorch from model.json, model.safetensors and embeddings.ckpt
(ids without a row recomputed as ferry's initial values) to ferry's test
AUC and log loss within 1e-5; ferry itself evaluates the export
(--init-from --evaluate-only) to exactly its trained AUC and log loss. Run
three times: admission 1 (unseen ids read initial values), admission 2
(they read zeros until admitted) and FTRL with l1 > 0 (rows start at zero).
Usage: torch_dlrm_interop_test.py BIN_DIR SOURCE_DIR. Exit 77 (skipped)
without torch or numpy.
"""
import json
import os
import subprocess
import sys
import tempfile

TOLERANCE = 1e-5
SPEC = {"format": "ferry.model.v1", "kind": "dlrm", "embedding_dim": 8,
        "bottom": [32], "top": [32]}


def run(argv):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(argv)} exited {p.returncode}\n"
                 f"{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p.stdout


def main():
    bin_dir, src = sys.argv[1], sys.argv[2]
    try:
        import numpy  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        print("SKIP: python3-torch or python3-numpy is not installed "
              "(scripts/setup --with-peers)")
        return 77
    worker = os.path.join(bin_dir, "ferry-worker")
    reader = os.path.join(src, "scripts", "ferry_dlrm_torch.py")
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data")
        run([os.path.join(bin_dir, "ferry"), "data", "ctr", "--out", data,
             "--rows", "6000", "--test-rows", "3000", "--seed", "7", "--quiet"])
        spec = os.path.join(tmp, "small.json")
        with open(spec, "w") as f:
            json.dump(SPEC, f)
        cases = {"admit1": ["--embedding-admit-count", "1"],
                 "admit2": ["--embedding-admit-count", "2"],
                 "ftrl-l1": ["--embedding-optimizer", "ftrl",
                             "--embedding-ftrl-l1", "0.01"]}
        for admit, table_flags in cases.items():
            out = os.path.join(tmp, f"export-{admit}")
            flags = ["--dataset", "criteo:" + data, "--batch", "128",
                     "--threads", "1"] + table_flags
            trained_json = os.path.join(tmp, f"trained-{admit}.json")
            run([worker, "--standalone", "--model", spec, "--epochs", "1",
                 "--optimizer", "adam", "--lr", "0.003", "--export", out,
                 "--summary-json", trained_json] + flags)
            with open(trained_json) as f:
                trained = json.load(f)
            evaluated_json = os.path.join(tmp, f"evaluated-{admit}.json")
            run([worker, "--standalone", "--init-from", out, "--evaluate-only",
                 "--summary-json", evaluated_json] + flags)
            with open(evaluated_json) as f:
                evaluated = json.load(f)
            torch_eval = json.loads(run(["/usr/bin/python3", reader, "eval",
                                         out, "--data", data]))
            print(f"{admit}: ferry auc {trained['test_auc']:.6f} "
                  f"logloss {trained['test_logloss']:.6f}; export evaluated "
                  f"by ferry {evaluated['test_auc']:.6f}, by PyTorch "
                  f"{torch_eval['test_auc']:.6f} / "
                  f"{torch_eval['test_logloss']:.6f}; "
                  f"{torch_eval['rows']} rows")
            for key in ("test_auc", "test_logloss"):
                if evaluated[key] != trained[key]:
                    failures.append(f"{admit}: ferry's evaluation of the "
                                    f"export: {key} {evaluated[key]} != "
                                    f"{trained[key]}")
                if abs(torch_eval[key] - trained[key]) > TOLERANCE:
                    failures.append(f"{admit}: PyTorch's {key} "
                                    f"{torch_eval[key]} vs ferry's "
                                    f"{trained[key]}")
            if torch_eval["rows"] != trained["embedding_rows"]:
                failures.append(f"{admit}: {torch_eval['rows']} rows "
                                f"read, ferry has {trained['embedding_rows']}")
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
