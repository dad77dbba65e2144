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
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

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


class Skip(Exception):
    """The case cannot run here (a tool is missing); meson reports exit 77 as SKIP."""


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


# ---------------------------------------------------------------- sweep, report, plan (issue 5)

REPORT_FLAGS = ["--out", "--profile", "--validation", "--token-budget", "--threads", "--no-sensitivity", "--quiet"]
SWEEP_FLAGS = ["--threads", "--out", "--format", "--no-wall-time", "--no-progress", "--quiet"]
PLAN_FLAGS = ["--model", "--tokens", "--days", "--budget", "--device-types", "--clusters", "--min-devices",
              "--max-devices", "--strategies", "--precision", "--micro-batch", "--price", "--top", "--threads"]


def case_help_report():
    top = run("--help").stdout
    for cmd in ("report", "sweep", "plan"):
        check(cmd in top, f"top-level help lists {cmd}")
    for cmd, flags in (("report", REPORT_FLAGS), ("sweep", SWEEP_FLAGS), ("plan", PLAN_FLAGS)):
        text = run(cmd, "--help").stdout
        for flag in flags:
            check(flag in text, f"{cmd} --help lists {flag}")
    run("sweep", "--format", "xml", expect=2)
    run("plan", "--tokens", "1e9", expect=2)  # no model
    run("plan", "--model", "gpt2-xxl", "--tokens", "1e9", expect=2)


def case_sweep():
    scen = os.path.join(ROOT, "scenarios", "bucket-sweep.yaml")
    a = run("sweep", scen, "--no-wall-time", "--threads", "1")
    b = run("sweep", scen, "--no-wall-time", "--threads", "2")
    check(a.stdout == b.stdout, "sweep CSV identical for 1 and 2 threads")
    check("\r" not in a.stderr and "[#" not in a.stderr, "no progress bar when stderr is not a terminal")
    check("points/s" in a.stderr, f"summary on stderr: {a.stderr}")
    rows = list(csv.DictReader(io.StringIO(a.stdout)))
    check(len(rows) == 18, f"18 points, got {len(rows)}")
    check(all(float(r["step_time_s"]) > 0 for r in rows if r["status"] == "ok"), "numeric step times")
    check({r["dps.bucket_cap"] for r in rows if r["strategy"] == "dps"} >= {"1 MiB", "200 MiB"}, "the grid")
    with tempfile.TemporaryDirectory() as d:
        run("sweep", scen, "--out", d, "--quiet")
        with open(os.path.join(d, "results.json")) as f:
            doc = json.load(f)
        check(len(doc["points"]) == 18 and [p["index"] for p in doc["points"]] == list(range(18)), "json points")
        with open(os.path.join(d, "results.csv"), newline="") as f:
            check(len(list(csv.reader(f))) == 19, "csv rows")
    j = json.loads(run("sweep", scen, "--format", "json").stdout)
    check(j["scenario"] == "bucket-sweep", "json on stdout")


def case_sweep_mpi():
    mpirun = shutil.which("mpirun")
    if not mpirun:
        raise Skip("mpirun is not installed (Debian: openmpi-bin); the MPI sweep path is not tested")
    scen = os.path.join(ROOT, "scenarios", "paper-hal.yaml")
    single = run("sweep", scen, "--no-wall-time", "--format", "json").stdout
    env = dict(os.environ, OMPI_MCA_btl_vader_single_copy_mechanism="none", OMPI_MCA_rmaps_base_oversubscribe="1")
    for fmt_ in ("json", "csv"):
        cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2", DPTWIN, "sweep", scen, "--no-wall-time",
               "--threads", "1", "--format", fmt_]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
        check(p.returncode == 0, f"mpirun sweep exited {p.returncode}\n{p.stderr[-3000:]}")
        if "built without MPI" in p.stderr:
            raise Skip("dptwin was built without MPI (Meson did not find it)")
        check("over 2 MPI ranks" in p.stderr, f"rank 0 reports 2 ranks: {p.stderr[-1000:]}")
        ref = single if fmt_ == "json" else run("sweep", scen, "--no-wall-time").stdout
        check(p.stdout == ref, f"merged {fmt_} output of 2 ranks equals the single-process output")


