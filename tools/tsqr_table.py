#!/usr/bin/env python3
"""Renders tsqr_bench rows (bench/results/h100-tsqr.csv) of one commit as a Markdown table for README.md, with the
memory floor that tsqr_bench writes into its notes (a timed device-to-device copy of the matrix; the floor is the
copy's time for thin Q, half of it for R alone) and how many times that floor ours took.

    tools/tsqr_table.py bench/results/h100-tsqr.csv --commit 1fe1112

Numbers are copied from the CSV as measured (the newest row per op, precision and shape); nothing is edited."""
import argparse
import csv
import re


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--commit", required=True)
    args = ap.parse_args()
    with open(args.csv, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["commit"] == args.commit]
    latest = {}
    for r in rows:
        latest[(r["op"], r["precision"], r["m"], r["n"])] = r
    print("| op | precision | m x n | ours ms | baseline | baseline ms | speedup | bwd ratio (ours / base) "
          "| orth ratio (ours / base) | copy GB/s | floor ms | ours / floor |")
    print("| --- | --- | --- | ---: | --- | ---: | ---: | --- | --- | ---: | ---: | ---: |")
    for r in latest.values():
        m = re.search(r"copy ([0-9.]+) ms = ([0-9.]+) GB/s; floor ([0-9.]+) ms, ours ([0-9.]+)x", r["notes"])
        copy_gbs, floor, times = (m.group(2), m.group(3), m.group(4) + "x") if m else ("-", "-", "-")
        def pair(a, b):
            return "-" if r[a] == "nan" else f"{r[a]} / {r[b]}"
        print(f"| {r['op']} | {r['precision']} | {r['m']} x {r['n']} | {float(r['ours_ms']):.3f} | {r['baseline']} "
              f"| {float(r['baseline_ms']):.3f} | {float(r['speedup']):.2f}x | {pair('backward_err', 'baseline_backward_err')} "
              f"| {pair('orth_err', 'baseline_orth_err')} | {copy_gbs} | {floor} | {times} |")


if __name__ == "__main__":
    main()
