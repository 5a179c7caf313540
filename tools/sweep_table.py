#!/usr/bin/env python3
"""Renders issue 4's sweep (qr_bench --sweep: m n = 2^28 and 2^30 from m x 32 to square, every mode) from
bench/results/h100.csv as one Markdown table: a row per shape, TFLOP/s of cuSOLVER and of ours in each mode, with the
speedup against cuSOLVER of the same precision in parentheses.

    tools/sweep_table.py bench/results/h100.csv --commit 1fe1112 [--card H100]
    tools/sweep_table.py bench/results/h100.csv --commit b776f3b,8cbd4bd   # a mode swept later adds its column

Numbers are copied from the CSV as measured (the newest row per shape and mode of those commits, a later commit's
row winning); nothing is edited. A mode without a row of those commits gets a column of "-". The cuSOLVER columns come
from the first mode's row of each precision."""
import argparse
import csv

SHAPES = [(8388608, 32), (2097152, 128), (524288, 512), (131072, 2048), (16384, 16384),
          (33554432, 32), (8388608, 128), (2097152, 512), (524288, 2048), (32768, 32768)]
FLOAT_MODES = ["FP32", "TF32x3", "FP16x3", "TF32", "FP16", "BF16"]
DOUBLE_MODES = ["FP64", "FP64Emulated"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--commit", required=True, help="a commit, or several separated by commas (later ones win)")
    ap.add_argument("--card", default="")
    args = ap.parse_args()
    commits = args.commit.split(",")
    with open(args.csv, newline="") as f:
        rows = [r for r in csv.DictReader(f)
                if r["op"] == "geqrf" and r["commit"] in commits and args.card in r["card"]
                and (r.get("mode") or "")
                and not any(x.strip().startswith(("panel=", "nb=", "lookahead=")) for x in r["notes"].split(";"))]
    rows.sort(key=lambda r: commits.index(r["commit"]))  # (stable: within a commit, later rows still win)
    cell = {}
    for r in rows:  # later rows win
        cell[(int(r["m"]), int(r["n"]), r["precision"], r["mode"])] = r
    head = (["m x n", "SGEQRF TF/s"] + [f"{m} TF/s (x)" for m in FLOAT_MODES] + ["DGEQRF TF/s"]
            + [f"{m} TF/s (x)" for m in DOUBLE_MODES])
    print("| " + " | ".join(head) + " |")
    print("| --- " + "| ---: " * (len(head) - 1) + "|")
    for m, n in SHAPES:
        out = [f"{m} x {n}"]
        for prec, modes in (("float", FLOAT_MODES), ("double", DOUBLE_MODES)):
            base = next((cell[(m, n, prec, md)] for md in modes if (m, n, prec, md) in cell), None)
            out.append(f"{float(base['baseline_tflops']):.2f}" if base else "-")
            for md in modes:
                r = cell.get((m, n, prec, md))
                out.append(f"{float(r['ours_tflops']):.2f} ({float(r['speedup']):.2f}x)" if r else "-")
        print("| " + " | ".join(out) + " |")


if __name__ == "__main__":
    main()
