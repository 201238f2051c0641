#!/usr/bin/env python3
"""ipcpipe-bench's outputs on host memory (no GPU needed): --csv, --plot,
--compare, the options that go with them, and the progress line that only a
terminal gets.  Checks formats and counts, never timing values.

    check_bench.py MODE BENCH [INFO] [OUTDIR]

Modes: csv, plot, compare-host, compare-nogpu (skips, 77, where a GPU is
usable: there the references really run), options, progress, trace (INFO
is then scripts/trace_stats.py, run over a trace of a staged case),
mailbox, adapt, load (runs the load where a GPU is usable), ompi (Open
MPI's rows of --compare on host memory; skips, 77, without mpirun), ahead
(--ahead's windows back to back)."""
import json
import math
import os
import re
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET

from benchcheck import (FIELDS, LISTED, PATHS, REFS, SMALL, SVG, Fail, check,
                        check_run, gpu_usable, no_progress, read_csv, run)
from check_bench_ompi import check_spread, mode_compare_host, mode_ompi
from check_bench_refs import mode_nccl_ungrouped, mode_stream_wait

def mode_csv(bench):
    p = run(bench, SMALL + ["--csv"])
    no_progress(p, "--csv")
    header, rows = read_csv(p.stdout)
    check(header == FIELDS, f"CSV header {header}\nexpected {FIELDS}")
    check(len(rows) == 2 * len(PATHS),
          f"{len(rows)} CSV rows, expected {2 * len(PATHS)}:\n{p.stdout}")
    for r in rows:
        check(len(r) == len(FIELDS), f"row with {len(r)} fields: {r}")
        if r["case"].startswith("stream:"):
            # The stream-ordered calls take GPU memory: waived, saying so.
            check(r["status"] == "waived" and "GPU memory" in r["reason"],
                  f"{r['case']}: {r['status']} {r['reason']!r} on host memory")
            continue
        check(r["status"] == "ok", f"{r['case']}: status {r['status']}")
        check_spread(r)
        check(r["verified"] == "true",
              f"{r['case']}: verified is {r['verified']!r}, not true")
        check(r["reference"] == "false", f"{r['case']}: marked a reference")
        # Host rows: the fastest of one thread and the library's queues'
        # worth of threads, with memcpy or non-temporal stores, one way;
        # both directions at once, either copy, for bidir.
        want_ceil = ({"memcpy-bidir", "nt-bidir"}
                     if r["case"].startswith("bidir")
                     else {"memcpy", "memcpy-par", "nt-par"})
        check(r["ceiling_kind"] in want_ceil,
              f"{r['case']}: ceiling {r['ceiling_kind']!r}, expected one of "
              f"{sorted(want_ceil)}")
    got = sorted(r["case"] for r in rows)
    want = sorted(f"{p}:{s}" for p in PATHS for s in ("4K", "1M"))
    check(got == want, f"cases {got}, expected {want}")
    # The JSON's cases carry the same fields (nested ones flattened), after
    # what made them.
    doc = json.loads(run(bench, SMALL + ["--json"],
                         env=dict(os.environ, IPCPIPE_EAGER="16K")).stdout)
    # Every IPCPIPE_* variable of the environment is recorded: the one the
    # test sets, and any the caller's environment holds (scripts/test.sh's
    # own under gpu-check.sh), but not the launcher's rank, size and job.
    launcher = ("IPCPIPE_RANK", "IPCPIPE_SIZE", "IPCPIPE_JOB")
    env = {k: v for k, v in os.environ.items()
           if k.startswith("IPCPIPE_") and k not in launcher}
    check_run(doc.get("run"), {**env, "IPCPIPE_EAGER": "16K"})
    j = doc["cases"]
    check(len(j) == len(rows), f"{len(j)} JSON objects, {len(rows)} CSV rows")
    for obj in j:
        keys = []
        for k, v in obj.items():
            sub = [f for f in FIELDS if f.startswith(k + ".")]
            if sub and isinstance(v, dict):
                keys += [f"{k}.{s}" for s in v]
            elif sub:
                check(v is None, f"JSON {k} is {v!r}")
                keys += sub
            else:
                keys.append(k)
        check(keys == FIELDS, f"JSON fields {keys}\nCSV fields {FIELDS}")
    return 0


def svg_series(path):
    root = ET.parse(path).getroot()
    check(root.tag == SVG + "svg", f"root element {root.tag}")
    check(root.get("version") == "1.1", "not SVG 1.1")
    series, ceilings = [], []
    for pl in root.iter(SVG + "polyline"):
        title = pl.find(SVG + "title")
        check(title is not None and title.text, "a polyline without a title")
        pts = pl.get("points", "").split()
        check(pts, f"{title.text}: no points")
        for pt in pts:
            x, y = (float(v) for v in pt.split(","))
            check(0 <= x <= float(root.get("width")) and
                  0 <= y <= float(root.get("height")),
                  f"{title.text}: point {pt} outside the picture")
        if pl.get("class") == "series":
            series.append(title.text)
        elif pl.get("class") == "ceiling":
            check("stroke-dasharray" in pl.attrib,
                  f"{title.text}: a ceiling not dashed")
            ceilings.append(title.text)
        else:
            raise Fail(f"polyline of class {pl.get('class')!r}")
    legends = [g for g in root.iter(SVG + "g") if g.get("class") == "legend"]
    check(len(legends) == 1, f"{len(legends)} legends")
    texts = ["".join(t.itertext()) for t in legends[0].iter(SVG + "text")]
    xlabels = [g for g in root.iter(SVG + "g") if g.get("class") == "x-labels"]
    check(xlabels, "no size labels")
    labels = ["".join(t.itertext()) for t in xlabels[0].iter(SVG + "text")]
    return series, ceilings, texts, labels


