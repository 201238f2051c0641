"""check_bench.py's mode for --compare's GPU reference rows that need no
GPU to check: the ungrouped NCCL row's listing, selection and refusal."""
import json
import re

from benchcheck import SMALL, check, run


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
