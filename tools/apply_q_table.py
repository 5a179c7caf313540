#!/usr/bin/env python3
"""apply_q_table.py - markdown table of the apply_q_bench output lines in a log file, so that committed numbers are
copied by a program, not by hand.

    python3 tools/apply_q_table.py LOG [--commit HASH] [--note TEXT]

Every line of LOG that apply_q_bench printed for a product ("applyq ...") becomes a row; other lines are ignored."""
import argparse
import re
import sys

ROW = re.compile(r"applyq\s+(\S+)\s+(\d+)\s+(\d+)\s+(Q\^T B|B Q)\s+\| ours\s+([\d.]+) ms \| (\S+)\s+([\d.]+) ms \|"
                 r"\s+([\d.]+)x \| rel diff (\S+)(?: \((in place|assigned|copy \+ in place)\))?")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--commit", default="")
    ap.add_argument("--note", default="")
    a = ap.parse_args()
    rows = []
    with open(a.log) as f:
        for line in f:
            m = ROW.search(line)
            if not m:
                continue
            p, m_, n_, op, ours, base, bms, sp, rd, ip = m.groups()
            form = {"in place": "in place (applyOnTheLeft/Right)",
                    "assigned": "product assigned (X = Q^T B, X = B Q)",
                    "copy + in place": "copy + in place (the product form before 2026-11-28)",
                    None: "product (X.noalias() = Q^T B, X.noalias() = B Q)"}[ip]
            rows.append(f"| {p} | {m_} x {n_} | {op} | {form} | {ours} | {base} | {bms} | {sp}x | {rd} | {a.commit} |")
    if not rows:
        sys.exit("apply_q_table.py: no apply_q_bench rows in " + a.log)
    if a.note:
        print(a.note + "\n")
    print("| precision | shape | product | form | ours ms | baseline | baseline ms | speedup | rel diff | commit |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
