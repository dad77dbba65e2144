#!/usr/bin/env python3
"""End-to-end tests of the `dptwin` CLI (run by `meson test`, suite e2e).

usage: run_e2e.py DPTWIN SOURCE_ROOT CASE

Each CASE runs the built binary and checks its outputs; exit 0 = pass. Uses the
standard library only.
"""
import csv
import io
import json
import os
import subprocess
import sys
import tempfile

DPTWIN = ""
ROOT = ""

# Every field of a point in the JSON output (documented in scenarios/README.md, "Outputs").
POINT_FIELDS = ["index", "params", "status", "message", "devices_used", "global_batch_samples", "tokens_per_step",
                "step_time_s", "tokens_per_s", "samples_per_s", "scaling_efficiency", "mfu", "breakdown", "memory",
                "cost_per_million_tokens_usd", "time_to_train_s", "cost_to_train_usd", "simulator", "timeline"]
BREAKDOWN_FIELDS = ["compute_s", "exposed_comm_s", "hidden_comm_s", "optimizer_s", "overhead_s"]
MEMORY_FIELDS = ["weights_bytes", "gradients_bytes", "optimizer_state_bytes", "master_weights_bytes",
                 "activations_bytes", "workspace_bytes", "comm_buffers_bytes", "gathered_outputs_bytes",
                 "framework_reserve_bytes", "peak_bytes", "capacity_bytes", "device", "oom"]
SIMULATOR_FIELDS = ["events", "simulated_devices", "wall_seconds"]
STRATEGIES = ["single", "sps", "dps", "horovod", "dps+amp", "horovod+amp"]
COUNTS = [1, 2, 4, 8, 16, 32, 64]
SIMULATE_FLAGS = ["--format", "--out", "--trace", "--threads", "--point", "--no-wall-time", "--quiet"]


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def run(*args, expect=0):
    p = subprocess.run([DPTWIN, *args], capture_output=True, text=True, timeout=300)
    if expect is not None and p.returncode != expect:
        raise Failure(f"`dptwin {' '.join(args)}` exited {p.returncode}, expected {expect}\n"
                      f"stdout:\n{p.stdout[-3000:]}\nstderr:\n{p.stderr[-3000:]}")
    return p


def paper_json():
    return json.loads(run("simulate", "--format", "json", "--no-wall-time").stdout)


def case_paper_json():
    doc = paper_json()
    check(doc["scenario"] == "paper-hal", "scenario name")
    points = doc["points"]
    check(len(points) == 42, f"expected 42 points, got {len(points)}")
    seen = set()
    for p in points:
        for f in POINT_FIELDS:
            check(f in p, f"point {p.get('index')}: missing field {f}")
        for f in BREAKDOWN_FIELDS:
            check(f in p["breakdown"], f"point {p['index']}: missing breakdown.{f}")
        for f in MEMORY_FIELDS:
            check(f in p["memory"], f"point {p['index']}: missing memory.{f}")
        for f in SIMULATOR_FIELDS:
            check(f in p["simulator"], f"point {p['index']}: missing simulator.{f}")
        check(p["status"] in ("ok", "oom", "infeasible"), f"point {p['index']}: status {p['status']}")
        for f in ("model", "cluster", "devices", "strategy"):
            check(f in p["params"], f"point {p['index']}: missing params.{f}")
        if p["status"] == "ok":
            for f in ("step_time_s", "tokens_per_s", "samples_per_s", "scaling_efficiency", "mfu"):
                check(isinstance(p[f], (int, float)) and p[f] > 0, f"point {p['index']}: {f} = {p[f]}")
            for f in BREAKDOWN_FIELDS:
                check(isinstance(p["breakdown"][f], (int, float)), f"point {p['index']}: breakdown.{f}")
        else:
            check(p["step_time_s"] is None, f"point {p['index']}: {p['status']} but timed")
        check(p["memory"]["peak_bytes"] > 0 and p["memory"]["capacity_bytes"] > 0, "memory figures")
        seen.add((p["params"]["strategy"], int(p["params"]["devices"])))
        if p["params"]["strategy"] == "single":
            check(p["devices_used"] == 1, "single must run on one device")
    check(seen == {(s, n) for s in STRATEGIES for n in COUNTS}, "every strategy at every count")
    # The paper's model at its batch fits in a 16 GB V100.
    check(all(not p["memory"]["oom"] for p in points), "the paper's model must fit")


