#!/usr/bin/env python3
"""ipcpipe-info on a machine without a usable GPU: exits 0, says so plainly
(text and JSON agree), and lists every setting.  Skips (77) where a GPU is
usable: the GPU doctor is checked by scripts/gpu-check.sh there."""
import json
import subprocess
import sys


def main(info):
    js = subprocess.run([info, "--json"], capture_output=True, text=True)
    if js.returncode != 0:
        print(f"FAIL: ipcpipe-info --json exited {js.returncode}: {js.stderr}")
        return 1
    d = json.loads(js.stdout)
    if d["gpus"]["usable"]:
        print("SKIP: a GPU is usable here")
        return 77
    reason = d["gpus"].get("reason", "")
    if not reason:
        print("FAIL: no reason given for having no GPU")
        return 1
    tx = subprocess.run([info], capture_output=True, text=True)
    if tx.returncode != 0:
        print(f"FAIL: ipcpipe-info exited {tx.returncode}")
        return 1
    if "GPUs:\n  none usable: " not in tx.stdout:
        print("FAIL: the text does not say plainly that no GPU is usable")
        return 1
    names = [s["name"] for s in d["settings"]] if "settings" in d else []
    for n in names:
        if n not in tx.stdout:
            print(f"FAIL: setting {n} missing from the text output")
            return 1
    print(f"ok: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