def mode_plot(bench, outdir):
    os.makedirs(outdir, exist_ok=True)
    svg = os.path.join(outdir, "bench-plot.svg")
    if os.path.exists(svg):
        os.unlink(svg)
    p = run(bench, SMALL + ["--csv", "--plot", svg])
    _, rows = read_csv(p.stdout)
    series, ceilings, legend, labels = svg_series(svg)
    want = sorted({r["path"] for r in rows if r["status"] == "ok"})
    check(sorted(series) == want, f"series {series}, expected {want}")
    check(len(series) == len(set(series)), f"a series twice: {series}")
    wantc = sorted({"ceiling: " + r["ceiling_kind"] for r in rows
                    if r["ceiling_kind"]})
    check(sorted(ceilings) == wantc, f"ceilings {ceilings}, expected {wantc}")
    for name in series + ceilings:
        check(name in legend, f"{name} missing from the legend {legend}")
    for lab in ("4K", "1M"):
        check(lab in labels, f"size label {lab} missing: {labels}")
    # The table and JSON runs write the same kind of file.
    for extra in ([], ["--json"]):
        os.unlink(svg)
        run(bench, SMALL + extra + ["--plot", svg])
        s2, c2, _, _ = svg_series(svg)
        check(sorted(s2) == want, f"{extra or 'table'}: series {s2}")
    # --plot-log: the GB/s axis in whole decades, labelled at 1 and 5 of
    # each; the same series.
    os.unlink(svg)
    run(bench, SMALL + ["--plot", svg, "--plot-log"])
    s3, _, _, _ = svg_series(svg)
    check(sorted(s3) == want, f"--plot-log: series {s3}")
    root = ET.parse(svg).getroot()
    ylab = [g for g in root.iter(SVG + "g") if g.get("class") == "y-labels"]
    ys = [float("".join(t.itertext())) for t in ylab[0].iter(SVG + "text")]
    mantissas = [round(y / 10 ** math.floor(math.log10(y)), 6) for y in ys]
    check(len(ys) >= 3 and ys == sorted(ys) and
          all(m in (1, 5) for m in mantissas) and max(ys) / min(ys) >= 10,
          f"--plot-log: y labels {ys}")
    check("log10 scale" in open(svg).read(), "--plot-log: no axis title")
    bad = os.path.join(outdir, "no-such-dir", "x.svg")
    p = run(bench, SMALL + ["--plot", bad], want_rc=1)
    check("--plot" in p.stderr, f"no message for an unwritable plot: {p.stderr}")
    return 0


def mode_compare_nogpu(bench, info):
    """--mem cuda where no GPU can be used is refused (exit 2, saying why),
    with --compare, --csv or the table alike: a run of waived rows would
    pass for a measurement."""
    if gpu_usable(info):
        print("SKIP: a GPU is usable here (the references run for real)")
        return 77
    args = ["--mem", "cuda", "--sizes", "4K,1M", "--iters", "3", "--warmup",
            "1", "--lat-max", "0", "--compare", "--timeout", "120"]
    for extra in (["--csv"], ["--json"], []):
        p = run(bench, args + extra, want_rc=2)
        check("--mem cuda: no GPU can be used here: " in p.stderr and
              ("libcuda" in p.stderr or "IPCPIPE_CUDA" in p.stderr),
              f"{' '.join(extra)}: no reason given: {p.stderr!r}")
        check(not p.stdout.strip(), f"rows printed anyway: {p.stdout!r}")
    # Listing the cases needs no GPU.
    run(bench, ["--mem", "cuda", "--list", "--sizes", "8"])
    return 0


