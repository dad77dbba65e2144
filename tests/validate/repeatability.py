#!/usr/bin/env python3
"""Calibration repeatability (issue 4): two calibrations in a row must give
predictions within 5% of each other on the default matrix.

Not part of `meson test` (it takes ~5 minutes on 2 cores):
  tests/validate/repeatability.py DPTWIN OUT_DIR
(DPTWIN: a binary with the calibrate/validate subcommands, e.g. build/apps/dptwin.)
Prints the per-case predictions under both profiles and exits 1 above 5%.
"""
import json
import os
import subprocess
import sys

dptwin, out = sys.argv[1], sys.argv[2]
extra = sys.argv[3:]  # e.g. --drift-compensation
os.makedirs(out, exist_ok=True)
# Both calibrations first, then both predictions back to back (with
# --drift-compensation as an optional third argument, each prediction is made at
# the machine's speed of that moment: the profiles are compared on one state).
preds = []
for i in (1, 2):
    prof = os.path.join(out, "profile-%d.yaml" % i)
    subprocess.run([dptwin, "calibrate", "--out", prof], check=True, stdout=subprocess.DEVNULL)
for i in (1, 2):
    prof = os.path.join(out, "profile-%d.yaml" % i)
    vdir = os.path.join(out, "predict-%d" % i)
    subprocess.run([dptwin, "validate", "--predict-only", "--profile", prof, "--out", vdir] + extra, check=True,
                   stdout=subprocess.DEVNULL)
    preds.append(json.load(open(os.path.join(vdir, "validation.json")))["cases"])
worst = 0.0
for a, b in zip(*preds):
    d = abs(a["predicted_step_s"] - b["predicted_step_s"]) / b["predicted_step_s"] * 100
    worst = max(worst, d)
    print("%-30s %9.2f ms %9.2f ms %6.2f%%" % (a["label"], a["predicted_step_s"] * 1e3, b["predicted_step_s"] * 1e3, d))
print("largest difference between the two calibrations' predictions: %.2f%%" % worst)
sys.exit(0 if worst <= 5.0 else 1)
