#!/usr/bin/env python3
"""How the collectives follow the comm-state probe (issue 4: repeatability).

  bench/comm_state_slopes.py RAW_DIR [RAW_DIR ...]

RAW_DIR: a calibration's raw documents (`P.raw/` next to `dptwin calibrate
--out P.yaml`, or `profile-N.raw/` of bench/calibration_repeatability.py),
with the per-pass comm documents comm-<backend>-<ranks>-p<k>.json. Runs
nothing.

The profile prices a validation's collectives at the state it ran in by
the ratio of the comm-state probe (a 4 KiB allreduce among the ranks) to the
calibration's reading of it (sim::DeviceProfile::at_comm_state). Every comm
round reads that probe and every collective, so each (pass, round) gives one
pair (probe reading, collective time). Per ranks, collective and message
size this prints, over all rounds of all directories given, the slope of
log(collective) against log(probe) (1: the collective moves with the probe,
0: not at all), its correlation, and the spread of the probe itself; then
the slope pooled by size band, which is what a mapping can act on.

Last, what the mapping itself does, pass against pass (any two passes of
all directories, each pass as the fit reads it: a collective's mean over
its rounds, the probe's median reading): per ranks, the RMS of the log
change of the collectives between two passes left after mapping them by
the probe's change raised to b, for b = 0 (no mapping), 1 (the ratio
itself) and the least-squares b.
"""
import itertools
import glob
import json
import math
import os
import re
import statistics
import sys


def slope(pairs):
    """Least-squares slope and correlation of log y on log x."""
    xs = [math.log(x) for x, _ in pairs]
    ys = [math.log(y) for _, y in pairs]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    if sxx <= 0 or syy <= 0:
        return float("nan"), float("nan")
    return sxy / sxx, sxy / math.sqrt(sxx * syy)


def band(nbytes):
    if nbytes <= 64 * 1024:
        return "<= 64 KiB"
    if nbytes <= 1024 * 1024:
        return "64 KiB-1 MiB"
    return "> 1 MiB"


dirs = sys.argv[1:]
if not dirs:
    sys.exit(__doc__)
# (ranks, kind, bytes) -> [(probe, seconds)], each run's pairs centred on that
# run's own medians so that runs at different levels do not make a slope.
pairs = {}
probe_spread = {}
passes = {}  # ranks -> [(probe median, {(kind, bytes): mean over rounds})]
for d in dirs:
    files = sorted(f for f in glob.glob(os.path.join(d, "comm-*-p*.json")) if re.search(r"-p\d+\.json$", f))
    if not files:
        sys.exit("%s: no per-pass comm documents (comm-<backend>-<ranks>-p<k>.json)" % d)
    by_ranks = {}
    for f in files:
        doc = json.load(open(f))
        state = doc.get("comm_state", {}).get("rounds_s", [])
        if not state:
            sys.exit("%s: no comm_state.rounds_s (a calibration older than the comm-state probe)" % f)
        by_ranks.setdefault(doc["ranks"], []).append(doc)
    for n, docs in by_ranks.items():
        local = {}
        readings = []
        for doc in docs:
            state = doc["comm_state"]["rounds_s"]
            readings += state
            means = {(row["kind"], row["bytes"]): statistics.fmean(row["rounds_s"])
                     for row in doc.get("collectives", []) if row.get("rounds_s") and row["kind"] != "ps_round"}
            passes.setdefault(n, []).append((doc["comm_state"]["seconds"], means))
            for row in doc.get("collectives", []):
                for s, t in zip(state, row.get("rounds_s", [])):
                    if s > 0 and t > 0:
                        local.setdefault((n, row["kind"], row["bytes"]), []).append((s, t))
        probe_spread.setdefault(n, []).append(readings)
        for key, ps in local.items():
            ms = statistics.median(p for p, _ in ps)
            mt = statistics.median(t for _, t in ps)
            pairs.setdefault(key, []).extend((p / ms, t / mt) for p, t in ps)

print("comm-state probe (4 KiB allreduce) per directory: median us, max/min of its round readings")
for n in sorted(probe_spread):
    text = ", ".join("%.0f us x%.2f" % (statistics.median(r) * 1e6, max(r) / min(r)) for r in probe_spread[n])
    print("  %d ranks: %s" % (n, text))

print("\n%-6s %-10s %12s %6s %7s %6s" % ("ranks", "kind", "bytes", "pairs", "slope", "r"))
bands = {}
for (n, kind, nbytes) in sorted(pairs):
    ps = pairs[(n, kind, nbytes)]
    b, r = slope(ps)
    print("%-6d %-10s %12.0f %6d %7.2f %6.2f" % (n, kind, nbytes, len(ps), b, r))
    if kind != "ps_round":
        bands.setdefault((n, band(nbytes)), []).extend(ps)

print("\npooled by size band (every collective but ps_round)")
print("%-6s %-14s %6s %7s %6s" % ("ranks", "band", "pairs", "slope", "r"))
for (n, name) in sorted(bands, key=lambda k: (k[0], ["<= 64 KiB", "64 KiB-1 MiB", "> 1 MiB"].index(k[1]))):
    b, r = slope(bands[(n, name)])
    print("%-6d %-14s %6d %7.2f %6.2f" % (n, name, len(bands[(n, name)]), b, r))

print("\npass against pass: RMS of the collectives' log change left after mapping by (probe ratio)^b")
print("%-6s %6s %8s %8s %8s %8s" % ("ranks", "pairs", "b=0", "b=1", "b fit", "fit b"))
for n in sorted(passes):
    xs, ys = [], []
    for (pa, ma), (pb, mb) in itertools.combinations(passes[n], 2):
        for k in ma.keys() & mb.keys():
            xs.append(math.log(pb / pa))
            ys.append(math.log(mb[k] / ma[k]))
    sxx = sum(x * x for x in xs)
    b = sum(x * y for x, y in zip(xs, ys)) / sxx if sxx > 0 else float("nan")

    def left(e):
        return math.sqrt(sum((y - e * x) ** 2 for x, y in zip(xs, ys)) / len(xs))

    print("%-6d %6d %8.3f %8.3f %8.3f %8.2f" % (n, len(xs), left(0), left(1), left(b), b))