def mode_options(bench):
    run(bench, SMALL + ["--json", "--csv"], want_rc=2)
    run(bench, SMALL + ["--case", "nccl"], want_rc=2)
    run(bench, SMALL + ["--plot", ""], want_rc=2)
    p = run(bench, SMALL + ["--stream-reqs", "some"], want_rc=2)
    check('bad value "some" for --stream-reqs' in p.stderr,
          f"--stream-reqs some: {p.stderr!r}")
    run(bench, ["--stream-reqs", "every", "--list", "--sizes", "8"])
    for bad in ("0", "1025", "x"):
        p = run(bench, SMALL + ["--stream-batch", bad], want_rc=2)
        check(f'bad value "{bad}" for --stream-batch' in p.stderr,
              f"--stream-batch {bad}: {p.stderr!r}")
    run(bench, ["--stream-batch", "1", "--list", "--sizes", "8"])
    for bad in ("1", "2", "-1", "x"):
        p = run(bench, SMALL + ["--ahead", bad], want_rc=2)
        check(f'bad value "{bad}" for --ahead' in p.stderr,
              f"--ahead {bad}: {p.stderr!r}")
    p = run(bench, SMALL + ["--stream-wait", "spin"], want_rc=2)
    check('bad value "spin" for --stream-wait' in p.stderr,
          f"--stream-wait spin: {p.stderr!r}")
    p = run(bench, ["--compare", "--list", "--sizes", "8,1M"])
    names = p.stdout.split()
    want = [f"{n}:{s}" for s in ("8", "1M") for n in REFS + LISTED]
    check(names == want, f"--list gave {names}, expected {want}")
    p = run(bench, ["--list", "--sizes", "8"])
    check(p.stdout.split() == [f"{n}:8" for n in LISTED],
          f"--list without --compare: {p.stdout.split()}")
    h = run(bench, ["--help"]).stdout
    for opt in ("--compare", "--csv", "--plot", "--stream-reqs",
                "--stream-batch", "--stream-wait", "--ahead", "--version"):
        check(opt in h, f"{opt} not in --help")
    v = run(bench, ["--version"]).stdout
    check(re.fullmatch(r"ipcpipe-bench \d+\.\d+\.\d+\n", v),
          f"--version: {v!r}")
    # A bad size is named, with what a size looks like.
    p = run(bench, ["--sizes", "8,12Q,4K", "--list"], want_rc=2)
    check('--sizes 8,12Q,4K: "12Q" is not a size' in p.stderr,
          f"--sizes 8,12Q,4K: {p.stderr!r}")
    p = run(bench, ["--sizes", "8,0", "--list"], want_rc=2)
    check('"0" is not a size' in p.stderr, f"--sizes 8,0: {p.stderr!r}")
    return 0


def tty_stderr(bench, extra):
    """Runs the bench with stderr on a pseudo-terminal; returns (stdout,
    what the terminal got), or None where there is no pseudo-terminal."""
    try:
        master, slave = os.openpty()
    except OSError:
        return None
    chunks = []

    def reader():
        while True:
            try:
                b = os.read(master, 4096)
            except OSError:  # EIO: every writer has closed the terminal
                return
            if not b:
                return
            chunks.append(b)

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        p = subprocess.run([bench] + SMALL + extra, stdout=subprocess.PIPE,
                           stderr=slave, text=True, timeout=300)
    finally:
        os.close(slave)
    t.join(10)
    os.close(master)
    check(p.returncode == 0, f"{extra}: exit {p.returncode}")
    return p.stdout, b"".join(chunks).decode(errors="replace")


def mode_progress(bench):
    """With stderr on a terminal the table run shows progress there, with
    the time left; --csv and --json never do.  In a pipe, heartbeat lines
    (--heartbeat)."""
    got = tty_stderr(bench, [])
    if got is None:
        print("SKIP: no pseudo-terminal")
        return 77
    out, err = got
    check(f"[1/{2 * len(PATHS)}" in err and "\r" in err,
          f"no progress on the terminal: {err!r}")
    check("\r" not in out and "\x1b" not in out, "progress on stdout")
    check(re.search(r"\[2/\d+, \d+% done, \d+ s, ~\d+ s left\]", err),
          f"no time left on the terminal: {err!r}")
    for extra in (["--csv"], ["--json"]):
        out, err = tty_stderr(bench, extra)
        check("[1/" not in err, f"progress with {extra}: {err!r}")
        check("\r" not in out, f"progress on stdout with {extra}")
    # In a pipe: a heartbeat line between cases at most every --heartbeat
    # seconds (here every case), none with 0; bad values refused.
    n = 2 * len(PATHS)
    for extra in ([], ["--json"]):
        p = run(bench, SMALL + extra + ["--heartbeat", "0.000001"])
        beats = re.findall(r"^ipcpipe-bench: (\d+) of (\d+) cases done after "
                           r"\d+ s(, ~\d+ s left)?; now (\S+)$", p.stderr,
                           re.M)
        check([int(b[0]) for b in beats] == list(range(n)) and
              all(int(b[1]) == n for b in beats) and
              all(b[2] for b in beats[1:]),
              f"heartbeats {extra}: {p.stderr!r}")
        no_progress(p, f"--heartbeat {extra}")
    p = run(bench, SMALL + ["--heartbeat", "0"])
    check("cases done after" not in p.stderr, f"--heartbeat 0: {p.stderr!r}")
    p = run(bench, SMALL + ["--heartbeat", "-1"], want_rc=2)
    check('bad value "-1" for --heartbeat' in p.stderr, p.stderr)
    return 0


