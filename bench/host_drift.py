#!/usr/bin/env python3
"""How much this machine's own speed moves (issue 4: the floor under calibration
repeatability on a shared host).

  bench/host_drift.py MICROBENCH [SECONDS=360] [WINDOW=120]
(MICROBENCH: build/exec/microbench/dptwin-microbench.)

Runs the speed probe (`dptwin-microbench --mode speed`: 512x768x768 matmul in
fp32 and bf16, a 1M-element add, one dispatch; one process, one thread) back to
back for SECONDS, with the hypervisor's steal (/proc/stat) around each call.
Prints, per probe class, the spread of single readings (p10..p90, max/min) and
the mean of every WINDOW-second window (a calibration's length) with the
largest difference between consecutive windows: what two calibrations in a
row would read if they measured perfectly.
"""
import json
import os
import statistics as st
import subprocess
import sys
import tempfile
import time

mb = sys.argv[1]
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 360
window = float(sys.argv[3]) if len(sys.argv) > 3 else 120
env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")


def cpu():
    with open("/proc/stat") as f:
        v = list(map(int, f.readline().split()[1:]))
    return v[7], sum(v)


rows = []
t0 = time.time()
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "speed.json")
    while time.time() - t0 < seconds:
        s0 = cpu()
        subprocess.run([mb, "--mode", "speed", "--threads", "1", "--out", path], check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        s1 = cpu()
        r = json.load(open(path))["speed"]
        r["t"] = time.time() - t0
        r["steal_pct"] = 100.0 * (s1[0] - s0[0]) / max(1, s1[1] - s0[1])
        rows.append(r)

classes = [k for k in ("matmul_s", "matmul_bf16_s", "elementwise_s", "dispatch_s") if k in rows[0]]
print("%d readings over %.0f s; steal during them: mean %.1f%%, max %.1f%%"
      % (len(rows), rows[-1]["t"], st.mean(r["steal_pct"] for r in rows), max(r["steal_pct"] for r in rows)))
print("%-14s %10s %10s %10s %8s   window means (%.0f s) -> largest step between consecutive windows"
      % ("probe", "median", "p10", "p90", "max/min", window))
for k in classes:
    v = sorted(r[k] for r in rows)
    means = []
    w = 0.0
    while w + window <= rows[-1]["t"] + 1e-9:
        xs = [r[k] for r in rows if w <= r["t"] < w + window]
        if xs:
            means.append(st.mean(xs))
        w += window
    steps = [abs(b - a) / a * 100 for a, b in zip(means, means[1:])]
    print("%-14s %8.1f us %8.1f us %8.1f us %7.2fx   %s -> %s"
          % (k, st.median(v) * 1e6, v[len(v) // 10] * 1e6, v[(9 * len(v)) // 10] * 1e6, v[-1] / v[0],
             " ".join("%.1f" % (m * 1e6) for m in means), ("%.1f%%" % max(steps)) if steps else "n/a (one window)"))
