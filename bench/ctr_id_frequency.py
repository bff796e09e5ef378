#!/usr/bin/env python3
"""How often the training split shows the ids of the test split (what limits
a CTR model's test AUC on `ferry data ctr` data, docs/sparse.md "Versus
PyTorch"). Counts each field's values in DIR/train.tsv, then buckets every
test lookup by its id's training count.

Usage: /usr/bin/python3 bench/ctr_id_frequency.py DIR   (~1 min per 1M rows)
"""
import collections
import sys


def main():
    d = sys.argv[1]
    cnt = [collections.Counter() for _ in range(26)]
    with open(d + "/train.tsv") as f:
        for line in f:
            c = line.rstrip("\n").split("\t")[14:]
            for i, v in enumerate(c):
                cnt[i][v] += 1
    buckets = collections.Counter()
    total = 0
    rows_with_rare = 0
    nrows = 0
    with open(d + "/test.tsv") as f:
        for line in f:
            c = line.rstrip("\n").split("\t")[14:]
            nrows += 1
            rare = False
            for i, v in enumerate(c):
                n = cnt[i].get(v, 0)
                b = "0" if n == 0 else "1-2" if n <= 2 else "3-9" if n <= 9 else "10-99" if n < 100 else ">=100"
                buckets[b] += 1
                total += 1
                if n <= 2: rare = True
            rows_with_rare += rare
    for b in ["0", "1-2", "3-9", "10-99", ">=100"]:
        print(f"test lookups whose id was seen {b} times in training: {buckets[b]/total:.3f}")
    print(f"test rows with at least one id seen <= 2 times: {rows_with_rare/nrows:.3f}")


if __name__ == "__main__":
    main()
