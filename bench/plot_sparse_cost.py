#!/usr/bin/env python3
"""Plots a sparse cost-model sweep: step time (or bytes) per mode.

    build/bin/ferry cost --model dlrm --sweep batch --json > sweep.json
    bench/plot_sparse_cost.py sweep.json out.svg [--bytes]

Reads the JSON of `ferry cost --model dlrm --sweep AXIS --json` and writes
an SVG (by hand: needs no matplotlib) with one line per mode (PS, ring
all-gather, ring full all-reduce, hybrid), log scales, and the crossovers
marked.
"""
import json
import math
import sys

MODES = [("ps", "#1f77b4"), ("all-gather", "#2ca02c"), ("all-reduce", "#d62728"),
         ("hybrid", "#9467bd")]
W, H = 720, 440
LEFT, RIGHT, TOP, BOTTOM = 80, 150, 40, 60


def log_ticks(lo, hi):
    ticks = []
    for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        if lo <= 10**e <= hi:
            ticks.append(10**e)
    return ticks or [lo, hi]


def fmt(v):
    if v >= 1e9:
        return "%gG" % (v / 1e9)
    if v >= 1e6:
        return "%gM" % (v / 1e6)
    if v >= 1e3:
        return "%gk" % (v / 1e3)
    return "%g" % v


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    use_bytes = "--bytes" in argv[3:]
    with open(argv[1]) as f:
        doc = json.load(f)
    sweep = doc.get("sweep")
    if sweep is None:
        sys.exit("%s: no 'sweep' (run ferry cost with --sweep and --json)" % argv[1])
    axis = sweep["axis"]
    xs = [p["value"] for p in sweep["points"]]
    if axis == "table":
        xs = [p["table_rows"] for p in sweep["points"]]
    key = "bytes_per_step_per_worker" if use_bytes else "step_seconds"
    scale = 1 if use_bytes else 1e3
    ys = {m: [p["modes"][m][key] * scale for p in sweep["points"]] for m, _ in MODES}
    log_x = axis in ("batch", "table")
    all_y = [y for v in ys.values() for y in v if y > 0]
    y_lo, y_hi = min(all_y) / 1.3, max(all_y) * 1.3

    def px(x):
        lo, hi = xs[0], xs[-1]
        if log_x:
            t = (math.log(x) - math.log(lo)) / max(1e-12, math.log(hi) - math.log(lo))
        else:
            t = (x - lo) / max(1e-12, hi - lo)
        return LEFT + t * (W - LEFT - RIGHT)

    def py(y):
        t = (math.log(y) - math.log(y_lo)) / (math.log(y_hi) - math.log(y_lo))
        return H - BOTTOM - t * (H - TOP - BOTTOM)

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="12">' % (W, H),
           '<rect width="100%" height="100%" fill="white"/>']
    title = "%s vs %s (%d workers, %d shards)" % (
        "bytes per step per worker" if use_bytes else "step time",
        sweep["varied"],
        doc["workers"], doc["shards"])
    out.append('<text x="%d" y="22" font-size="14">%s</text>' % (LEFT, title))
    x0, x1, y0, y1 = LEFT, W - RIGHT, TOP, H - BOTTOM
    out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" '
               'stroke="black"/>' % (x0, y0, x1 - x0, y1 - y0))
    for t in log_ticks(y_lo, y_hi):
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>'
                   % (x0, x1, py(t), py(t)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>'
                   % (x0 - 6, py(t) + 4, fmt(t)))
    xticks = log_ticks(xs[0], xs[-1]) if log_x else xs[::2]
    for t in xticks:
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>'
                   % (px(t), y1 + 18, fmt(t) if log_x else "%.1f" % t))
    xlabel = {"batch": "global batch", "table": "table rows (all tables)",
              "zipf": "Zipf exponent"}.get(axis, axis)
    out.append('<text x="%d" y="%d" text-anchor="middle">%s</text>'
               % ((x0 + x1) // 2, H - 18, xlabel))
    out.append('<text x="18" y="%d" transform="rotate(-90 18 %d)" '
               'text-anchor="middle">%s</text>'
               % ((y0 + y1) // 2, (y0 + y1) // 2,
                  "bytes per step per worker" if use_bytes else "step (ms)"))
    for i, (mode, color) in enumerate(MODES):
        pts = " ".join("%.1f,%.1f" % (px(x), py(y))
                       for x, y in zip(xs, ys[mode]) if y > 0)
        out.append('<polyline points="%s" fill="none" stroke="%s" '
                   'stroke-width="2"/>' % (pts, color))
        out.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" '
                   'stroke-width="2"/>' % (x1 + 12, x1 + 36, y0 + 14 + 20 * i,
                                           y0 + 14 + 20 * i, color))
        out.append('<text x="%d" y="%d">%s</text>' % (x1 + 42, y0 + 18 + 20 * i,
                                                       mode))
    for c in sweep["crossovers"]:
        x = c["table_rows"] if axis == "table" else c["value"]
        if xs[0] <= x <= xs[-1]:
            out.append('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="gray" '
                       'stroke-dasharray="4 3"/>' % (px(x), px(x), y0, y1))
    out.append("</svg>")
    with open(argv[2], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(sys.argv)