def mode_mailbox(bench):
    """IPCPIPE_MAILBOX=on: both ranks switch to the mailbox (the engine's
    debug line), and the bench's cases, whose data it verifies, pass
    through it: small messages (ring slots), eager ones longer than a slot
    and first exports with descriptors (socket and marker).  Off: no
    switch.  Unset: the default, on."""
    for mb in ("on", "off", None):
        env = dict(os.environ, IPCPIPE_LOG_LEVEL="debug",
                   IPCPIPE_LOG_SUBSYS="engine")
        env.pop("IPCPIPE_MAILBOX", None)
        if mb is not None:
            env["IPCPIPE_MAILBOX"] = mb
        p = subprocess.run([bench, "--mem", "host", "--sizes", "8,4K,1M+3",
                            "--iters", "3", "--warmup", "1", "--timeout",
                            "120"], capture_output=True, text=True,
                           timeout=300, env=env)
        check(p.returncode == 0, f"bench with IPCPIPE_MAILBOX={mb}: exit "
              f"{p.returncode}\n{p.stdout}\n{p.stderr[-4000:]}")
        rows = [ln for ln in p.stdout.splitlines()
                if re.match(r"^ +[0-9]", ln) and "waived" not in ln]
        check(rows and all(ln.split()[-1] == "yes" for ln in rows),
              f"rows not all verified with IPCPIPE_MAILBOX={mb}:\n"
              f"{p.stdout}")
        got = {int(m) for m in re.findall(
            r"messages to rank (\d+) go through its mailbox", p.stderr)}
        want = set() if mb == "off" else {0, 1}
        check(got == want, f"IPCPIPE_MAILBOX={mb}: switched towards ranks "
              f"{sorted(got)}, expected {sorted(want)}")
        # Every path choice gives its reason (written only when logged).
        choices = re.findall(r"\d+ bytes from rank \d+: (\w+) path"
                             r"( \(forced\))? \((.*)\)$", p.stderr, re.M)
        why = {"direct": (r"receive buffer lies in shareable allocation "
                          r"\d+|rank \d may write this process's memory "
                          r"with process_vm_writev|this process copies it "
                          r"out of rank \d's buffer, mapped here|this "
                          r"process reads it out of rank \d's memory with "
                          r"process_vm_readv"),
               "staged": r"staged path forced"}
        check({c[0] for c in choices} == {"direct", "staged"},
              f"IPCPIPE_MAILBOX={mb}: path choices {choices[:5]}")
        for path, _, reason in choices:
            check(re.fullmatch(why.get(path, "$^"), reason) is not None,
                  f"{path} path chosen for the reason {reason!r}")
    return 0


