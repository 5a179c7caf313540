#!/usr/bin/env python3
"""Renders benchmark rows of bench/results/*.csv as a Markdown table (for README.md), newest run per row key.

    tools/results_table.py bench/results/h100.csv [--card H100] [--commit abc1234]

Numbers are copied from the CSV as measured; nothing is edited."""
import argparse
import csv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--card", default="", help="keep rows whose card contains this text")
    ap.add_argument("--commit", default="", help="keep rows of this commit")
    args = ap.parse_args()
    rows = [r for r in csv.DictReader(open(args.csv)) if args.card in r["card"] and args.commit in r["commit"]]
    latest = {}
    for r in rows:  # later rows win
        variant = ", ".join(x.strip() for x in r["notes"].split(";") if x.strip().startswith(("panel=", "nb=")))
        r["variant"] = variant or "default"
        latest[(r["op"], r["precision"], r["m"], r["n"], r["variant"])] = r
    print("| op | precision | m x n | variant | ours ms | baseline | baseline ms | speedup | backward err (ours / base) "
          "| orth err (ours / base) | card, date, commit |")
    print("| --- | --- | --- | --- | ---: | --- | ---: | ---: | --- | --- | --- |")
    for r in sorted(latest.values(), key=lambda r: (r["op"], r["variant"] != "default", int(r["n"]),
                                                     r["precision"])):
        print(f"| {r['op']} | {r['precision']} | {r['m']} x {r['n']} | {r['variant']} | {float(r['ours_ms']):.2f} | "
              f"{r['baseline']} | "
              f"{float(r['baseline_ms']):.2f} | {float(r['speedup']):.2f}x | {r['backward_err']} / "
              f"{r['baseline_backward_err']} | {r['orth_err']} / {r['baseline_orth_err']} | "
              f"{r['card']}, {r['date']}, {r['commit']} |")


if __name__ == "__main__":
    main()
