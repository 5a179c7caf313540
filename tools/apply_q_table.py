#!/usr/bin/env python3
"""apply_q_table.py - markdown table of the apply_q_bench output lines in a log file, so that committed numbers are
copied by a program, not by hand.

    python3 tools/apply_q_table.py LOG [--commit HASH] [--note TEXT] [--run K]

Every line of LOG that apply_q_bench printed for a product ("applyq ...") becomes a row (with --run K, those of the
K-th run only); other lines are ignored, and a product line it cannot read is an error."""
import argparse
import re
import sys

ROW = re.compile(r"applyq\s+(\S+)\s+(\d+)\s+(\d+)\s+(Q\^T B|B Q)\s+\| ours\s+([\d.]+) ms \| (\S+)\s+([\d.]+) ms \|"
                 r"\s+([\d.]+)x \| rel diff (\S+)(?: \((in place|assigned|copy \+ in place|advised copy \+ in place)\))?$")
FORMS = {"in place": "in place (applyOnTheLeft/Right)",
         "assigned": "product assigned (X = Q^T B, X = B Q)",
         "copy + in place": "copy + in place (the product form before 2026-11-28)",
         "advised copy + in place": "copy + in place, huge-page advice on the copy",
         None: "product copied (X.noalias() = Q^T B, X.noalias() = B Q)"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--commit", default="")
    ap.add_argument("--note", default="")
    ap.add_argument("--run", type=int, default=0,
                    help="only the K-th apply_q_bench run of the log (counted by its 'apply_q_bench:' header line, "
                         "from 1); 0: every row")
    a = ap.parse_args()
    rows = []
    run = 0
    with open(a.log) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("apply_q_bench:"):
                run += 1
            if not line.startswith("applyq"):
                continue
            m = ROW.search(line)
            if not m:
                sys.exit("apply_q_table.py: a row it cannot read: " + line)
            if a.run and run != a.run:
                continue
            p, m_, n_, op, ours, base, bms, sp, rd, ip = m.groups()
            rows.append(f"| {p} | {m_} x {n_} | {op} | {FORMS[ip]} | {ours} | {base} | {bms} | {sp}x | {rd} | {a.commit} |")
    if not rows:
        sys.exit("apply_q_table.py: no apply_q_bench rows in " + a.log)
    if a.note:
        print(a.note + "\n")
    print("| precision | shape | product | form | ours ms | baseline | baseline ms | speedup | rel diff | commit |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