VALIDATION_JSON = {
    "schema": "dptwin-validation/1",
    "profile": "test",
    "cases": [{"label": "dps 2 ranks fp32", "params": {"strategy": "dps", "devices": 2},
               "predicted_step_s": 0.210, "measured_step_s": 0.200},
              {"label": "horovod 2 ranks fp32", "predicted_step_s": 0.260, "measured_step_s": 0.280},
              {"label": "sps 2 ranks fp32", "predicted_step_s": 0.300, "measured_step_s": 0.330}],
    "summary": {"mape_pct": 7.4, "worst_pct": 9.1, "kendall_tau": 1.0},
}


def make_report(d, scenario="pricing-budget.yaml", extra=()):
    val = os.path.join(d, "validation.json")
    with open(val, "w") as f:
        json.dump(VALIDATION_JSON, f)
    out = os.path.join(d, "report.html")
    p = run("report", os.path.join(ROOT, "scenarios", scenario), "--out", out, "--validation", val, *extra)
    return out, p


def case_report():
    with tempfile.TemporaryDirectory() as d:
        prof = os.path.join(d, "profile.yaml")
        with open(prof, "w") as f:
            f.write("name: test\ndevice:\n  matmul: {max: 0.6, half_work: 2e9}\n")
        out, p = make_report(d, extra=("--profile", prof, "--token-budget", "5e9"))
        check("fastest" in p.stdout and "cheapest" in p.stdout, f"summary on stdout: {p.stdout}")
        html = open(out).read()
        md = open(os.path.join(d, "report.md")).read()
        check(html.count("<svg") >= 8, f"charts: {html.count('<svg')}")
        for needle in ("Step time vs devices", "Throughput vs devices", "Scaling efficiency vs devices",
                       "Step time breakdown", "Peak memory per device vs capacity", "Cost per million tokens",
                       "Time to train", "least sensitive to slower links", "Predicted vs measured step time",
                       "calibration profile:", "5B tokens"):
            check(needle in html, f"report has {needle!r}")
        for bad in ("<script", "src=", "<link", "@import", "url("):
            check(bad not in html, f"report is self-contained: found {bad!r}")
        check(html.count("http") == html.count('xmlns="http://www.w3.org/2000/svg"'), "no http references")
        check(md.startswith("# Capacity-planning report") and "| fastest |" in md and "MAPE" in md, "markdown")
        # a bad profile is an input error naming the key
        with open(prof, "w") as f:
            f.write("device:\n  matmull: {max: 0.6}\n")
        p = run("report", "--out", os.path.join(d, "x.html"), "--profile", prof, expect=2)
        check("matmull" in p.stderr, p.stderr)


