"""check_bench.py's modes for how the GPU cases and references run: the
ungrouped NCCL row's listing, selection and refusal (no GPU needed), and
--stream-wait's ways of waiting for a stream."""
import json
import re

from benchcheck import SMALL, check, gpu_usable, run


def mode_nccl_ungrouped(bench):
    """The ungrouped NCCL row: listed with --compare beside the grouped
    one on GPU memory (--list needs no GPU), selected alone by its name,
    as the grouped row is by its own; refused without --compare, saying
    it needs it; left out on host memory with the GPU references' note."""
    p = run(bench, ["--mem", "cuda", "--compare", "--list", "--sizes",
                    "2M,8M"])
    names = p.stdout.split()
    for s in ("2M", "8M"):
        check(f"nccl-ungrouped:{s}" in names and
              names.index(f"nccl-ungrouped:{s}") ==
              names.index(f"nccl:{s}") + 1,
              f"nccl-ungrouped:{s} not listed after nccl:{s}: {names}")
    for name in ("nccl", "nccl-ungrouped"):
        p = run(bench, ["--mem", "cuda", "--compare", "--list", "--sizes",
                        "2M", "--case", name])
        check(p.stdout.split() == [f"{name}:2M"],
              f"--case {name} selected {p.stdout.split()}")
    p = run(bench, ["--mem", "cuda", "--list", "--sizes", "2M", "--case",
                    "nccl-ungrouped"], want_rc=2)
    check(re.search(r'no case matches "nccl-ungrouped" .*nccl-ungrouped.* '
                    r'need --compare', p.stderr) is not None,
          f"no reason without --compare: {p.stderr!r}")
    p = run(bench, SMALL + ["--compare", "--case", "nccl-ungrouped",
                            "--json"])
    check(json.loads(p.stdout)["cases"] == [],
          f"an nccl-ungrouped row on host memory: {p.stdout}")
    check("GPU references" in p.stderr and "need GPU memory" in p.stderr,
          f"no note on host memory: {p.stderr!r}")
    h = run(bench, ["--help"]).stdout
    check("nccl-ungrouped" in h, "nccl-ungrouped not in --help")
    return 0


def mode_stream_wait(bench, info):
    """--stream-wait: the JSON names the way that ran (auto resolved: poll
    on a rank bound to one CPU, else sync); on a GPU (label gpu) the
    stream case runs and verifies with every way, bound and not."""
    for way in ("sync", "poll", "event"):
        p = run(bench, SMALL + ["--stream-wait", way, "--json"])
        got = json.loads(p.stdout)["run"]["options"]["stream_wait"]
        check(got == way, f"--stream-wait {way}: the JSON says {got!r}")
    if not gpu_usable(info):
        print("(no GPU usable: the stream case was not run)")
        return 0
    args = ["--mem", "cuda", "--case", "stream", "--sizes", "8,2M", "--iters",
            "3", "--warmup", "1", "--timeout", "120", "--json"]
    for extra, want in ((["--stream-wait", "event"], "event"),
                        (["--stream-wait", "event", "--pin"], "event"),
                        (["--pin"], "poll"), ([], "sync")):
        doc = json.loads(run(bench, args + extra).stdout)
        got = doc["run"]["options"]["stream_wait"]
        check(got == want, f"{' '.join(extra)}: waited by {got!r}, not {want}")
        rows = doc["cases"]
        check(len(rows) == 2 and all(r["status"] == "ok" and
                                     r["verified"] is True for r in rows),
              f"{' '.join(extra)}: rows not all measured and verified: "
              f"{rows}")
    return 0
