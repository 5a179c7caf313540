#!/usr/bin/env python3
"""Summarises an `ncu --page source --csv --print-source sass` export: executed warp instructions by opcode and the
share of stall samples by reason (tools/profile_kernels.sh writes such exports).

    tools/sass_summary.py kernel.sass.csv [--top 20]"""
import argparse
import collections
import csv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=20)
    args = ap.parse_args()
    rows = list(csv.reader(open(args.csv, newline="")))
    # Row 0 names the kernel; row 1 is the header; then one row per SASS instruction.
    kernel, hdr, data = rows[0], rows[1], rows[2:]
    executed = hdr.index("Instructions Executed")
    source = hdr.index("Source")
    samples = hdr.index("Warp Stall Sampling (All Samples)")
    stall_cols = [i for i, h in enumerate(hdr) if h.startswith("stall_") and "Not Issued" not in h]
    by_op, stalls = collections.Counter(), collections.Counter()
    total = total_samples = 0
    for r in data:
        if not r[executed].isdigit():
            continue
        words = r[source].split()
        if not words:
            continue
        op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
        op = op.split(".")[0]
        n = int(r[executed])
        by_op[op] += n
        total += n
        if r[samples].isdigit():
            total_samples += int(r[samples])
        for i in stall_cols:
            if r[i].isdigit():
                stalls[hdr[i]] += int(r[i])
    print(" ".join(kernel).strip(", "))
    print(f"executed warp instructions: {total}")
    for op, n in by_op.most_common(args.top):
        print(f"  {op:12s} {100.0 * n / max(total, 1):5.1f}%")
    print(f"stall samples: {total_samples}")
    for reason, n in stalls.most_common(10):
        print(f"  {reason:28s} {100.0 * n / max(total_samples, 1):5.1f}%")


if __name__ == "__main__":
    main()
