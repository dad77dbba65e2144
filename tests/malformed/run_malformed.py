#!/usr/bin/env python3
"""Malformed-input corpus (issue 6): every case must be refused cleanly.

usage: run_malformed.py DPTWIN CASES_DIR [NAME...] [--show]

For every CASES_DIR/NAME.expect, runs `dptwin simulate CASES_DIR/NAME.yaml` and
checks: exit status 2 (bad input), no signal (no crash), done within the time
limit (no hang), nothing on stdout, stderr starts with "error: ", and every
non-empty, non-# line of NAME.expect occurs in stderr (file:line:col, key path,
words of the message). Files under CASES_DIR/files/ are referenced by the
cases (cluster files, calibration profiles); they are not run on their own.
--show prints each case's stderr (to write a new .expect). Standard library only.
"""
import concurrent.futures
import os
import subprocess
import sys
import time

TIME_LIMIT_S = 60


def run_case(dptwin, cases_dir, name):
    path = os.path.join(cases_dir, name + ".yaml")
    with open(os.path.join(cases_dir, name + ".expect"), encoding="utf-8") as f:
        expected = [l.rstrip("\n") for l in f if l.strip() and not l.startswith("#")]
    t0 = time.monotonic()
    try:
        p = subprocess.run([dptwin, "simulate", path, "--format", "json", "--no-wall-time"], capture_output=True,
                           text=True, errors="replace", timeout=TIME_LIMIT_S)
    except subprocess.TimeoutExpired:
        return name, [f"no answer within {TIME_LIMIT_S} s (hang?)"], ""
    took = time.monotonic() - t0
    problems = []
    if p.returncode < 0:
        problems.append(f"killed by signal {-p.returncode} (crash)")
    elif p.returncode != 2:
        problems.append(f"exit status {p.returncode}, expected 2")
    if p.stdout:
        problems.append(f"stdout is not empty: {p.stdout[:200]!r}")
    if not p.stderr.startswith("error: "):
        problems.append("stderr does not start with 'error: '")
    for e in expected:
        if e not in p.stderr:
            problems.append(f"missing in message: {e!r}")
    if not expected:
        problems.append("the .expect file lists nothing")
    return name, problems, f"[{took:.2f}s] {p.stderr.strip()}"


def main():
    args = [a for a in sys.argv[1:] if a != "--show"]
    show = "--show" in sys.argv
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    dptwin, cases_dir, only = args[0], args[1], args[2:]
    names = sorted(f[:-len(".expect")] for f in os.listdir(cases_dir) if f.endswith(".expect"))
    if only:
        names = [n for n in names if n in only]
    orphans = sorted(f for f in os.listdir(cases_dir) if f.endswith(".yaml") and f[:-5] not in names and not only)
    failures = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        for name, problems, err in pool.map(lambda n: run_case(dptwin, cases_dir, n), names):
            if show:
                print(f"--- {name}\n{err}")
            if problems:
                failures += 1
                print(f"FAIL {name}:\n  " + "\n  ".join(problems) + f"\n  stderr: {err}")
    for o in orphans:
        failures += 1
        print(f"FAIL {o}: a case without a .expect file")
    print(f"{len(names) - failures} of {len(names)} malformed cases refused as expected")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
