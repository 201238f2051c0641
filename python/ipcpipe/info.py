"""What ipcpipe sees here: python3 -m ipcpipe.info [ipcpipe-info's options]

Runs ipcpipe-info (on PATH, or in the build tree beside the package) with
the options given: the library's version, the machine's GPUs and the
paths between them, every setting.  Where the tool is not installed (a
pip install builds the library alone) it prints what the package itself
knows: the version and every IPCPIPE_* setting in effect."""
import subprocess
import sys

from . import _core, _tools


def find_tool():
    return _tools.find_tool("ipcpipe-info")


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
