"""check_bench.py's Open MPI modes: the ompi rows of --compare on host
memory, with mpirun present, absent and failing."""
import json
import os
import re
import shutil
import tempfile

from benchcheck import PATHS, SMALL, check, no_progress, read_csv, run


def ompi_here(bench):
    """Whether --compare has Open MPI's rows here: mpirun on PATH and
    ipcpipe-bench-mpi next to the bench."""
    helper = os.path.join(os.path.dirname(bench), "ipcpipe-bench-mpi")
    return shutil.which("mpirun") is not None and os.access(helper, os.X_OK)


def mode_compare_host(bench):
    # On host memory the GPU references are left out; Open MPI's rows
    # (mode ompi checks them) run where it is installed.
    host_refs = ["ompi"] if ompi_here(bench) else []
    nrows = 2 * (len(PATHS) + len(host_refs))
    p = run(bench, SMALL + ["--compare"])
    # Rows, without the notes under them ("^ first transfer ...").
    rows = [l for l in p.stdout.splitlines() if l and not l.startswith("#")
            and not l.lstrip().startswith(("size", "^"))]
    check(len(rows) == nrows, f"{len(rows)} rows:\n{p.stdout}")
    # Every measured row has its spread under it.
    spreads = [l for l in p.stdout.splitlines()
               if l.lstrip().startswith("^ min-max: GB/s ")]
    measured = [r for r in rows if "waived:" not in r]
    check(len(spreads) == len(measured), f"{len(spreads)} min-max lines "
          f"for {len(measured)} measured rows:\n{p.stdout}")
    check("# note: --compare" in p.stdout, f"no note:\n{p.stdout}")
    for r in rows:
        check(r.split()[1] in PATHS + host_refs,
              f"a GPU reference row on host memory: {r}")
    p = run(bench, SMALL + ["--compare", "--csv"])
    no_progress(p, "--compare --csv")
    _, crows = read_csv(p.stdout)
    check(len(crows) == nrows, f"{len(crows)} CSV rows")
    check("note: --compare" in p.stderr, f"no note on stderr: {p.stderr}")
    # Only references selected: nothing runs, still fine.
    p = run(bench, SMALL + ["--compare", "--case", "nccl", "--json"])
    check(json.loads(p.stdout)["cases"] == [], f"expected no rows: {p.stdout}")
    return 0


OMPI_ARGS = ["--mem", "host", "--compare", "--case", "ompi", "--case", "auto",
             "--sizes", "8,4K,256K", "--iters", "20", "--warmup", "1",
             "--ahead", "4", "--timeout", "120"]
# Where no MPI job runs, one size is enough.
OMPI_ONE = [a if a != "8,4K,256K" else "8" for a in OMPI_ARGS]


def ompi_json_rows(bench):
    """Open MPI's rows and ipcpipe's auto rows, by size, from --json."""
    p = run(bench, OMPI_ARGS + ["--json"])
    rows = json.loads(p.stdout)["cases"]
    check("ompi: Open MPI" in p.stderr, f"no note on the run: {p.stderr}")
    by = {(r["path"], r["size"]): r for r in rows}
    check(len(by) == 6 and len(rows) == 6, f"cases {[r['case'] for r in rows]}")
    return by


def check_spread(r):
    """An ok row's median lies within its repetitions' min-max, and its
    half round trip within theirs (JSON numbers, CSV strings)."""
    num = lambda v: None if v in (None, "") else float(v)
    g, lo, hi = num(r["gbps"]), num(r["gbps_min"]), num(r["gbps_max"])
    check(g is not None and lo is not None and hi is not None and
          0 < lo <= g * (1 + 1e-9) and g <= hi * (1 + 1e-9),
          f"{r['case']}: GB/s {g} not within min-max {lo}-{hi}")
    l, llo, lhi = (num(r["latency_us"]), num(r["latency_min_us"]),
                   num(r["latency_max_us"]))
    check((l is None) == (llo is None) == (lhi is None),
          f"{r['case']}: latency {l} with min-max {llo}-{lhi}")
    if l is not None:
        check(0 < llo <= l * (1 + 1e-9) and l <= lhi * (1 + 1e-9),
              f"{r['case']}: latency {l} not within min-max {llo}-{lhi}")


