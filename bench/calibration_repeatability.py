#!/usr/bin/env python3
"""Calibration repeatability (issue 4): two calibrations in a row should give
predictions within 5% of each other on the default matrix.

Not part of `meson test` (about 5 minutes on 2 cores):
  bench/calibration_repeatability.py DPTWIN OUT_DIR [calibrate options...]
(DPTWIN: a binary with the calibrate/validate subcommands, e.g. build/apps/dptwin;
calibrate options such as --passes 3 are passed through.)

Prints, per case, the predictions of both profiles twice: as they are (each at
the machine state its calibration found) and with the second profile brought
to the first one's state (`validate --predict-only --at-speed-of`: its speed
reference and its spread of speeds, `speed_states`), which removes the host's
change between the two calibrations and leaves the calibration's own spread;
and each calibration's host steal. Exits 1 when the at-one-state comparison
differs by more than 5% somewhere.
"""
import json
import os
import subprocess
import sys

dptwin, out = sys.argv[1], sys.argv[2]
extra = sys.argv[3:]
os.makedirs(out, exist_ok=True)
prof = [os.path.join(out, "profile-%d.yaml" % i) for i in (1, 2)]
for p in prof:
    subprocess.run([dptwin, "calibrate", "--out", p] + extra, check=True, stdout=subprocess.DEVNULL)


def predict(name, args):
    vdir = os.path.join(out, name)
    subprocess.run([dptwin, "validate", "--predict-only", "--out", vdir] + args, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.load(open(os.path.join(vdir, "validation.json")))["cases"]


first = predict("predict-1", ["--profile", prof[0]])
second = predict("predict-2", ["--profile", prof[1]])
second_at_first = predict("predict-2-at-1", ["--profile", prof[1], "--at-speed-of", prof[0]])
for i, p in enumerate(prof):
    fit = json.load(open(os.path.splitext(p)[0] + ".fit.json"))
    print("calibration %d: host steal %.1f%% of CPU time" % (i + 1, fit.get("host_steal_pct", float("nan"))))


def spread(a, b):
    return abs(a - b) / b * 100


print("%-28s %10s %10s %7s %10s %7s" % ("case", "1 (ms)", "2 (ms)", "diff", "2 at 1", "diff"))
worst_abs = worst_at = 0.0
within_abs = within_at = 0
for a, b, c in zip(first, second, second_at_first):
    d_abs = spread(b["predicted_step_s"], a["predicted_step_s"])
    d_at = spread(c["predicted_step_s"], a["predicted_step_s"])
    worst_abs, worst_at = max(worst_abs, d_abs), max(worst_at, d_at)
    within_abs += d_abs <= 5
    within_at += d_at <= 5
    print("%-28s %10.2f %10.2f %6.1f%% %10.2f %6.1f%%" % (a["label"], a["predicted_step_s"] * 1e3,
                                                       b["predicted_step_s"] * 1e3, d_abs,
                                                       c["predicted_step_s"] * 1e3, d_at))
n = len(first)
print("as calibrated: largest difference %.1f%%, %d/%d cases within 5%%" % (worst_abs, within_abs, n))
print("at one state:  largest difference %.1f%%, %d/%d cases within 5%%" % (worst_at, within_at, n))
sys.exit(0 if worst_at <= 5.0 else 1)
