#!/usr/bin/env python3
"""Summarises bench/rss_sample.sh output: per process name, the resident
memory after warm-up (the first sample past --skip seconds), at the end, and
the largest, in MiB. Usage: bench/rss_summary.py RSS.csv [--skip 60]"""
import argparse
import csv
import collections

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("csv")
parser.add_argument("--skip", type=float, default=60,
                    help="seconds of warm-up before the reference sample")
args = parser.parse_args()
series = collections.defaultdict(list)  # (name, pid) -> [(t, kib)]
with open(args.csv) as f:
    for row in csv.DictReader(f):
        series[(row["name"], row["pid"])].append(
            (float(row["seconds"]), int(row["rss_kib"])))
print(f"{'process':<16} {'pid':>7} {'samples':>7} {'after warm-up':>14} "
      f"{'end':>9} {'max':>9} {'growth':>9}  (MiB)")
for (name, pid), points in sorted(series.items()):
    warm = [p for p in points if p[0] >= args.skip] or points
    ref, end = warm[0][1] / 1024, warm[-1][1] / 1024
    top = max(kib for _, kib in warm) / 1024
    print(f"{name:<16} {pid:>7} {len(points):>7} {ref:>14.1f} {end:>9.1f} "
          f"{top:>9.1f} {end - ref:>+9.1f}")
