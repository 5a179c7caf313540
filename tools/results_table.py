#!/usr/bin/env python3
"""Renders benchmark rows of bench/results/*.csv as a Markdown table (for README.md), newest run per row key.

    tools/results_table.py bench/results/h100.csv [--card H100] [--commit abc1234] [--mode TF32x3]

Numbers are copied from the CSV as measured; nothing is edited.

The `mode` column (precision mode of ours, tcqr::Precision) was added after the first rows were written; it is the
last column, so older rows have no value there. Such a row ran before precision modes existed, when float products
were plain FP32 (no tensor cores) and double products FP64: it is shown as FP32 / FP64 and flagged "(pre-modes)"."""
import argparse
import csv


def mode_of(r):
    mode = (r.get("mode") or "").strip()
    if mode:
        return mode
    return ("FP32" if r["precision"] == "float" else "FP64") + " (pre-modes)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--card", default="", help="keep rows whose card contains this text")
    ap.add_argument("--commit", default="", help="keep rows of this commit")
    ap.add_argument("--mode", default="", help="keep rows of this precision mode (e.g. TF32x3; FP32 includes pre-modes "
                                               "float rows)")
    args = ap.parse_args()
    with open(args.csv, newline="") as f:
        rows = [r for r in csv.DictReader(f) if args.card in r["card"] and args.commit in r["commit"]]
    latest = {}
    for r in rows:  # later rows win
        r["mode_shown"] = mode_of(r)
        if args.mode and r["mode_shown"].split(" ")[0] != args.mode:
            continue
        variant = ", ".join(x.strip() for x in r["notes"].split(";") if x.strip().startswith(("panel=", "nb=", "lookahead=")))
        r["variant"] = variant or "default"
        # A pre-modes row and a row of the same mode measured later are the same key: the later one wins.
        latest[(r["op"], r["precision"], r["m"], r["n"], r["variant"], r["mode_shown"].split(" ")[0])] = r
    print("| op | precision | mode | m x n | variant | ours ms | ours TFLOP/s | baseline | baseline ms | "
          "baseline TFLOP/s | speedup | backward err (ours / base) | orth err (ours / base) | card, date, commit |")
    print("| --- | --- | --- | --- | --- | ---: | ---: | --- | ---: | ---: | ---: | --- | --- | --- |")
    for r in sorted(latest.values(), key=lambda r: (r["op"], r["variant"] != "default", int(r["n"]), int(r["m"]),
                                                     r["precision"], r["mode_shown"])):
        print(f"| {r['op']} | {r['precision']} | {r['mode_shown']} | {r['m']} x {r['n']} | {r['variant']} | "
              f"{float(r['ours_ms']):.2f} | {float(r['ours_tflops']):.2f} | {r['baseline']} | "
              f"{float(r['baseline_ms']):.2f} | {float(r['baseline_tflops']):.2f} | {float(r['speedup']):.2f}x | "
              f"{r['backward_err']} / {r['baseline_backward_err']} | {r['orth_err']} / {r['baseline_orth_err']} | "
              f"{r['card']}, {r['date']}, {r['commit']} |")


if __name__ == "__main__":
    main()