def check_ompi_row(r, auto):
    size = r["size"]
    check(r["status"] == "ok" and r["reference"] is True,
          f"{r['case']}: {r['status']} {r['reason']!r}")
    check(r["verified"] is True, f"{r['case']}: verified {r['verified']!r}")
    check(r["gbps"] is not None and r["gbps"] > 0,
          f"{r['case']}: GB/s {r['gbps']!r}")
    check_spread(r)
    check_spread(auto)
    # --ahead 4: both run their windows back to back too, data checked.
    for row in (r, auto):
        g, lo, hi = (row["ahead_gbps"], row["ahead_gbps_min"],
                     row["ahead_gbps_max"])
        check(None not in (g, lo, hi) and 0 < lo <= g * (1 + 1e-9) and
              g <= hi * (1 + 1e-9),
              f"{row['case']}: run ahead {g} not within min-max {lo}-{hi}")
    check(r["iters"] == 20 and r["window"] == auto["window"],
          f"{r['case']}: {r['iters']} repetitions of W {r['window']}, "
          f"expected 20 of W {auto['window']}")
    check(r["ceiling_kind"] == "memcpy" and r["ceiling_gbps"] > 0,
          f"{r['case']}: ceiling {r['ceiling_kind']} {r['ceiling_gbps']}")
    # The ping-pong runs up to --lat-max (64K by default), as ipcpipe's.
    lat = size <= 64 * 1024
    check((r["latency_us"] is not None and r["latency_us"] > 0) == lat,
          f"{r['case']}: latency {r['latency_us']!r}")
    check(auto["status"] == "ok" and auto["vs_ompi"] is not None and
          auto["vs_ompi"] > 0,
          f"{auto['case']}: vs_ompi {auto['vs_ompi']!r}")
    check((auto["lat_vs_ompi"] is not None and auto["lat_vs_ompi"] > 0) == lat,
          f"{auto['case']}: lat_vs_ompi {auto['lat_vs_ompi']!r}")
    check(abs(auto["vs_ompi"] - auto["gbps"] / r["gbps"]) <=
          1e-4 * auto["vs_ompi"], f"{auto['case']}: vs_ompi is not the ratio")


def ompi_absent(bench):
    """Without mpirun on PATH: a note, no ompi row, exit 0."""
    with tempfile.TemporaryDirectory() as empty:
        env = dict(os.environ, PATH=empty)
        p = run(bench, OMPI_ONE, env=env)
    check("# note: --compare has no ompi rows: mpirun not found on PATH"
          in p.stdout, f"no note without mpirun:\n{p.stdout}")
    check(p.stdout.count("mpirun not found") == 1, f"said twice:\n{p.stdout}")
    rows = [l.split()[1] for l in p.stdout.splitlines()
            if l and l[0] != "#" and not l.lstrip().startswith(("size", "^"))]
    check(rows == ["auto"], f"rows without mpirun: {rows}")


def ompi_broken(bench):
    """An mpirun that fails: the ompi rows fail, its output on stderr, exit
    status 1; ipcpipe's rows still run."""
    with tempfile.TemporaryDirectory() as d:
        for name, text in (
                ("mpirun", "echo 'fake mpirun: no such job' >&2; exit 3\n"),
                ("ompi_info", "echo '  Open MPI: 9.9.9'; "
                              "echo '  MCA btl: sm (MCA v2.1.0)'\n")):
            path = os.path.join(d, name)
            with open(path, "w") as f:
                f.write("#!/bin/sh\n" + text)
            os.chmod(path, 0o755)
        env = dict(os.environ, PATH=d + os.pathsep + os.environ["PATH"])
        p = run(bench, OMPI_ONE + ["--json"], want_rc=1, env=env)
    rows = json.loads(p.stdout)["cases"]
    check(sorted(r["path"] for r in rows) == ["auto", "ompi"],
          f"cases {[r['case'] for r in rows]}")
    for r in rows:
        want = "failed" if r["path"] == "ompi" else "ok"
        check(r["status"] == want, f"{r['case']}: {r['status']}, expected "
              f"{want} ({r['reason']!r})")
        if r["path"] == "ompi":
            check("exited with status 3" in r["reason"],
                  f"{r['case']}: reason {r['reason']!r}")
    check("fake mpirun: no such job" in p.stderr and
          "--mca btl self,sm" in p.stderr,
          f"mpirun's command and output not on stderr: {p.stderr}")
    check(p.stderr.count("fake mpirun") == 1, f"shown twice: {p.stderr}")


def mode_ompi(bench):
    if shutil.which("mpirun") is None:
        print("SKIP: mpirun is not installed")
        return 77
    helper = os.path.join(os.path.dirname(bench), "ipcpipe-bench-mpi")
    check(os.access(helper, os.X_OK),
          f"mpirun is installed but {helper} was not built (CMake found no "
          f"MPI: install libopenmpi-dev)")
    by = ompi_json_rows(bench)
    for size in (8, 4096, 256 << 10):
        check_ompi_row(by[("ompi", size)], by[("auto", size)])
    # The table: the rows, the header, the ratios; pinned, MPI's ranks on
    # the two CPUs of ipcpipe's.
    p = run(bench, OMPI_ARGS + ["--pin"])
    out = p.stdout
    check("#   ompi = Open MPI" in out, f"no ompi header:\n{out}")
    ompi = [l for l in out.splitlines()
            if not l.startswith("#") and l.split()[1:2] == ["ompi"]]
    check(len(ompi) == 3 and all(l.split()[-1] == "yes" for l in ompi),
          f"ompi rows:\n{out}")
    ratios = re.findall(r"^#   \S+ vs references: auto \(\w+\) [\d.]+ x "
                        r"ompi(, latency [\d.]+ x ompi's)?$", out, re.M)
    check([bool(lat) for lat in ratios] == [True, True, False],
          f"ratios to ompi (latency up to 64K):\n{out}")
    cpus = len(os.sched_getaffinity(0))
    m = re.search(r"MPI ranks 0 and 1 on CPUs (\S+) and (\S+) ", out)
    check(m is not None, f"no CPUs in the run's note:\n{out}")
    check(cpus < 2 or m.group(1) != m.group(2),
          f"pinned, MPI's ranks share CPUs {m.group(1)}:\n{out}")
    ompi_absent(bench)
    ompi_broken(bench)
    return 0
