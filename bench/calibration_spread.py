#!/usr/bin/env python3
"""What the speed probes leave of the host's state: the floor under calibration
repeatability (issue 4: two calibrations within 5%).

  bench/calibration_spread.py RUN_DIR [RUN_DIR ...]

RUN_DIR: an output directory of bench/calibration_repeatability.py with its raw
documents (profile-1.raw/compute-p*.json, profile-2.raw/...; `--passes 2` or
more). Reads only the compute microbenchmarks and their probe readings; runs
nothing. Every case is rescaled to its calibration's speed reference by the
probe read next to it, as validate/profile_fit.cpp's normalized_to_speed does
(its probe class, short calls partly by the dispatch reading next to them, a
fused GELU call as the plain dispatch by the dispatch reading and the rest by
its class's), then four tables:

1. per duration decade of the case: the RMS of log differences between two
   passes of one calibration, raw and rescaled (the sampling floor of one pass);
2. per run: the RMS of log differences of the cases' medians over passes
   between the two calibrations, the second brought to the first one's speed
   reference as `--at-speed-of` moves the tables (by its class's ratio, short
   calls partly by the dispatch ratio, GELU tables by their class alone), and
   the share of cases more than 5% apart;
3. over all passes of all runs given: per probe class, op and decade, the slope
   and correlation of a case's log change against its probe's log change
   between any two passes read by the same probe class, and the RMS the probe
   leaves unexplained. The probe's own read noise pulls the slope towards 0
   (regression dilution); the reverse regression's slope, slope / r^2, bounds
   it from above (the "at most" column; where r > 0), so a group whose
   "at most" is under 1 follows its probe less than fully whatever the
   probe's noise.
4. over the same pairs of passes, the calls read next to their class's probe
   and the dispatch probe both: per probe class and duration band, the log
   change regressed on both probes' log changes together (a, b), and the
   share of the call that follows the dispatch probe, b / (a + b), beside
   dispatch_share at the band's middle (what the fit and `at_speed` use).
   Both probes' read noise dilutes a and b (a + b under 1), and with the two
   probes' changes correlated the share leans towards the less noisy probe:
   a pool with a large host move (a pair such as rsb11) is what makes it
   worth reading. A class is a probe class: "matmul" holds the fp32 GEMMs,
   the batched ones and the fp32 GELU rows.
"""
import glob
import itertools
import json
import math
import os
import statistics
import sys


def dispatch_share(seconds):  # sim/device_profile.cpp: dispatch_share
    all_dispatch, no_dispatch = 30e-6, 1e-3
    if not seconds > all_dispatch:
        return 1.0
    if seconds >= no_dispatch:
        return 0.0
    return math.log(no_dispatch / seconds) / math.log(no_dispatch / all_dispatch)


def gelu_by_parts(key, cls, dispatch):  # normalized_to_speed: a GELU row read next to its class and dispatch
    return key[1] == "activation" and bool(dispatch) and cls != "dispatch"


class Pass(dict):
    """{key: (seconds, probe class, probe seconds, dispatch seconds or None)} of one pass, and `plain`: the
    plain dispatch's reads [(seconds, dispatch probe seconds)]."""
    plain = ()


def cases(doc):
    out = Pass()
    out.plain = [(r["seconds"], r["probe"]["s"]) for r in doc.get("dispatch_reads", {}).get("plain_s", [])
                 if r.get("seconds", 0) > 0 and r.get("probe", {}).get("s", 0) > 0]
    for section in ("compute", "optimizer", "memcpy"):
        for i, r in enumerate(doc.get(section, [])):
            p = r.get("probe", {})
            if "seconds" not in r or not p.get("s", 0) > 0:
                continue
            what = r.get("op", section)
            out[(section, what, r.get("dtype", ""), i)] = (r["seconds"], p["class"], p["s"], p.get("dispatch_s"))
    return out


def reference(passes):
    by_class = {}
    for c in passes:
        for _, cls, probe, _ in c.values():
            by_class.setdefault(cls, []).append(probe)
        for _, probe in c.plain:
            by_class.setdefault("dispatch", []).append(probe)
    return {cls: statistics.median(v) for cls, v in by_class.items()}


def rescaled(c, ref):
    plain = [s * ref["dispatch"] / probe for s, probe in c.plain] if "dispatch" in ref else []
    plain = statistics.median(plain) if plain else 0.0
    out = {}
    for k, (s, cls, probe, dispatch) in c.items():
        by_class = ref[cls] / probe
        blend = dispatch and cls != "dispatch" and "dispatch" in ref
        by_dispatch = ref["dispatch"] / dispatch if blend else by_class
        if gelu_by_parts(k, cls, dispatch):
            out[k] = plain + max(s - plain / by_dispatch, 0.05 * s) * by_class
            continue
        share = dispatch_share(s) if blend else 0.0
        out[k] = s * by_class ** (1 - share) * by_dispatch ** share
    return out


def decade(s):
    return math.floor(math.log10(s))


def rms(xs):
    return math.sqrt(sum(x * x for x in xs) / len(xs)) if xs else float("nan")


runs = sys.argv[1:]
if not runs:
    sys.exit(__doc__)
calibrations = {}  # (run, 1|2) -> [cases of each pass]
for run in runs:
    for i in (1, 2):
        files = sorted(glob.glob(os.path.join(run, "profile-%d.raw" % i, "compute-p*.json")))
        if len(files) < 2:
            sys.exit("%s: profile-%d.raw has fewer than two compute passes" % (run, i))
        calibrations[(run, i)] = [cases(json.load(open(f))) for f in files]

