#!/usr/bin/env python3
"""The floor under validation accuracy: how far the measured step times of the
same matrix move between validations.

    bench/measurement_spread.py VALIDATION_DIR_OR_JSON [...]   (two or more)

Reads each `dptwin validate` result (validation.json, or the directory that
holds it), matches cases by label and prints per case the measured medians,
their spread (largest / smallest - 1), the spread of the case's rounds within
each validation, and the smallest worst-case error any single prediction
could have against all of them (a prediction p is off by max(p / min - 1,
1 - p / max) at best; p = 2 min max / (min + max) balances the two). Then the
same per model and overall: the share of cases whose measurement moved more
than 10%, and the floor under a worst-case target (issue 4: 25%).
"""

import json
import os
import statistics
import sys


def load(path):
    if os.path.isdir(path):
        path = os.path.join(path, "validation.json")
    with open(path) as f:
        doc = json.load(f)
    if doc.get("replay_of"):  # `validate --replay`: the same runs as the document it replays
        print("note: %s replays %s: its measurements are that run's" % (path, doc["replay_of"]), file=sys.stderr)
    cases = {c["label"]: c for c in doc["cases"] if c.get("status", "ok") == "ok" and c.get("measured_step_s")}
    return os.path.basename(os.path.dirname(os.path.abspath(path))), cases


def floor_error(values):
    lo, hi = min(values), max(values)
    best = 2 * lo * hi / (lo + hi)
    return best / lo - 1


def rounds_spread(case):
    r = case.get("measured_rounds_s") or []
    return max(r) / min(r) - 1 if len(r) > 1 and min(r) > 0 else float("nan")


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    runs = [load(p) for p in argv[1:]]
    labels = [l for l in runs[0][1] if all(l in cases for _, cases in runs)]
    if not labels:
        print("no case is in every validation", file=sys.stderr)
        return 1
    names = [n for n, _ in runs]
    head = f"{'case':30s}" + "".join(f"{n[:10]:>11s}" for n in names)
    print(head + "   spread  floor   rounds spread (median over runs)")
    rows = []
    for label in labels:
        ms = [cases[label]["measured_step_s"] * 1e3 for _, cases in runs]
        spread = max(ms) / min(ms) - 1
        floor = floor_error(ms)
        known = [x for x in (rounds_spread(cases[label]) for _, cases in runs) if x == x]  # runs with rounds
        rs = statistics.median(known) if known else float("nan")
        rows.append((label, spread, floor, rs))
        print(f"{label:30s}" + "".join(f"{m:11.2f}" for m in ms) + f"  {spread * 100:6.1f}% {floor * 100:5.1f}%   {rs * 100:5.1f}%")
    print()
    groups = {}
    for label, spread, floor, rs in rows:
        groups.setdefault(label.split()[0], []).append((spread, floor, rs))
    groups["all"] = [(s, f, r) for _, s, f, r in rows]
    for g, xs in groups.items():
        spreads = [s for s, _, _ in xs]
        floors = [f for _, f, _ in xs]
        within = [r for _, _, r in xs if r == r] or [float("nan")]
        print(f"{g:6s} cases {len(xs):3d}: measured medians moved by median {statistics.median(spreads) * 100:.1f}%, "
              f"at most {max(spreads) * 100:.1f}%; {sum(s > 0.10 for s in spreads)} moved more than 10%; "
              f"no prediction is closer than {max(floors) * 100:.1f}% to every run of the worst case; "
              f"rounds within a run spread by median {statistics.median(within) * 100:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
