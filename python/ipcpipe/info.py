"""What ipcpipe sees here: python3 -m ipcpipe.info [ipcpipe-info's options]

Runs ipcpipe-info (on PATH, or in the build tree beside the package) with
the options given: the library's version, the machine's GPUs and the
paths between them, every setting.  Where the tool is not installed (a
pip install builds the library alone) it prints what the package itself
knows: the version and every IPCPIPE_* setting in effect."""
import os
import shutil
import subprocess
import sys

from . import _core


def find_tool():
    found = shutil.which("ipcpipe-info")
    if found:
        return found
    here = os.path.dirname(os.path.abspath(__file__))
    cand = os.path.join(here, "..", "..", "tools", "ipcpipe-info")
    return cand if os.access(cand, os.X_OK) else None


def main(argv):
    tool = find_tool()
    if tool:
        return subprocess.call([tool] + argv)
    print(f"ipcpipe {_core.version()} (the Python package; ipcpipe-info is "
          f"not installed: no GPU facts here)")
    print("settings:")
    for name, value, deflt, doc, is_set in _core.settings():
        mark = " (set)" if is_set else ""
        print(f"  {name}={value}{mark}  default {deflt}: {doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
