"""What the checks of ipcpipe-bench's outputs share: the cases and fields
it prints, running it, and the checks of a run's metadata."""
import csv
import io
import json
import re
import subprocess

SMALL = ["--mem", "host", "--sizes", "4K,1M", "--iters", "3", "--warmup", "1",
         "--lat-max", "0", "--timeout", "120"]
PATHS = ["direct", "staged", "auto", "bidir", "bidir-direct", "stream"]
# Every case --list names: the rows of host memory, and bounce (GPU
# memory only, left out on host memory with a note).
LISTED = ["direct", "staged", "bounce", "auto", "bidir", "bidir-direct",
          "stream"]
GPU_REFS = ["d2d", "d2h", "h2d", "striped", "nccl", "nccl-ungrouped", "naive"]
REFS = GPU_REFS + ["ompi"]
FIELDS = ["case", "size", "path", "path_used", "mem", "alloc",
          "devices.receiver", "devices.sender", "devices.receiver_bus",
          "devices.sender_bus", "ceiling_devices.from", "ceiling_devices.to",
          "window", "gbps", "gbps_min", "gbps_max", "ceiling_gbps",
          "ceiling_kind", "ratio", "latency_us", "latency_min_us",
          "latency_max_us", "first_us", "post_us", "start_skew_us",
          "ahead_gbps", "ahead_gbps_min", "ahead_gbps_max", "verified",
          "iters", "status", "reason", "reference",
          "vs_nccl", "vs_naive", "vs_ompi", "lat_vs_ompi"]
SVG = "{http://www.w3.org/2000/svg}"


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def run(bench, args, want_rc=0, env=None):
    p = subprocess.run([bench] + args, capture_output=True, text=True,
                       timeout=300, env=env)
    check(want_rc is None or p.returncode == want_rc,
          f"{' '.join(args)}: exit {p.returncode}, expected {want_rc}\n"
          f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def no_progress(p, what):
    for name, text in (("stdout", p.stdout), ("stderr", p.stderr)):
        check("\r" not in text and "\x1b" not in text,
              f"{what}: progress or terminal codes on {name} of a pipe")


def read_csv(text):
    rows = list(csv.reader(io.StringIO(text)))
    check(len(rows) >= 1, "no CSV header")
    return rows[0], [dict(zip(rows[0], r)) for r in rows[1:]]


def check_run(r, settings):
    """The JSON's run metadata: the library's version, the commit (or
    unknown), a UTC date, the machine, the ranks and options, and the
    IPCPIPE_* settings of the environment (not the launcher's own)."""
    check(isinstance(r, dict), f"no run object: {r!r}")
    check(re.fullmatch(r"\d+\.\d+\.\d+", r["version"]), f"version {r}")
    check(re.fullmatch(r"[0-9a-f]{12}(-dirty)?|unknown", r["commit"]),
          f"commit {r['commit']!r}")
    check(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r["date"]),
          f"date {r['date']!r}")
    check(r["host"] and r["kernel"] and r["cpus"] >= 1, f"machine {r}")
    check(r["ranks"] == 2 and r["job"] and r["mem"] in ("host", "cuda"),
          f"ranks {r}")
    check(isinstance(r["gpus"], list), f"gpus {r['gpus']!r}")
    check(r["options"]["verify"] is True and r["options"]["seed"] and
          r["options"]["stream_wait"] in ("sync", "poll", "event") and
          r["options"]["stream_batch"] == 32 and
          isinstance(r["options"]["ahead"], int),
          f"options {r['options']}")
    check(r["settings"] == settings, f"settings {r['settings']}, expected "
          f"{settings}")


def gpu_usable(info):
    p = subprocess.run([info, "--json"], capture_output=True, text=True)
    if p.returncode != 0:
        raise Fail(f"ipcpipe-info --json exited {p.returncode}")
    return json.loads(p.stdout)["gpus"]["usable"]