def mode_adapt(bench):
    """IPCPIPE_STRIPE_ADAPT=on with a fixed share (IPCPIPE_STRIPE=0.1, host
    memory): the receiver notes when each part of every striped transfer
    ended (the engine's debug line: the staged part is a tenth of the
    transfer, both times lie between 0 and the run's length, and with a
    fixed share no factor is adapted), and the data still verifies; the
    same where the receiver copies by itself (IPCPIPE_DRIVE=on: its own
    queues raise the flags it watches).  Off: no such line."""
    pat = re.compile(r"striped transfer of (\d+) bytes from rank \d+: "
                     r"direct part ended (by )?([0-9.]+) us after "
                     r"(the CTS|this process began copying), "
                     r"staged part \((\d+) bytes\) (by )?([0-9.]+) us(.*)$",
                     re.M)
    for mode, drive in (("on", "off"), ("off", "off"), ("on", "on")):
        env = dict(os.environ, IPCPIPE_STRIPE="0.1", IPCPIPE_QUEUES="4",
                   IPCPIPE_STRIPE_ADAPT=mode, IPCPIPE_LOG_LEVEL="debug",
                   IPCPIPE_LOG_SUBSYS="engine", IPCPIPE_DRIVE=drive)
        what = f"IPCPIPE_STRIPE_ADAPT={mode} IPCPIPE_DRIVE={drive}"
        t0 = time.monotonic()
        p = subprocess.run([bench, "--mem", "host", "--case", "auto",
                            "--case", "bidir", "--sizes", "1M+3,16M",
                            "--iters", "3", "--warmup", "1", "--lat-max",
                            "0", "--timeout", "120"], capture_output=True,
                           text=True, timeout=300, env=env)
        wall_us = (time.monotonic() - t0) * 1e6
        check(p.returncode == 0, f"bench with {what}: "
              f"exit {p.returncode}\n{p.stdout}\n{p.stderr[-4000:]}")
        rows = [ln for ln in p.stdout.splitlines()
                if re.match(r"^ +[0-9]", ln)]
        check(rows and all(ln.split()[-1] == "yes" for ln in rows) and
              all("striped" in ln for ln in rows),
              f"rows not all striped and verified with {what}:\n{p.stdout}")
        seen = pat.findall(p.stderr)
        # The choice's reason names the staged part (a tenth).
        where = (r"this process copies it out of rank \d+'s buffer, mapped "
                 r"here" if drive == "on" else
                 r"receive buffer lies in shareable allocation \d+")
        why = re.findall(r"(\d+) bytes from rank \d+: striped path (?:"
                         r"\(forced\) )?\(" + where + r"; (\d+) bytes staged "
                         r"at once\)$", p.stderr, re.M)
        check(why and all(int(s) == int(n) // 10 for n, s in why),
              f"striped choices' reasons with {what}: "
              f"{why[:5]}\n{p.stderr[-2000:]}")
        if mode == "off":
            check(not seen, f"part ends noted with {what}: {seen[:3]}")
            continue
        big = [s for s in seen if int(s[0]) in (1048579, 16 << 20)]
        # warm-up and timed transfers of both sizes, both cases
        check(len(big) >= 8, f"{len(big)} striped transfers noted with "
              f"{what}, expected at least 8:\n{p.stderr[-4000:]}")
        start = "this process began copying" if drive == "on" else "the CTS"
        for n, _, td, since, slen, _, ts, rest in big:
            check(since == start, f"{what}: part ends timed from {since!r}")
            check(int(slen) == int(n) // 10,
                  f"staged part of {slen} bytes in a transfer of {n}")
            check(0 < float(td) < wall_us and 0 < float(ts) < wall_us,
                  f"part ends {td} / {ts} us outside the run ({wall_us:.0f})")
            check("factor" not in rest, f"a fixed share adapted: {rest}")
    return 0


LOAD_LINE = re.compile(r"--load (d2h|h2d) on device (\d+): ([0-9.]+) GB/s "
                       r"of pinned copies over ([0-9.]+) s, beside the cases")


def mode_load(bench, info):
    """--load: bad values and combinations are refused (exit 2, saying
    why); where no GPU is usable the run goes on without it, saying so in
    the table's header and on stderr.  Where one is (label gpu), both kinds
    run beside a direct and an auto case: the data still verifies, the
    header says what ran, and the load's own figures show it moved data
    over the whole run."""
    p = run(bench, ["--load", "x", "--list"], want_rc=2)
    check('bad value "x" for --load' in p.stderr, f"--load x: {p.stderr!r}")
    for extra in (["--mem", "host"], ["--mem", "auto"],
                  ["--mem", "cuda", "--tune"]):
        p = run(bench, ["--load", "d2h", "--sizes", "1M"] + extra, want_rc=2)
        check("--load loads a GPU's PCIe link" in p.stderr,
              f"--load d2h {' '.join(extra)}: {p.stderr!r}")
    p = run(bench, ["--load-worker", "d2h", "0"], want_rc=2)
    check("not for use by hand" in p.stderr, f"--load-worker: {p.stderr!r}")
    args = ["--mem", "cuda", "--case", "direct:64M", "--case", "auto:64M",
            "--iters", "3", "--warmup", "1", "--lat-max", "0", "--timeout",
            "240"]
    if not gpu_usable(info):
        for kind in ("d2h", "h2d"):
            p = run(bench, args + ["--load", kind], want_rc=2)
            check("--mem cuda: no GPU can be used here" in p.stderr,
                  f"--load {kind} without a GPU: {p.stderr!r}")
        print("(no GPU usable: the load itself was not run)")
        return 0
    for kind, rank in (("d2h", 1), ("h2d", 0)):
        t0 = time.monotonic()
        p = run(bench, args + ["--load", kind])
        wall = time.monotonic() - t0
        check(f"# load (--load {kind}): a third process copies 64 MiB of "
              f"pinned memory 4 at a time" in p.stdout and
              f"on rank {rank}'s GPU" in p.stdout, f"header:\n{p.stdout}")
        rows = [ln for ln in p.stdout.splitlines() if re.match(r"^ +64M", ln)]
        check(len(rows) == 2 and all(ln.split()[-1] == "yes" for ln in rows),
              f"rows not measured and verified:\n{p.stdout}")
        m = LOAD_LINE.findall(p.stderr)
        check(len(m) == 1 and m[0][0] == kind,
              f"the load's figures, once: {m}\n{p.stderr}")
        gbps, secs = float(m[0][2]), float(m[0][3])
        check(gbps > 1 and 0 < secs < wall, f"load {gbps} GB/s over {secs} s "
              f"of a {wall:.1f} s run")
    return 0


def traced_stats(bench, stats, path, copies, case="staged", drive="off"):
    """Runs a 1 MiB case (staged by default) with a trace; returns
    trace_stats.py's lines."""
    for old in (path, path + ".0.part", path + ".1.part"):
        if os.path.exists(old):
            os.remove(old)
    env = dict(os.environ, IPCPIPE_TRACE=path, IPCPIPE_DRIVE=drive,
               IPCPIPE_TRACE_COPIES="on" if copies else "off")
    p = subprocess.run([bench, "--mem", "host", "--case", case, "--sizes",
                        "1M", "--iters", "2", "--warmup", "1", "--lat-max",
                        "0", "--timeout", "120"], capture_output=True,
                       text=True, timeout=300, env=env)
    check(p.returncode == 0, f"bench with a trace: exit {p.returncode}\n"
          f"{p.stdout}\n{p.stderr}")
    check(os.path.exists(path), f"no trace written at {path}")
    s = subprocess.run([sys.executable, stats, path], capture_output=True,
                       text=True, timeout=120)
    check(s.returncode == 0, f"trace_stats.py: exit {s.returncode}\n"
          f"{s.stdout}\n{s.stderr}")
    return s.stdout.splitlines()


def protocol_row(lines, text, label):
    """The protocol table's one row for label (rank 1 -> rank 0), with
    every transfer paired: the row and its 15 figures."""
    head = [i for i, ln in enumerate(lines) if ln.startswith("protocol")]
    check(len(head) == 1, f"no protocol table:\n{text}")
    rows = [ln for ln in lines[head[0] + 1:] if ln.startswith(label)]
    check(len(rows) == 1, f"no protocol row for {label}:\n{text}")
    f = rows[0].split()
    n, v = int(f[3]), [float(x) for x in f[4:]]
    # warm-up and timed repetitions, W transfers each
    check(n >= 3, f"only {n} transfers paired:\n{text}")
    check(len(v) == 15, f"protocol row has {len(v)} figures: {rows[0]}")
    return rows[0], v


def in_order(row, steps):
    """Each (a, b, what) of steps has a <= b (a missing mark, NaN, fails)."""
    for a, b, what in steps:
        check(a <= b, f"{what}: {row}")


def recv_steps(scall, rts, rstart, rmeet, rcopy, renq, rend):
    """The steps both tables share: the RTS out and met, the receiver's
    first copy and all of its queueing after it met, its end after."""
    return ((scall, rts, "the RTS left before the call"),
            (rts, rmeet, "the receiver met the RTS before it left"),
            (rstart, rmeet, "the receiver met the RTS before it started"),
            (rmeet, rcopy, "the receiver copied before it met"),
            (rcopy, renq, "the receiver queued all before its first copy"),
            (renq, rend, "the receiver ended before it queued"))


def check_protocol(lines, text):
    """The protocol table: one row for rank 1 -> rank 0, every transfer
    paired, and the steps in their causal order (each holds per transfer,
    so also for the medians)."""
    row, v = protocol_row(lines, text, "1->0 staged 1M")
    (scall, rcall, rts, rstart, rmeet, cts, smeet, scopy, rcopy, senq, renq,
     sdone, rdone, send, rend) = v
    check(scall <= 0 and rcall <= 0, f"times are not from the later call: "
          f"{row}")
    in_order(row, recv_steps(scall, rts, rstart, rmeet, rcopy, renq, rend) +
             ((rcall, rstart, "the receive started before its call"),
              (rmeet, cts, "the CTS left before the RTS was met"),
              (cts, smeet, "the sender saw the CTS before it left"),
              (smeet, senq, "the sender queued before the CTS"),
              (rmeet, renq, "the receiver queued before it met"),
              (smeet, scopy, "the sender copied before the CTS"),
              (scopy, senq, "the sender queued all before its first copy"),
              (senq, send, "the sender ended before it queued")))


def check_protocol_driven(lines, text):
    """The protocol table of transfers the receiver copied (IPCPIPE_DRIVE):
    the sender's span too (it has no copies, and ends on the receiver's
    last message), every transfer paired, the steps in causal order, and no
    CTS or sender's queueing."""
    row, v = protocol_row(lines, text, "1->0 direct 1M")
    (scall, rcall, rts, rstart, rmeet, cts, smeet, scopy, rcopy, senq, renq,
     sdone, rdone, send, rend) = v
    check(all(math.isnan(x) for x in (cts, scopy, senq, sdone)),
          f"a CTS or the sender's copies in a driven transfer: {row}")
    in_order(row, recv_steps(scall, rts, rstart, rmeet, rcopy, renq, rend) +
             ((rend, smeet, "the sender heard of the end before it"),
              (smeet, send, "the sender ended before it heard")))


def mode_trace(bench, stats, outdir):
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, "staged.json")
    # Marks only: no copy tracks, the protocol table alone.
    lines = traced_stats(bench, stats, path, copies=False)
    text = "\n".join(lines)
    check(not any(ln.startswith("track") for ln in lines),
          f"copy tracks with IPCPIPE_TRACE_COPIES=off:\n{text}")
    check_protocol(lines, text)
    lines = traced_stats(bench, stats, path, copies=True)
    text = "\n".join(lines)
    check_protocol(lines, text)
    check(lines and lines[0].startswith("track"), f"no header:\n{text}")
    # The sender's copies into the ring, with a count and a rate.
    send = [ln for ln in lines if ln.startswith("rank 1 to rank 0")]
    check(send and any(int(ln.split()[-6]) > 0 for ln in send),
          f"no copies of rank 1 to rank 0:\n{text}")
    hand = [ln for ln in lines if ln.startswith("staged rank 1 -> rank 0:")]
    check(len(hand) == 1, f"no hand-over line:\n{text}")
    m = re.search(r": (\d+) chunks paired \((\d+) / (\d+)\), hand-over "
                  r"median (-?[\d.]+) us", hand[0])
    check(m is not None, f"hand-over line: {hand[0]}")
    n, a, b = int(m.group(1)), int(m.group(2)), int(m.group(3))
    # 1 MiB in slots of 1 MiB: one chunk a transfer, warm-up and timed
    # repetitions of W transfers each, on both sides.
    check(n > 0 and a == b == n, f"chunks paired {n}, sides {a} / {b}")
    # The receiver copies (IPCPIPE_DRIVE=on): the sender's span has marks.
    path = os.path.join(outdir, "driven.json")
    lines = traced_stats(bench, stats, path, copies=False, case="direct",
                         drive="on")
    check_protocol_driven(lines, "\n".join(lines))
    return 0


