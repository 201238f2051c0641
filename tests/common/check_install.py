#!/usr/bin/env python3
"""An installation found through pkg-config wherever it lies: the build
tree installed with a prefix given at install time (not the configured
one), then moved; pkg-config's flags, read from the moved copy, point into
it, and a program built with them runs against that library and prints
its version.  Where libipcpipe_mpi was built (MPI=1), the same for it: the
ipcpipe-mpi pkg-config file and the CMake component ipcpipe::mpi
(find_package(ipcpipe REQUIRED COMPONENTS mpi)) each build a program
that links it from the moved installation, and the core library does
not need MPI.

  check_install.py BUILD_DIR VERSION CC MPI"""
import os
import shutil
import subprocess
import sys
import tempfile

PROG = r"""
#include <stdio.h>
#include <ipcpipe.h>
int main(void)
{
    printf("%s\n", ipcp_version_string());
    return 0;
}
"""


MPI_PROG = r"""
#include <stdio.h>
#include <ipcpipe_mpi.h>
int main(void)
{
    /* Linked, not called: running it would need a launcher. */
    printf("%s %p\n", ipcp_version_string(), (void *)&ipcp_init_mpi);
    return 0;
}
"""

CMAKE_PROJ = """cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(ipcpipe REQUIRED COMPONENTS mpi)
add_executable(prog prog.c)
target_link_libraries(prog PRIVATE ipcpipe::mpi)
"""


def fail(msg):
    print(f"FAIL: {msg}")
    return 1


def run(args, env=None):
    return subprocess.run(args, capture_output=True, text=True, env=env,
                          timeout=120)


def build(cc, tmp, name, text, flags, libdirs):
    """Writes text to tmp/name.c and compiles it with cc and flags, found
    at run time in libdirs: (source, program, the compiler's result)."""
    src = os.path.join(tmp, name + ".c")
    exe = os.path.join(tmp, name)
    with open(src, "w") as f:
        f.write(text)
    return src, exe, run([cc, src, "-o", exe] + flags +
                         [f"-Wl,-rpath,{d}" for d in libdirs])


def main(build_dir, version, cc, mpi):
    pkgconf = shutil.which("pkg-config")
    if not pkgconf:
        return fail("pkg-config is not installed (.ci/run installs it)")
    with tempfile.TemporaryDirectory() as tmp:
        first = os.path.join(tmp, "first")
        p = run(["cmake", "--install", build_dir, "--prefix", first])
        if p.returncode != 0:
            return fail(f"cmake --install exited {p.returncode}: {p.stderr}")
        moved = os.path.join(tmp, "moved")
        os.rename(first, moved)
        pcs = [os.path.join(d, f) for d, _, fs in os.walk(moved) for f in fs
               if f == "ipcpipe.pc"]
        if len(pcs) != 1:
            return fail(f"ipcpipe.pc installed {len(pcs)} times: {pcs}")
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(pcs[0]))
        env.pop("PKG_CONFIG_LIBDIR", None)
        p = run([pkgconf, "--cflags", "--libs", "ipcpipe"], env=env)
        if p.returncode != 0:
            return fail(f"pkg-config exited {p.returncode}: {p.stderr}")
        flags = p.stdout.split()
        for f in flags:
            if f.startswith(("-I", "-L")):
                path = os.path.realpath(f[2:])
                if not path.startswith(os.path.realpath(moved) + os.sep):
                    return fail(f"{f} points outside the installation "
                                f"({moved})")
        libdirs = [f[2:] for f in flags if f.startswith("-L")]
        if not libdirs or not any(f.startswith("-I") for f in flags):
            return fail(f"no -I or -L in {flags}")
        p = run([pkgconf, "--modversion", "ipcpipe"], env=env)
        if p.stdout.strip() != version:
            return fail(f"--modversion {p.stdout.strip()!r}, not {version}")
        src, exe, p = build(cc, tmp, "prog", PROG, flags, libdirs)
        if p.returncode != 0:
            return fail(f"building against the installation failed: "
                        f"{p.stderr}")
        p = run([exe])
        if p.returncode != 0 or p.stdout.strip() != version:
            return fail(f"the program printed {p.stdout!r} (exit "
                        f"{p.returncode}), expected {version}")
        ldd = run(["ldd", exe]).stdout
        if os.path.realpath(moved) not in ldd and moved not in ldd:
            return fail(f"the program did not load the installed library:\n"
                        f"{ldd}")
        if mpi == "1":
            st = check_mpi(pkgconf, env, moved, tmp, version)
            if st:
                return st
    print(f"ok: ipcpipe {version} found and used from a moved installation"
          f"{' (and ipcpipe-mpi, ipcpipe::mpi)' if mpi == '1' else ''}")
    return 0


