"""CTest python.install: the README's install command, as CI can run it.

    install_check.py SOURCE WORKDIR

Runs `python3 -m pip install --no-build-isolation --no-index --no-deps
--target WORKDIR/site SOURCE` (SOURCE: the python/ directory), which
builds the library with CMake and downloads nothing; setuptools' build
and egg-info directories go under WORKDIR, so that the source tree stays
as it was (checked).  Then two ranks of this script, with PYTHONPATH
naming WORKDIR/site alone, import the installed copy and send and receive
fresh random bytes both ways, every byte checked, and `python3 -m
ipcpipe.info` runs from it.  Exits 77 (skipped) only where pip is not
installed; any other failure is a failure."""
import glob
import importlib.util
import os
import random
import shutil
import subprocess
import sys
import time

SKIP = 77
PIP_TIMEOUT = 540  # s: CMake builds the whole library (about 20 s on 2 CPUs)
RANK_TIMEOUT = 60
SIZES = (7, 65536, (1 << 20) + 3, 4 << 20)


def fail(msg):
    print(f"install_check: {msg}", file=sys.stderr)
    sys.exit(1)


def outputs(source):
    """What a build in the source tree would leave there: (path, mtime)."""
    pats = ("build", "dist", "*.egg-info", ".eggs", "ipcpipe/*.so")
    found = set()
    for pat in pats:
        for p in glob.glob(os.path.join(source, pat)):
            found.add((os.path.normpath(p), os.stat(p).st_mtime_ns))
    return found


def pip_install(source, work):
    site = os.path.join(work, "site")
    cfg = os.path.join(work, "setup.cfg")
    # setuptools reads DIST_EXTRA_CONFIG after the project's own files:
    # pip builds in the source directory, and without these its build/
    # (the CMake tree too: setup.py's build_temp) and ipcpipe.egg-info
    # would be written there.
    with open(cfg, "w") as f:
        f.write(f"[build]\nbuild_base = {os.path.join(work, 'build')}\n"
                f"[egg_info]\negg_base = {work}\n")
    env = dict(os.environ, DIST_EXTRA_CONFIG=cfg, PIP_CONFIG_FILE=os.devnull,
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    cmd = [sys.executable, "-m", "pip", "install", "--no-build-isolation",
           "--no-index", "--no-deps", "--no-cache-dir", "--target", site,
           source]
    print("install_check:", " ".join(cmd), flush=True)
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True,
                           timeout=PIP_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        fail(f"pip ran past {PIP_TIMEOUT} s:\n{e.stdout}")
    print(p.stdout[-4000:], flush=True)
    if p.returncode != 0:
        fail(f"pip exited {p.returncode}")
    print(f"install_check: pip took {time.monotonic() - t0:.1f} s")
    cores = glob.glob(os.path.join(site, "ipcpipe", "_core*.so"))
    if len(cores) != 1:
        fail(f"the installed package's extension: {cores}")
    for f in ("__init__.py", "_core.pyi", "py.typed", "info.py"):
        if not os.path.isfile(os.path.join(site, "ipcpipe", f)):
            fail(f"{f} was not installed")
    return site


def run_ranks(site):
    """Two ranks of this script against the installed copy alone."""
    seed = random.randrange(1 << 30)
    job = f"install-{os.getpid()}-{seed}"
    procs = []
    try:
        for rank in (0, 1):
            env = dict(os.environ, PYTHONPATH=site, IPCPIPE_RANK=str(rank),
                       IPCPIPE_SIZE="2", IPCPIPE_JOB=job)
            procs.append(subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--rank", site,
                 str(seed)], env=env, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True))
        outs = [p.communicate(timeout=RANK_TIMEOUT)[0] for p in procs]
    except subprocess.TimeoutExpired:
        fail(f"the two ranks (seed {seed}) ran past {RANK_TIMEOUT} s")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for rank, (p, out) in enumerate(zip(procs, outs)):
        print(out, end="")
        if p.returncode != 0 or "rank passed" not in out:
            fail(f"rank {rank} (seed {seed}) exited {p.returncode}")
    env = dict(os.environ, PYTHONPATH=site)
    p = subprocess.run([sys.executable, "-m", "ipcpipe.info"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=RANK_TIMEOUT)
    if p.returncode != 0 or "IPCPIPE_CHUNK" not in p.stdout:
        fail(f"python3 -m ipcpipe.info exited {p.returncode}:\n{p.stdout}")


def fresh(n, seed):
    return random.Random(seed).getrandbits(8 * n).to_bytes(n, "little")


def rank(site, seed):
    """One rank: rank 0 sends bytearrays, rank 1 answers each with other
    fresh bytes in a memoryview; both check every byte."""
    import ipcpipe
    import ipcpipe._core
    for mod in (ipcpipe, ipcpipe._core):
        assert mod.__file__.startswith(site + os.sep), mod.__file__
    with ipcpipe.Comm(timeout=30) as comm:
        assert comm.size == 2, comm.size
        peer = 1 - comm.rank
        for i, n in enumerate(SIZES):
            out = [fresh(n, seed + 2 * i + k) for k in (0, 1)]
            got = bytearray(n)
            if comm.rank == 0:
                assert comm.send(bytearray(out[0]), peer, tag=i).nbytes == n
                info = comm.recv(memoryview(got), peer, tag=i)
            else:
                info = comm.recv(got, peer, tag=i)
                assert comm.send(memoryview(out[1]), peer, tag=i).nbytes == n
            assert info.nbytes == n, (n, info)
            assert bytes(got) == out[peer], f"{n} bytes from rank {peer}"
        comm.barrier()
        r = comm.rank
    print(f"rank {r}: ipcpipe {ipcpipe.version()} from {site}: "
          f"rank passed")


def main(argv):
    if argv[:1] == ["--rank"]:
        rank(argv[1], int(argv[2]))
        return 0
    source, work = (os.path.abspath(a) for a in argv)
    if importlib.util.find_spec("pip") is None:
        print(f"install_check: no pip for {sys.executable} (python3-pip): "
              f"skipped")
        return SKIP
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    before = outputs(source)
    site = pip_install(source, work)
    after = outputs(source)
    if after != before:
        fail(f"the build wrote into the source tree: {sorted(after - before)}")
    run_ranks(site)
    print("install_check: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