def mode_corrupt(bench):
    """The data check fails when a received byte is wrong: with
    IPCP_BENCH_CORRUPT=1 the bench flips one byte of each host buffer
    before checking it, and every case must say so and the exit be 1."""
    env = dict(os.environ, IPCP_BENCH_CORRUPT="1")
    args = ["--mem", "host", "--case", "direct:4K", "--case", "auto:4K",
            "--iters", "3", "--lat-max", "0", "--csv"]
    p = run(bench, args, want_rc=1, env=env)
    header, rows = read_csv(p.stdout)
    check(len(rows) == 2, f"{len(rows)} rows, expected 2:\n{p.stdout}")
    for r in rows:
        check(r["verified"] == "false",
              f"{r['case']}: verified is {r['verified']!r} with a byte "
              f"flipped")
        check(re.search(r"byte 2048 of 4096 is 0x[0-9a-f]{2}, expected "
                        r"0x[0-9a-f]{2}", r["reason"]) is not None,
              f"{r['case']}: reason {r['reason']!r} does not name the byte")
    # And without the aid, the same cases verify (exit 0).
    p = run(bench, args, want_rc=0)
    _, rows = read_csv(p.stdout)
    for r in rows:
        check(r["verified"] == "true", f"{r['case']}: not verified: {r}")
    return 0