def case_deterministic():
    a = run("simulate", "--format", "json", "--no-wall-time", "--threads", "1").stdout
    b = run("simulate", "--format", "json", "--no-wall-time", "--threads", "2").stdout
    check(a == b, "identical inputs must give byte-identical JSON")


def case_out_dir():
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "res")
        p = run("simulate", os.path.join(ROOT, "scenarios", "paper-hal.yaml"), "--out", out, "--quiet")
        check(p.stdout == "", "--quiet prints nothing")
        for f in ("result.json", "result.csv", "result.txt"):
            check(os.path.getsize(os.path.join(out, f)) > 0, f"{f} written")
        with open(os.path.join(out, "result.csv"), newline="") as f:
            rows = list(csv.reader(f))
        header = rows[0]
        check(header[:5] == ["index", "model", "cluster", "devices", "strategy"], f"csv header {header[:5]}")
        for c in ("status", "step_time_s", "tokens_per_s", "samples_per_s", "scaling_efficiency", "mfu",
                  "compute_s", "exposed_comm_s", "hidden_comm_s", "optimizer_s", "overhead_s",
                  "memory_peak_bytes", "memory_capacity_bytes", "oom", "cost_per_million_tokens_usd",
                  "time_to_train_s", "cost_to_train_usd", "wall_seconds"):
            check(c in header, f"csv column {c}")
        check(len(rows) == 43, f"csv rows {len(rows)}")
        check(all(len(r) == len(header) for r in rows), "every csv row has every column")
        with open(os.path.join(out, "result.txt")) as f:
            txt = f.read()
        check("scenario: paper-hal" in txt and "horovod+amp" in txt, "table text")
        with open(os.path.join(out, "result.json")) as f:
            check(len(json.load(f)["points"]) == 42, "json points")
        # stdout formats
        csv_out = run("simulate", "--format", "csv").stdout
        check(csv_out.startswith("index,model,cluster,devices,strategy"), "csv on stdout")
        check(len(list(csv.reader(io.StringIO(csv_out)))) == 43, "csv rows on stdout")
        table = run("simulate").stdout
        check("step ms" in table and "dps+amp" in table, "default table")


def intervals(events, pid, cat):
    return [(e["ts"], e["ts"] + e["dur"]) for e in events
            if e.get("ph") == "X" and e["pid"] == pid and e.get("cat") == cat]


