#!/usr/bin/env python3
"""Calibration repeatability (issue 4): two calibrations in a row should give
predictions within 5% of each other on the default matrix.

Not part of `meson test` (about 9 minutes on 2 cores; about 22 with --passes 3 (rb34), 38 with --passes 5 (rb35)):
  bench/calibration_repeatability.py DPTWIN OUT_DIR [calibrate options...]
(DPTWIN: a binary with the calibrate/validate subcommands, e.g. build/apps/dptwin;
calibrate options such as --passes 3 are passed through; `--reuse` as the
first of them compares OUT_DIR/profile-1.yaml and profile-2.yaml as they are;
`--states-of V/validation.json` (a `validate --run-states` run) also compares
both profiles' predictions of that validation's runs at the machine states
its runs read (`validate --replay`; `--states-matrix M.yaml` names the matrix
it ran, default the built-in one; cases that failed are left out).)

Prints, per case, the predictions of both profiles twice: as they are (each at
the machine state its calibration found) and with the second profile brought
to the first one's state (`validate --predict-only --at-speed-of`: its speed
reference and its spread of speeds, `speed_states`), which removes the host's
change between the two calibrations and leaves the calibration's own spread;
and each calibration's host steal. Then, which figures of the calibration
moved: the second profile as calibrated with one part of it taken from the
first profile, for every part, with the largest difference left; the parts
that close most of the gap are the calibration's unstable figures. A part is
a group of `device:` keys that only mean something together (a peak and the
efficiency tables relative to it; the speed reference and states), another
`device:` key, or one `network:` table. Exits 1 when the at-one-state
comparison differs by more than 5% somewhere.
"""
import json
import os
import subprocess
import sys

dptwin, out = sys.argv[1], sys.argv[2]
extra = sys.argv[3:]
def take(flag):
    if flag not in extra:
        return None
    i = extra.index(flag)
    value = extra[i + 1]
    del extra[i:i + 2]
    return value


states_of, states_matrix = take("--states-of"), take("--states-matrix")
os.makedirs(out, exist_ok=True)
prof = [os.path.join(out, "profile-%d.yaml" % i) for i in (1, 2)]
reuse = extra[:1] == ["--reuse"]
for p in prof:
    if not reuse:
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
if states_of:
    # Both profiles predict the recorded runs at the states those runs read.
    replayed = []
    for i, p in enumerate(prof):
        vdir = os.path.join(out, "replay-%d" % (i + 1))
        # Exits 1 when a case failed (in the recorded runs): those are left out below.
        with open(os.path.join(out, "replay-%d.log" % (i + 1)), "w") as log:
            subprocess.run([dptwin, "validate"] + ([states_matrix] if states_matrix else []) +
                           ["--profile", p, "--replay", states_of, "--out", vdir], stdout=log, stderr=log)
        path = os.path.join(vdir, "validation.json")
        replayed.append(json.load(open(path)) if os.path.exists(path) else {"cases": [], "summary": {}})
    a, b = ({c["label"]: c["predicted_step_s"] for c in r["cases"] if c.get("status") == "ok"} for r in replayed)
    d = {k: spread(b[k], a[k]) for k in a if k in b}
    if d:
        print("at the runs' states of %s: largest difference %.1f%%, %d/%d cases within 5%%; MAPE %.1f%% / %.1f%%"
              % (states_of, max(d.values()), sum(v <= 5 for v in d.values()), len(d),
                 replayed[0]["summary"].get("mape_pct", float("nan")), replayed[1]["summary"].get("mape_pct", float("nan"))))
    else:
        print("at the runs' states of %s: no case replayed by both profiles (see %s/replay-*.log)" % (states_of, out))


def parts(path):
    """The profile YAML (profile_yaml's layout) as {part: lines}: every `device:` key
    with its indented lines, every `network:` table by collective, link kind and ranks;
    "" holds the lines before and between them, kept in place."""
    out, order, section, key = {}, [], None, None
    for line in open(path).read().splitlines(keepends=True):
        if not line.startswith(" "):
            section, key = line.split(":")[0], None
            key = "head:" + line
        elif section == "device" and line.startswith("  ") and not line.startswith("   "):
            key = "device." + line.strip().split(":")[0]
        elif section == "network" and line.startswith("    - collective:"):
            key = "network.%s" % line.split(":", 1)[1].strip()
        elif section == "network" and key and key.startswith("network.") and line.strip().split(":")[0] in ("link_kind", "ranks"):
            old = key
            key = "%s %s" % (key, line.strip().replace(": ", "="))
            out[key] = out.pop(old)
            order[order.index(old)] = key
        elif section == "network" and line.startswith("  ") and not line.startswith("   "):
            key = "head:" + line
        if key not in out:
            out[key] = []
            order.append(key)
        out[key].append(line)
    return out, order


mine, order = parts(prof[1])
theirs, _ = parts(prof[0])
# Keys whose figures are relative to one another (profile_fit: tables against their peak).
groups = {
    "fp32 compute (fp32_peak, matmul, batched_matmul, activation*)":
        ["fp32_peak", "matmul", "batched_matmul", "activation", "activation_backward", "activation_half",
         "activation_half_backward"],
    "bf16 compute (bf16_peak, matmul_half, batched_matmul_half, matmul_o1)":
        ["bf16_peak", "matmul_half", "batched_matmul_half", "matmul_o1"],
    "memory (memory_bandwidth, memory, memory_half)": ["memory_bandwidth", "memory", "memory_half"],
    "speed (speed_reference, speed_states)": ["speed_reference", "speed_states"],
}
grouped = {"device." + k for keys in groups.values() for k in keys}
swaps = [(name, ["device." + k for k in keys]) for name, keys in groups.items()]
swaps += [(k, [k]) for k in order if k.startswith(("device.", "network.")) and k not in grouped]
rows = []
for name, keys in swaps:
    keys = [k for k in keys if k in mine and k in theirs and mine[k] != theirs[k]]
    if not keys:
        continue
    path = os.path.join(out, "swap.yaml")
    with open(path, "w") as f:
        f.write("".join("".join(theirs[x] if x in keys else mine[x]) for x in order))
    swapped = predict("predict-swap", ["--profile", path])
    worst = max(spread(c["predicted_step_s"], a["predicted_step_s"]) for a, c in zip(first, swapped))
    rows.append((worst, name))
print("\nprofile 2 as calibrated with one part of profile 1 (largest difference left; %.1f%% with none):" % worst_abs)
for worst, k in sorted(rows):
    print("  %6.1f%%  %s" % (worst, k))
sys.exit(0 if worst_at <= 5.0 else 1)
