#!/usr/bin/env python3
"""An installation found through pkg-config wherever it lies: the build
tree installed with a prefix given at install time (not the configured
one), then moved; pkg-config's flags, read from the moved copy, point into
it, and a program built with them runs against that library and prints
its version.

  check_install.py BUILD_DIR VERSION CC"""
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


def fail(msg):
    print(f"FAIL: {msg}")
    return 1


def run(args, env=None):
    return subprocess.run(args, capture_output=True, text=True, env=env,
                          timeout=120)


def main(build, version, cc):
    pkgconf = shutil.which("pkg-config")
    if not pkgconf:
        return fail("pkg-config is not installed (.ci/run installs it)")
    with tempfile.TemporaryDirectory() as tmp:
        first = os.path.join(tmp, "first")
        p = run(["cmake", "--install", build, "--prefix", first])
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
        src = os.path.join(tmp, "prog.c")
        exe = os.path.join(tmp, "prog")
        with open(src, "w") as f:
            f.write(PROG)
        p = run([cc, src, "-o", exe] + flags +
                [f"-Wl,-rpath,{d}" for d in libdirs])
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
    print(f"ok: ipcpipe {version} found and used from a moved installation")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