def png_stats(path):
    """(width, height, distinct colours, non-white pixel fraction) of an 8-bit RGB/RGBA PNG (stdlib only)."""
    with open(path, "rb") as f:
        data = f.read()
    check(data[:8] == b"\x89PNG\r\n\x1a\n", "a PNG file")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", body[:10])
            check(depth == 8 and ctype in (2, 6), f"8-bit RGB(A) PNG, got depth {depth} type {ctype}")
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    colours, nonwhite = set(), 0
    for y in range(height):
        ftype = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 255
            elif ftype == 2:
                line[i] = (line[i] + b) & 255
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ftype == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        if y % 4 == 0:  # sample every fourth row: enough to count colours, four times faster
            for x in range(0, stride, bpp * 2):
                px = bytes(line[x:x + 3])
                colours.add(px)
                nonwhite += px != b"\xff\xff\xff"
        prev = line
    sampled = ((height + 3) // 4) * ((width + 1) // 2)
    return width, height, len(colours), nonwhite / sampled


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def case_report_chromium():
    browser = chromium()
    if not browser:
        raise Skip("chromium is not installed (Debian: apt-get install chromium); the browser rendering "
                   "of the HTML report is not tested")
    with tempfile.TemporaryDirectory() as d:
        out, _ = make_report(d)
        profile = tempfile.mkdtemp(dir=d)
        common = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
                  "--user-data-dir=" + profile, "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>"]
        url = "file://" + out
        png = os.path.join(d, "shot.png")
        p = subprocess.run(common + ["--screenshot=" + png, "--window-size=1400,3000", "--hide-scrollbars", url],
                           capture_output=True, text=True, timeout=120)
        check(p.returncode == 0 and os.path.exists(png), f"screenshot failed ({p.returncode}): {p.stderr[-2000:]}")
        w, h, colours, ink = png_stats(png)
        check((w, h) == (1400, 3000), f"screenshot size {w}x{h}")
        check(colours >= 8, f"the page is not blank: {colours} distinct colours")
        check(ink > 0.03, f"the page is not blank: {ink:.3f} of pixels are not white")
        dom = subprocess.run(common + ["--dump-dom", url], capture_output=True, text=True, timeout=120)
        check(dom.returncode == 0, f"--dump-dom failed: {dom.stderr[-2000:]}")
        html = dom.stdout
        check(html.count("<svg") >= 8, f"rendered DOM has the charts: {html.count('<svg')} <svg>")
        for needle in ("step time (ms)", "throughput (tokens/s)", "scaling efficiency (%)", "devices",
                       "memory per device (GiB)", "class=\"legend-entry\"", "dps+amp", "capacity",
                       "Predicted vs measured step time"):
            check(needle in html, f"rendered DOM has {needle!r}")
        if os.environ.get("DPTWIN_KEEP_SCREENSHOT"):
            shutil.copy(png, os.environ["DPTWIN_KEEP_SCREENSHOT"])


def case_plan():
    p = run("plan", "--model", "gpt2", "--tokens", "10e9", "--days", "30", "--budget", "20000",
            "--clusters", "dgx-a100", "--max-devices", "16", "--precision", "bf16", "--micro-batch", "4,8")
    out = p.stdout
    for needle in ("FASTEST", "CHEAPEST", "Limits:", "top ", "dgx-a100", "time to train"):
        check(needle in out, f"plan output has {needle!r}:\n{out}")
    # too small a budget: no plan, a clear message, exit 1
    p = run("plan", "--model", "gpt2", "--tokens", "10e9", "--budget", "1", "--clusters", "dgx-a100",
            "--max-devices", "8", "--precision", "bf16", expect=1)
    check("No feasible configuration" in p.stdout and "budget" in p.stdout, p.stdout)
    # gpt2-xl in fp32 does not fit a 16 GB V100
    p = run("plan", "--model", "gpt2-xl", "--tokens", "1e9", "--device-types", "v100-sxm2-16gb",
            "--precision", "fp32", "--max-devices", "8", expect=1)
    check("does not fit in memory" in p.stdout, p.stdout)
    # a plan YAML
    with tempfile.TemporaryDirectory() as d:
        f = os.path.join(d, "plan.yaml")
        with open(f, "w") as fh:
            fh.write("model: gpt2\ntokens: 10e9\ndays: 30\nclusters: [dgx-a100]\nmax_devices: 8\n"
                     "precision: bf16\nmicro_batch: [4]\n")
        check("FASTEST" in run("plan", f).stdout, "plan from YAML")
        with open(f, "a") as fh:
            fh.write("bugdet: 5\n")
        p = run("plan", f, expect=2)
        check("bugdet" in p.stderr, p.stderr)


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
    except Skip as e:
        print(f"SKIP {case}: {e}")
        return 77
    print(f"PASS {case}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