print("1. one pass to another within a calibration (RMS of log differences)")
by_decade = {}
for passes in calibrations.values():
    ref = reference(passes)
    norm = [rescaled(c, ref) for c in passes]
    for a, b in itertools.combinations(range(len(passes)), 2):
        for k, (s, *_rest) in passes[a].items():
            if k in passes[b]:
                d = by_decade.setdefault(decade(s), ([], []))
                d[0].append(math.log(passes[b][k][0] / s))
                d[1].append(math.log(norm[b][k] / norm[a][k]))
print("%-14s %6s %8s %9s" % ("case seconds", "pairs", "raw", "rescaled"))
for dec in sorted(by_decade):
    raw, norm = by_decade[dec]
    print("1e%-12d %6d %8.3f %9.3f" % (dec, len(raw), rms(raw), rms(norm)))

print("\n2. the second calibration against the first, at the first one's speed reference")
print("%-32s %6s %8s %10s" % ("run", "cases", "RMS", "over 5%"))
for run in runs:
    meds, refs = [], []
    for i in (1, 2):
        passes = calibrations[(run, i)]
        ref = reference(passes)
        norm = [rescaled(c, ref) for c in passes]
        meds.append({k: statistics.median(n[k] for n in norm if k in n) for k in norm[0]})
        refs.append(ref)
    first = calibrations[(run, 1)][0]
    devs = []
    for k in meds[0]:
        if k not in meds[1]:
            continue
        cls = first[k][1]
        blend = (first[k][3] and cls != "dispatch" and "dispatch" in refs[0] and "dispatch" in refs[1]
                 and not gelu_by_parts(k, cls, first[k][3]))
        share = dispatch_share(meds[1][k]) if blend else 0.0
        by_dispatch = refs[0]["dispatch"] / refs[1]["dispatch"] if blend else 1.0
        move = (refs[0][cls] / refs[1][cls]) ** (1 - share) * by_dispatch ** share
        devs.append(math.log(meds[1][k] * move / meds[0][k]))
    print("%-32s %6d %8.3f %9.0f%%" % (os.path.basename(os.path.normpath(run)), len(devs), rms(devs),
                                      100.0 * sum(abs(d) > math.log(1.05) for d in devs) / len(devs)))

print("\n3. a case's change against its probe's change, any two passes of all runs")
groups = {}
all_passes = [c for passes in calibrations.values() for c in passes]
for a, b in itertools.combinations(all_passes, 2):
    for k, (s1, cls, p1, _) in a.items():
        if k not in b or b[k][1] != cls:  # a pass of an older suite may read it by another class
            continue
        s2, _, p2, _ = b[k]
        x = math.log(p2 / p1)
        if abs(x) < 1:  # a probe reading off by e or more is a broken reading, not a state
            g = groups.setdefault((cls, k[1], k[2], decade(s1)), ([], []))
            g[0].append(x)
            g[1].append(math.log(s2 / s1))
print("%-36s %6s %6s %7s %6s %8s %8s" % ("probe class / op / dtype / decade", "pairs", "slope", "at most", "r",
                                          "case sd", "left sd"))
for key in sorted(groups):
    xs, ys = groups[key]
    if len(xs) < 50:
        continue
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    if not (sxx > 0 and syy > 0):
        continue
    r = sxy / math.sqrt(sxx * syy)
    bound = "%7.2f" % (sxy / sxx / (r * r)) if r > 0 else "%7s" % "-"
    print("%-36s %6d %6.2f %s %6.2f %8.3f %8.3f" % ("%s / %s / %s / 1e%d" % key, len(xs), sxy / sxx, bound, r,
                                                    math.sqrt(syy / len(ys)), math.sqrt(syy / len(ys) * (1 - r * r))))

print("\n4. calls read by their class and the dispatch probe: a case's change on both probes' changes")
bands = [30e-6, 100e-6, 300e-6, 1e-3, 3e-3, 10e-3, 1.0]
both = {}
for a, b in itertools.combinations(all_passes, 2):
    for k, (s1, cls, p1, d1) in a.items():
        if k not in b or b[k][1] != cls or not d1 or not b[k][3] or cls == "dispatch":
            continue
        s2, _, p2, d2 = b[k]
        x1, x2 = math.log(p2 / p1), math.log(d2 / d1)
        band = next((i for i, hi in enumerate(bands) if s1 < hi), None)
        if band is None or abs(x1) >= 1 or abs(x2) >= 1:
            continue
        both.setdefault((cls, band), []).append((x1, x2, math.log(s2 / s1)))
print("%-22s %-16s %6s %6s %6s %6s %7s %7s" % ("probe class", "call seconds", "pairs", "a", "b", "a+b", "share",
                                              "current"))
for (cls, band), rows in sorted(both.items()):
    if len(rows) < 50:
        continue
    n = len(rows)
    m = [statistics.fmean(r[j] for r in rows) for j in range(3)]
    c = [[sum((r[i] - m[i]) * (r[j] - m[j]) for r in rows) for j in range(3)] for i in range(3)]
    det = c[0][0] * c[1][1] - c[0][1] ** 2
    if not det > 0:
        continue
    ca = (c[1][1] * c[0][2] - c[0][1] * c[1][2]) / det
    cb = (c[0][0] * c[1][2] - c[0][1] * c[0][2]) / det
    lo = bands[band - 1] if band else 0.0
    mid = math.sqrt(lo * bands[band]) if lo else bands[band]
    share = "%7.2f" % (cb / (ca + cb)) if ca + cb > 0.2 else "%7s" % "-"
    print("%-22s %-16s %6d %6.2f %6.2f %6.2f %s %7.2f" % (cls, "%.0e-%.0e" % (lo, bands[band]), n, ca, cb, ca + cb,
                                                       share, dispatch_share(mid)))
