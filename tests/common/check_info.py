#!/usr/bin/env python3
"""ipcpipe-info on a machine without a usable GPU: exits 0, says so plainly
(text and JSON agree), and lists every setting; its --version (on any
machine) names the library's version.  Skips (77) where a GPU is
usable: the GPU doctor is checked by scripts/gpu-check.sh there.

With --gpu, the other way round (skips without a usable GPU): every GPU
says whether MPS is on (yes, no, or unknown only with a driver older than
CUDA 13), in the JSON and as one line of the text, and where it sits on
PCI (its chain of bridges, the GPUs sharing its root port, the matrix of
links)."""
import json
import subprocess
import sys


def check_gpu(info):
    js = subprocess.run([info, "--json"], capture_output=True, text=True)
    if js.returncode != 0:
        print(f"FAIL: ipcpipe-info --json exited {js.returncode}: {js.stderr}")
        return 1
    g = json.loads(js.stdout)["gpus"]
    if not g["usable"]:
        print(f"SKIP: no usable GPU: {g.get('reason', '')}")
        return 77
    tx = subprocess.run([info], capture_output=True, text=True)
    if tx.returncode != 0:
        print(f"FAIL: ipcpipe-info exited {tx.returncode}")
        return 1
    lines = [l.strip() for l in tx.stdout.splitlines()
             if l.strip().startswith("MPS: ")]
    if len(lines) != len(g["devices"]):
        print(f"FAIL: {len(lines)} MPS lines for {len(g['devices'])} GPUs")
        return 1
    for dev, line in zip(g["devices"], lines):
        mps = dev.get("mps")
        if mps not in ("yes", "no", "unknown"):
            print(f"FAIL: GPU {dev['index']}: mps is {mps!r}")
            return 1
        if mps == "unknown" and g["driver_version"] >= 13000:
            print(f"FAIL: GPU {dev['index']}: MPS unknown with driver "
                  f"{g['driver_version']}, which reports it")
            return 1
        if not dev.get("mps_note") or line != f"MPS: {mps}; {dev['mps_note']}":
            print(f"FAIL: GPU {dev['index']}: text {line!r} does not match "
                  f"the JSON ({mps!r}, {dev.get('mps_note')!r})")
            return 1
        print(f"ok: GPU {dev['index']}: {line}")
    return check_topology(g, tx.stdout)


def check_topology(g, text):
    """Every GPU's place on PCI: its chain ending in its own bus id, the
    count behind its root port at least itself, a PCI line of the text
    each; the matrix n x n, "self" on the diagonal and only there,
    symmetric."""
    n = len(g["devices"])
    pci_lines = [l.strip() for l in text.splitlines()
                 if l.strip().startswith("PCI: ")]
    if len(pci_lines) != n:
        print(f"FAIL: {len(pci_lines)} PCI lines for {n} GPUs")
        return 1
    for dev, line in zip(g["devices"], pci_lines):
        if "pci" not in dev:
            print(f"FAIL: GPU {dev['index']}: no pci in the JSON: {dev}")
            return 1
        p = dev["pci"]
        dom, rest = dev["pci_bus_id"].lower().split(":", 1)
        want = f"{int(dom, 16):04x}:{rest}"
        if "reason" in p:
            # Where sysfs does not show the GPU (WSL2, some containers):
            # said, in the text too, not a failure.
            if f"PCI: not found ({p['reason']})" != line:
                print(f"FAIL: GPU {dev['index']}: {p} against {line!r}")
                return 1
            print(f"note: GPU {dev['index']}: not found on PCI: {p['reason']}")
            continue
        if p["chain"][-1] != want or not p["root"].startswith("pci"):
            print(f"FAIL: GPU {dev['index']}: chain {p['chain']} under "
                  f"{p['root']}, its bus id {want}")
            return 1
        if p["host_link_shared_by"] < 1 or f"host bridge {p['root']}" not in line:
            print(f"FAIL: GPU {dev['index']}: {p} against {line!r}")
            return 1
        print(f"ok: GPU {dev['index']}: {line}")
    t = g["topology"]
    for a in range(n):
        for b in range(n):
            if (t[a][b] == "self") != (a == b) or t[a][b] != t[b][a]:
                print(f"FAIL: topology {t}")
                return 1
    print(f"ok: topology {t}")
    return 0


def main(info):
    js = subprocess.run([info, "--json"], capture_output=True, text=True)
    if js.returncode != 0:
        print(f"FAIL: ipcpipe-info --json exited {js.returncode}: {js.stderr}")
        return 1
    d = json.loads(js.stdout)
    # --version, on any machine: the library's version, as the JSON has it.
    v = subprocess.run([info, "--version"], capture_output=True, text=True)
    if v.returncode != 0 or v.stdout != f"ipcpipe-info {d['version']}\n":
        print(f"FAIL: --version exited {v.returncode} with {v.stdout!r}, "
              f"expected 'ipcpipe-info {d['version']}'")
        return 1
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
    if len(sys.argv) == 3 and sys.argv[1] == "--gpu":
        sys.exit(check_gpu(sys.argv[2]))
    sys.exit(main(sys.argv[1]))
