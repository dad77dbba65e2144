#!/usr/bin/env python3
"""Recorded calibration pairs refitted by the current fit (issue 4's repeatability).

Not part of `meson test` (a few seconds a pair):
  bench/calibration_corpus.py DPTWIN [--out DIR] [PAIR.tar.xz ...]
(DPTWIN: a binary with the calibrate/validate subcommands, e.g. build/apps/dptwin;
without archives, every bench/corpus/*.tar.xz; --out keeps the refitted
profiles and each pair's full comparison, NAME.txt, in DIR, which must be
new or empty.)

A pair is two calibrations run in a row by bench/calibration_repeatability.py:
the raw pass documents of both (`NAME/profile-{1,2}.raw/`, as `dptwin calibrate`
keeps them) in one archive. A repeatability run takes half an hour and its host
state cannot be called up again, so the pairs that showed something (a large
change of the host between the two calibrations above all) are kept here: any
change to the fit can be scored against them in a minute each, instead of
waiting for such a host again. Each pair is refitted from its passes
(`dptwin calibrate --input`), then compared by calibration_repeatability.py
`--reuse` (and `--states-of` bench/corpus/runs-*.json.xz, a `validate
--run-states` run, where present).

Prints one line per pair: the second calibration's speed reference against
the first's (the host's change between them, by probe), and the largest
difference of the two profiles' predictions as calibrated, at one state, and
at the recorded runs' states. Exits 1 when a pair differs by more than 5% at
one state (none does with the fit of 2026-12-07 12:55, rsb11's 4.6% the
largest, 5.5% before it; that fit's fp32 dispatch shares were read off
rsb8-rsb15's passes, so for them the figure is in sample).
"""
import glob
import lzma
import os
import re
import subprocess
import sys
import tarfile
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
if len(sys.argv) < 2:
    sys.exit(__doc__)
dptwin, args = sys.argv[1], sys.argv[2:]
if not (os.path.isfile(dptwin) and os.access(dptwin, os.X_OK)):
    sys.exit("%s: not an executable (the dptwin binary, e.g. build/apps/dptwin)" % dptwin)
keep = None
if "--out" in args:
    i = args.index("--out")
    if i + 1 >= len(args):
        sys.exit("--out needs a directory")
    keep = args[i + 1]
    del args[i:i + 2]
    if os.path.isdir(keep) and os.listdir(keep):
        sys.exit("--out %s: not empty (the pairs are unpacked and refitted there; give a new directory)" % keep)
for a in args:
    if not os.path.isfile(a):
        sys.exit("%s: no such pair archive" % a)
archives = args or sorted(glob.glob(os.path.join(here, "corpus", "*.tar.xz")),
                          key=lambda p: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p)])
runs = glob.glob(os.path.join(here, "corpus", "runs-*.json.xz"))
if len(runs) > 1:
    sys.exit("more than one recorded validation under bench/corpus (%s): keep one" % ", ".join(sorted(runs)))
if not archives:
    sys.exit("no pair archives under %s" % os.path.join(here, "corpus"))


def speed_reference(profile):
    """{probe: seconds} of the profile's `speed_reference:` line."""
    for line in open(profile):
        if line.strip().startswith("speed_reference:"):
            units = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
            return {k: float(v) * units[u] for k, v, u in re.findall(r"(\w+): ([\d.eE+-]+) (s|ms|us|ns)\b", line)}
    return {}


def summary(text, prefix):
    m = re.search(r"^%s.*?largest difference ([\d.]+)%%" % re.escape(prefix), text, re.M)
    return float(m.group(1)) if m else float("nan")


probes = ("dispatch", "matmul", "matmul_bf16", "elementwise")
print("%-24s %s %9s %9s %9s" % ("pair", " ".join("%11s" % p for p in probes), "as calib", "one state", "run states"))
failed = False
with tempfile.TemporaryDirectory(prefix="dptwin-corpus-") as scratch:
    tmp = keep or scratch
    os.makedirs(tmp, exist_ok=True)
    states = []
    if runs:
        states = ["--states-of", os.path.join(tmp, "runs.json")]
        with lzma.open(runs[0]) as src, open(states[1], "wb") as dst:
            dst.write(src.read())
    for archive in archives:
        with tarfile.open(archive) as tar:
            if hasattr(tarfile, "data_filter"):  # Python 3.12, 3.11.4 and later
                tar.extractall(tmp, filter="data")
            else:
                tar.extractall(tmp)
            names = {m.name.split("/")[0] for m in tar.getmembers()}
        if len(names) != 1:
            sys.exit("%s: expected one top folder, found %s" % (archive, sorted(names)))
        pair = os.path.join(tmp, names.pop())
        for i in (1, 2):
            raw = os.path.join(pair, "profile-%d.raw" % i)
            docs = sorted(glob.glob(os.path.join(raw, "compute-p*.json")) +
                          glob.glob(os.path.join(raw, "comm-gloo-*-p*.json")))
            if not docs:
                sys.exit("%s: no pass documents under profile-%d.raw" % (archive, i))
            fit = subprocess.run([dptwin, "calibrate", "--input", ",".join(docs), "--out",
                                  os.path.join(pair, "profile-%d.yaml" % i)], capture_output=True, text=True)
            if fit.returncode != 0:
                sys.exit("%s: refitting profile-%d failed:\n%s" % (archive, i, fit.stderr[-2000:]))
        done = subprocess.run([sys.executable, os.path.join(here, "calibration_repeatability.py"), dptwin, pair,
                               "--reuse"] + states, capture_output=True, text=True)
        if "at one state:" not in done.stdout:
            sys.exit("%s: the comparison failed:\n%s" % (archive, done.stderr[-2000:]))
        with open(os.path.join(tmp, os.path.basename(pair) + ".txt"), "w") as f:
            f.write(done.stdout)
        a, b = (speed_reference(os.path.join(pair, "profile-%d.yaml" % i)) for i in (1, 2))
        ratios = ["%10.3fx" % (b[p] / a[p]) if a.get(p) and b.get(p) else "%11s" % "-" for p in probes]
        one = summary(done.stdout, "at one state:")
        failed |= not one <= 5.0
        print("%-24s %s %8.1f%% %8.1f%% %9.1f%%" % (os.path.basename(pair), " ".join(ratios),
                                                   summary(done.stdout, "as calibrated:"), one,
                                                   summary(done.stdout, "at the runs' states")))
sys.exit(1 if failed else 0)