def check_ahead_row(r, n):
    """A one-way host row with --ahead: the figure of its windows back to
    back within their min-max, its data checked."""
    g, lo, hi = r["ahead_gbps"], r["ahead_gbps_min"], r["ahead_gbps_max"]
    check(r["status"] == "ok" and r["verified"] is True,
          f"{r['case']}: {r['status']} verified {r['verified']!r} "
          f"({r['reason']!r})")
    check(None not in (g, lo, hi) and 0 < lo <= g * (1 + 1e-9) and
          g <= hi * (1 + 1e-9),
          f"{r['case']}: run ahead {g} not within min-max {lo}-{hi}")


def mode_ahead(bench):
    """--ahead N: the one-way host cases time N windows posted back to
    back after their repetitions (JSON, CSV, the table's note); both
    directions at once do not (no figure, no note); the windows' data is
    checked, and seen to fail (IPCP_BENCH_CORRUPT=ahead) while the
    repetitions' check still passes."""
    args = ["--mem", "host", "--case", "direct:4K", "--case", "auto:8",
            "--case", "bidir:4K", "--iters", "3", "--warmup", "1",
            "--lat-max", "0", "--ahead", "6", "--timeout", "120"]
    p = run(bench, args + ["--json"])
    doc = json.loads(p.stdout)
    check(doc["run"]["options"]["ahead"] == 6, f"options {doc['run']}")
    rows = {r["path"]: r for r in doc["cases"]}
    check(sorted(rows) == ["auto", "bidir", "direct"], f"cases {list(rows)}")
    check_ahead_row(rows["direct"], 6)
    check_ahead_row(rows["auto"], 6)
    b = rows["bidir"]
    check(b["status"] == "ok" and b["ahead_gbps"] is None,
          f"bidir: run ahead {b['ahead_gbps']!r}")
    p = run(bench, args + ["--csv"])
    _, crows = read_csv(p.stdout)
    for r in crows:
        want = r["path"] != "bidir"
        check((r["ahead_gbps"] != "") == want,
              f"{r['case']}: CSV ahead_gbps {r['ahead_gbps']!r}")
    p = run(bench, args)
    notes = re.findall(r"^ +\^ run ahead: [\d.]+ GB/s \(min-max [\d.]+-[\d.]+\) "
                       r"a window, 6 windows posted back to back", p.stdout,
                       re.M)
    check(len(notes) == 2, f"{len(notes)} run-ahead notes:\n{p.stdout}")
    env = dict(os.environ, IPCP_BENCH_CORRUPT="ahead")
    p = run(bench, args + ["--json"], want_rc=1, env=env)
    rows = {r["path"]: r for r in json.loads(p.stdout)["cases"]}
    for path in ("direct", "auto"):
        r = rows[path]
        check(r["verified"] is False and
              re.match(r"run ahead, last: byte \d+ of \d+ is 0x", r["reason"]),
              f"{path}: verified {r['verified']!r} ({r['reason']!r}) with "
              f"the run-ahead windows' byte flipped")
        check(r["gbps"] is not None, f"{path}: no GB/s {r}")
    check(rows["bidir"]["verified"] is True, f"bidir: {rows['bidir']}")
    return 0