def in_tree(ldd, moved, lib):
    """Whether ldd's line for lib names a file of the installation."""
    for line in ldd.splitlines():
        if lib in line and "=>" in line:
            path = os.path.realpath(line.split("=>")[1].split()[0])
            return path.startswith(os.path.realpath(moved) + os.sep)
    return False


def check_mpi(pkgconf, env, moved, tmp, version):
    """ipcpipe-mpi.pc and ipcpipe::mpi from the moved installation."""
    mpicc = shutil.which("mpicc")
    if not mpicc:
        return fail("libipcpipe_mpi was built but there is no mpicc")
    p = run([pkgconf, "--cflags", "--libs", "ipcpipe-mpi"], env=env)
    if p.returncode != 0:
        return fail(f"pkg-config ipcpipe-mpi exited {p.returncode}: "
                    f"{p.stderr}")
    flags = p.stdout.split()
    if "-lipcpipe_mpi" not in flags or "-lipcpipe" not in flags:
        return fail(f"pkg-config ipcpipe-mpi gave {flags}")
    libdirs = [f[2:] for f in flags if f.startswith("-L")]
    src, exe, p = build(mpicc, tmp, "mpiprog", MPI_PROG, flags, libdirs)
    if p.returncode != 0:
        return fail(f"mpicc against ipcpipe-mpi failed: {p.stderr}")
    ldd = run(["ldd", exe]).stdout
    if not in_tree(ldd, moved, "libipcpipe_mpi.so"):
        return fail(f"the MPI program did not load the installed "
                    f"libipcpipe_mpi:\n{ldd}")
    core = [os.path.join(d, f) for d, _, fs in os.walk(moved) for f in fs
            if f.startswith("libipcpipe.so.")]
    for lib in core:
        if "libmpi" in run(["ldd", lib]).stdout:
            return fail(f"{lib} needs MPI: the core must not")
    # CMake: the component, from the moved prefix.
    proj = os.path.join(tmp, "consumer")
    os.mkdir(proj)
    with open(os.path.join(proj, "CMakeLists.txt"), "w") as f:
        f.write(CMAKE_PROJ)
    shutil.copy(src, os.path.join(proj, "prog.c"))
    bld = os.path.join(proj, "build")
    p = run(["cmake", "-S", proj, "-B", bld, f"-DCMAKE_PREFIX_PATH={moved}",
             "-DCMAKE_C_COMPILER=" + mpicc])
    if p.returncode != 0:
        return fail(f"find_package(ipcpipe COMPONENTS mpi) failed:\n"
                    f"{p.stdout[-2000:]}{p.stderr[-2000:]}")
    p = run(["cmake", "--build", bld])
    if p.returncode != 0:
        return fail(f"building against ipcpipe::mpi failed:\n{p.stdout}")
    p = run([os.path.join(bld, "prog")])
    if p.returncode != 0 or not p.stdout.startswith(version + " "):
        return fail(f"the ipcpipe::mpi program printed {p.stdout!r} (exit "
                    f"{p.returncode})")
    if not in_tree(run(["ldd", os.path.join(bld, "prog")]).stdout, moved,
                   "libipcpipe_mpi.so"):
        return fail("the ipcpipe::mpi program did not load the installed "
                    "libipcpipe_mpi")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