def case_trace():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.json")
        run("simulate", "--trace", path, "--quiet")
        with open(path) as f:
            doc = json.load(f)
        check(doc.get("displayTimeUnit") == "ms", "displayTimeUnit")
        events = doc["traceEvents"]
        xs = [e for e in events if e.get("ph") == "X"]
        check(len(xs) > 0, "trace has X events")
        for e in xs:
            for k in ("name", "cat", "ts", "dur", "pid", "tid", "args"):
                check(k in e, f"event field {k}")
        names = {e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
        check("device 0" in names, f"process names {names}")

        # dps at 8 GPUs: backward compute overlaps bucket allreduces on the same device.
        pts = paper_json()["points"]
        k = next(p["index"] for p in pts if p["params"]["strategy"] == "dps" and p["params"]["devices"] == "8")
        path2 = os.path.join(d, "dps.json")
        run("simulate", "--trace", path2, "--point", str(k), "--quiet")
        with open(path2) as f:
            events = json.load(f)["traceEvents"]
        pname = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
        check("links" in pname.values(), f"a links process: {sorted(pname.values())}")
        dev0 = next(pid for pid, n in pname.items() if n == "device 0")
        bwd = intervals(events, dev0, "backward")
        comm = intervals(events, dev0, "communication")
        check(bwd and comm, "device 0 has backward and communication events")
        overlap = any(b0 < c1 and c0 < b1 for (b0, b1) in bwd for (c0, c1) in comm)
        check(overlap, "dps: backward compute overlaps a bucket allreduce")

        run("simulate", "--trace", path, "--point", "999", expect=2)


def case_list():
    for what in ("presets", "models", "strategies", "devices", "scenarios"):
        out = run("list", what).stdout
        check(len(out.strip().splitlines()) >= (1 if what == "scenarios" else 2), f"list {what} prints rows")
    strategies = run("list", "strategies").stdout
    for s in STRATEGIES:
        check(any(line.split()[0] == s for line in strategies.splitlines()), f"strategy {s} listed")
    check("hal-v100" in run("list", "presets").stdout, "hal-v100 preset listed")
    check("106331904" in run("list", "models").stdout, "paper model listed with its parameter count")
    check("v100-sxm2-16gb" in run("list", "devices").stdout, "devices listed")
    check("paper-hal" in run("list", "scenarios").stdout, "builtin scenario listed")
    run("list", "bogus", expect=2)
    run("list", expect=2)


def case_help():
    top = run("--help").stdout
    for cmd in ("simulate", "list", "exec", "prepare-data"):
        check(cmd in top, f"top-level help lists {cmd}")
    sim = run("simulate", "--help").stdout
    for flag in SIMULATE_FLAGS:
        check(flag in sim, f"simulate --help lists {flag}")
    lst = run("list", "--help").stdout
    check("presets" in lst and "strategies" in lst, "list --help shows the choices")
    check(run("--version").stdout.startswith("dptwin "), "--version")
    run(expect=2)  # a command is required
    run("simulate", "--format", "xml", expect=2)
    run("frobnicate", expect=2)


def expect_input_error(file, line, key):
    path = os.path.join(ROOT, "tests", "e2e", "bad", file)
    p = run("simulate", path, expect=2)
    err = p.stderr
    check(err.startswith("error: "), f"message starts with 'error: ': {err}")
    check(f"{file}:{line}:" in err, f"message names {file}:{line}: {err}")
    check(f"'{key}'" in err, f"message names key {key}: {err}")
    check(p.stdout == "", "nothing on stdout")
    return err


def case_bad_inputs():
    err = expect_input_error("unknown_key.yaml", 7, "micro_bach")
    check("did you mean 'micro_batch'" in err, err)
    expect_input_error("wrong_type.yaml", 5, "devices[1]")
    err = expect_input_error("unknown_preset.yaml", 4, "cluster")
    check("hal-v100" in err, err)
    err = expect_input_error("too_many_devices.yaml", 5, "devices[1]")
    check("at most 64" in err, err)
    expect_input_error("bad_knob.yaml", 9, "options.dps.fusion_threshold")
    p = run("simulate", os.path.join(ROOT, "tests", "e2e", "bad", "does-not-exist.yaml"), expect=2)
    check("cannot open" in p.stderr, p.stderr)


def case_shipped_scenarios():
    d = os.path.join(ROOT, "scenarios")
    names = sorted(f for f in os.listdir(d) if f.endswith(".yaml"))
    check(len(names) >= 7, f"scenarios shipped: {names}")
    for f in names:
        doc = json.loads(run("simulate", os.path.join(d, f), "--format", "json").stdout)
        check(len(doc["points"]) > 0, f"{f}: points")
        check(any(p["status"] == "ok" for p in doc["points"]), f"{f}: at least one point runs")
        if f == "pricing-budget.yaml":
            check(all(p["time_to_train_s"] is not None and p["cost_to_train_usd"] is not None
                      for p in doc["points"] if p["status"] == "ok"), "pricing: time and cost to train")


CASES = {name[len("case_"):]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    global DPTWIN, ROOT
    if len(sys.argv) != 4 or sys.argv[3] not in CASES:
        print(__doc__ + "\ncases: " + ", ".join(CASES), file=sys.stderr)
        return 2
    DPTWIN, ROOT, case = os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3]
    try:
        CASES[case]()
    except Failure as e:
        print(f"FAIL {case}: {e}", file=sys.stderr)
        return 1
    print(f"PASS {case}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