def mode_corrupt_pingpong(bench):
    """The ping-pong's check fails too: with IPCP_BENCH_CORRUPT=pingpong:3
    the bench flips one byte of round 3's pong alone (the second timed
    round, after 2 warm-up rounds) before checking it; every latency row
    must say verified false (NO in the table), name the round and the
    byte, and the exit be 1.  Without the ping-pong (--lat-max 0) the same
    aid touches nothing: the windows verify and the exit is 0."""
    env = dict(os.environ, IPCP_BENCH_CORRUPT="pingpong:3")
    args = ["--mem", "host", "--case", "direct:4K", "--case", "auto:4K",
            "--iters", "3", "--warmup", "2"]
    want = (r"ping-pong round 3: byte 2048 of 4096 is 0x[0-9a-f]{2}, "
            r"expected 0x[0-9a-f]{2}")
    p = run(bench, args + ["--csv"], want_rc=1, env=env)
    _, rows = read_csv(p.stdout)
    check(len(rows) == 2, f"{len(rows)} rows, expected 2:\n{p.stdout}")
    for r in rows:
        check(r["verified"] == "false",
              f"{r['case']}: verified is {r['verified']!r} with a pong "
              f"byte flipped")
        check(re.fullmatch(want, r["reason"]) is not None,
              f"{r['case']}: reason {r['reason']!r} does not name the round "
              f"and the byte")
        check(r["latency_us"] not in ("", None),
              f"{r['case']}: no ping-pong ran: {r}")
    p = run(bench, args, want_rc=1, env=env)
    lines = [ln for ln in p.stdout.splitlines() if re.match(r"\s+4K\s", ln)]
    check(len(lines) == 2 and all(ln.split()[-1] == "NO" for ln in lines),
          f"table rows not marked NO:\n{p.stdout}")
    check(len(re.findall(r"\^ " + want, p.stdout)) == 2,
          f"table does not name the bad byte:\n{p.stdout}")
    p = run(bench, args + ["--csv", "--lat-max", "0"], want_rc=0, env=env)
    _, rows = read_csv(p.stdout)
    check(len(rows) == 2 and all(r["verified"] == "true" for r in rows),
          f"windows not verified with only the ping-pong corrupted:\n"
          f"{p.stdout}")
    return 0


CEIL_LINE = re.compile(r"^\s+\^ ceilings: (.*) GB/s; the row's is the "
                       r"fastest$")


def mode_ceiling_host(bench):
    """Host rows are set against the fastest copy of the machine as the
    library copies, measured in the same run: one way, one thread's
    memcpy and the library's queues' worth of threads with memcpy and
    with non-temporal stores (x86-64); both ways, the threads of both
    directions with either copy.  Every row names the copies under it
    ("^ ceilings:"), its ceiling is the fastest of them and named in the
    ceiling column, and none failed to measure (a ceiling copy whose
    bytes differ from its source is not measured, saying so)."""
    import platform
    nt = platform.machine() in ("x86_64", "AMD64")
    p = run(bench, ["--mem", "host", "--sizes", "4K,1M,4M", "--case",
                    "direct", "--case", "bidir", "--iters", "3", "--warmup",
                    "1", "--lat-max", "0", "--timeout", "120"])
    check("not measured" not in p.stderr,
          f"a ceiling was not measured:\n{p.stderr}")
    check(not nt or "nt-par = " in p.stdout,
          f"the header does not describe nt-par:\n{p.stdout}")
    lines = p.stdout.splitlines()
    rows = [i for i, ln in enumerate(lines) if re.match(r"^ +\d+[KM]? ", ln)]
    check(len(rows) == 6, f"{len(rows)} rows, expected 6:\n{p.stdout}")
    for i in rows:
        f = lines[i].split()
        bidir = f[1] == "bidir"
        ceil, kind = f[-5], f[-4]
        under = [CEIL_LINE.match(ln) for ln in lines[i + 1:i + 5]]
        under = [m for m in under if m]
        check(len(under) == 1, f"no ceilings line under: {lines[i]}")
        cands = dict(c.rsplit(" ", 1) for c in under[0].group(1).split(", "))
        want = ({"memcpy-bidir"} | ({"nt-bidir"} if nt else set())
                if bidir else {"memcpy", "memcpy-par"} |
                ({"nt-par"} if nt else set()))
        check(set(cands) == want,
              f"{lines[i]}: ceilings {sorted(cands)}, expected {sorted(want)}")
        best = max(cands, key=lambda k: float(cands[k]))
        check(kind == best and ceil == cands[best],
              f"{lines[i]}: ceiling {kind} {ceil}, the fastest is {best} "
              f"{cands[best]}")
    return 0


MODES = {
    "csv": mode_csv, "plot": mode_plot, "compare-host": mode_compare_host,
    "compare-nogpu": mode_compare_nogpu, "options": mode_options,
    "progress": mode_progress, "trace": mode_trace, "mailbox": mode_mailbox,
    "adapt": mode_adapt, "load": mode_load, "ompi": mode_ompi,
    "corrupt": mode_corrupt, "ceiling-host": mode_ceiling_host,
    "nccl-ungrouped": mode_nccl_ungrouped,
    "corrupt-pingpong": mode_corrupt_pingpong, "ahead": mode_ahead,
    "stream-wait": mode_stream_wait,
}


def main(argv):
    """check_bench.py MODE BENCH [the mode's other arguments]"""
    run_mode = MODES.get(argv[1])
    if run_mode is None:
        print(f"unknown mode {argv[1]}")
        return 2
    try:
        rc = run_mode(*argv[2:])
    except Fail as e:
        print(f"FAIL: {e}")
        return 1
    if rc == 0:
        print("ok")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
