#!/usr/bin/env python3
"""csv_table.py - render selected columns of a results CSV (bench/results/*.csv) as a markdown table.

The numbers are copied as written by the benchmark (optionally rounded for display with --digits); nothing is
computed. Used for the README tables of tsqr_bench and trmm_bench (tools/results_table.py renders qr_bench's CSV).

  tools/csv_table.py bench/results/h100-tsqr.csv --columns op,precision,m,n,ours_ms,baseline,baseline_ms,speedup
"""
import argparse
import csv
import sys


def fmt(value, digits):
    if digits is None or value.lstrip("-").isdigit():
        return value
    try:
        x = float(value)
    except ValueError:
        return value
    if x != x:  # NaN
        return "-"
    return f"{x:.{digits}g}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--columns", required=True, help="comma-separated column names, in output order")
    ap.add_argument("--commit", help="keep rows of this commit")
    ap.add_argument("--digits", type=int, help="significant display digits for numbers (default: as written)")
    a = ap.parse_args()
    cols = a.columns.split(",")
    with open(a.csv, newline="") as f:
        rows = list(csv.DictReader(f))
    missing = [c for c in cols if rows and c not in rows[0]]
    if missing:
        sys.exit(f"csv_table.py: no column(s) {', '.join(missing)} in {a.csv}")
    if a.commit:
        rows = [r for r in rows if r.get("commit") == a.commit]
    print("| " + " | ".join(cols) + " |")
    print("| " + " | ".join("---" for _ in cols) + " |")
    for r in rows:
        print("| " + " | ".join(fmt(r[c], a.digits) for c in cols) + " |")


if __name__ == "__main__":
    main()
