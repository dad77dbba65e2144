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
5. the same question by the passes' levels: per call kind (fp32 / bf16 GEMMs,
   fp32 / bf16 memory-class calls) and half decade of the case's time, a
   pass's log change of each case from its calibration's median over the
   passes, regressed (through the origin) on the pass's log changes of its
   kind's probe level and of the dispatch level (a level: the median of the
   pass's readings of that class, tens of readings, so its read noise
   dilutes far less than one reading's in 4), and the share b / (a + b)
   beside the kind's current dispatch share (sim::dispatch_share) at the
   band's middle. The passes of a calibration that sat in one state give
   no leverage; passes on a core slow on dispatch (rsb9-rsb12, rsb14, rsb15)
   do.
"""
import glob
import itertools
import json
import math
import os
import statistics
import sys


SHARES = {  # sim/device_profile.cpp: dispatch_share's kGemm and kMemory, at log10(seconds) -5.0, -4.5, ..., -1.0
    "gemm fp32": (1.0, 0.50, 0.45, 0.28, 0.20, 0.17, 0.12, 0.07, 0.0),
    "memory fp32": (1.0,) + (0.75,) * 8,
}


def dispatch_share(seconds, kind="gemm bf16"):  # sim/device_profile.cpp: dispatch_share
    if kind == "host copy":  # profile_fit.cpp: a copy follows its class alone
        return 0.0
    if kind in SHARES:
        if not seconds > 0:
            return SHARES[kind][0]
        xs = SHARES[kind]
        x = min(max((math.log10(seconds) + 5.0) / 0.5, 0.0), len(xs) - 1.0)
        i = min(int(x), len(xs) - 2)
        return xs[i] + (xs[i + 1] - xs[i]) * (x - i)
    all_dispatch, no_dispatch = 30e-6, 1e-3
    if not seconds > all_dispatch:
        return 1.0
    if seconds >= no_dispatch:
        return 0.0
    return math.log(no_dispatch / seconds) / math.log(no_dispatch / all_dispatch)


def kind_of(key, cls):
    """The call kind of a case whose probe class is `cls` (sim::CallKind; "host copy" for the memcpy rows), None
    for GELU rows."""
    if key[1] == "activation":
        return None
    if key[0] == "memcpy":
        return "host copy"
    if cls in ("matmul", "matmul_bf16"):
        return "gemm fp32" if cls == "matmul" else "gemm bf16"
    return "memory fp32" if key[2] in ("", "fp32") else "memory bf16"


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
        share = dispatch_share(s, kind_of(k, cls)) if blend else 0.0
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
        share = dispatch_share(meds[1][k], kind_of(k, cls)) if blend else 0.0
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

CLASS_KIND = {"matmul": "gemm fp32", "matmul_bf16": "gemm bf16"}  # "elementwise" pools both dtypes: shown as fp32's
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
                                                       share, dispatch_share(mid, CLASS_KIND.get(cls, "memory fp32"))))

print("\n5. a pass's change of a case against its pass's probe levels, by call kind")


def levels(c):
    """{probe class: the median of the pass's readings}, the dispatch one with the readings next to the cases
    (reference() leaves those out, as the fit's speed reference does; a level from the dispatch-class readings
    alone, a few tens a pass, reads the fp32 GEMMs' shares lower: 0.32 at 100 us against 0.49)."""
    by_class = {}
    for _, cls, probe, dispatch in c.values():
        by_class.setdefault(cls, []).append(probe)
        if dispatch:
            by_class.setdefault("dispatch", []).append(dispatch)
    for _, probe in c.plain:
        by_class.setdefault("dispatch", []).append(probe)
    return {cls: statistics.median(v) for cls, v in by_class.items()}


KIND_CLASS = {"gemm fp32": "matmul", "gemm bf16": "matmul_bf16", "memory fp32": "elementwise", "memory bf16": "elementwise"}
by_kind = {}
for passes in calibrations.values():
    lv = [levels(c) for c in passes]
    mid_level = {cls: statistics.median(math.log(l[cls]) for l in lv if cls in l) for cls in lv[0]}
    for k, (_, cls, _, _) in passes[0].items():
        kind = kind_of(k, cls) if cls != "dispatch" else None
        if kind not in KIND_CLASS or not all(k in c and c[k][1] == cls for c in passes):
            continue
        logs = [math.log(c[k][0]) for c in passes]
        med = statistics.median(logs)
        band = round(med / math.log(10) * 2) / 2
        probe = KIND_CLASS[kind]
        for c, l, y in zip(passes, lv, logs):
            if probe in l and "dispatch" in l:
                by_kind.setdefault((kind, band), []).append(
                    (math.log(l[probe]) - mid_level[probe], math.log(l["dispatch"]) - mid_level["dispatch"], y - med))
print("%-12s %-8s %6s %6s %6s %6s %7s %7s" % ("kind", "seconds", "passes", "a", "b", "a+b", "share", "current"))
for (kind, band), rows in sorted(by_kind.items()):
    if len(rows) < 20:
        continue
    s11 = sum(r[0] * r[0] for r in rows)
    s22 = sum(r[1] * r[1] for r in rows)
    s12 = sum(r[0] * r[1] for r in rows)
    det = s11 * s22 - s12 * s12
    if not det > 0:
        continue
    s1y = sum(r[0] * r[2] for r in rows)
    s2y = sum(r[1] * r[2] for r in rows)
    ca, cb = (s22 * s1y - s12 * s2y) / det, (s11 * s2y - s12 * s1y) / det
    share = "%7.2f" % min(max(cb / (ca + cb), 0.0), 1.0) if ca + cb > 0.2 else "%7s" % "-"
    print("%-12s 1e%-6.1f %6d %6.2f %6.2f %6.2f %s %7.2f" % (kind, band, len(rows), ca, cb, ca + cb, share,
                                                         dispatch_share(10 ** band, kind)))
