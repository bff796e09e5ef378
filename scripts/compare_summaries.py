#!/usr/bin/env python3
"""Prints a Markdown table comparing `ferry local` summary JSON files."""
import json
import sys

ROWS = [
    ("mode", "{}"), ("consistency", "{}"), ("workers", "{}"), ("shards", "{}"),
    ("epochs", "{}"), ("steps", "{}"), ("wall_seconds", "{:.1f}"),
    ("samples_per_second", "{:.0f}"), ("test_accuracy", "{:.4f}"),
    ("final_loss", "{:.4f}"), ("bytes_per_step_per_worker", "{:.0f}"),
    ("compute_seconds", "{:.1f}"), ("comm_seconds", "{:.1f}"),
]


def main(paths):
    runs = []
    for path in paths:
        if path.endswith("-cluster.json"):
            continue
        with open(path) as f:
            runs.append(json.load(f))
    if not runs:
        print("no summaries given", file=sys.stderr)
        return 1
    print("| metric | " + " | ".join(r["mode"] for r in runs) + " |")
    print("|---|" + "---|" * len(runs))
    for key, fmt in ROWS:
        cells = [fmt.format(r[key]) if key in r else "-" for r in runs]
        print(f"| {key} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
