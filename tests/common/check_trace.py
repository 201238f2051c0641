#!/usr/bin/env python3
"""Checks a trace written by IPCPIPE_TRACE (test_trace.c's run)."""
import json
import sys

STAGED, DIRECT = 3 << 20, (5 << 20) + 7


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def main(path):
    with open(path) as f:
        events = json.load(f)
    if not isinstance(events, list) or not events:
        fail("not a non-empty JSON array")
    last = {}
    copied = {}
    summary = None
    for e in events:
        for key in ("ph", "name", "pid", "tid"):
            if key not in e:
                fail(f"event without {key}: {e}")
        if e["name"] == "ipcpipe_summary":
            summary = e["args"]
        if e["ph"] != "X":
            continue
        if e["dur"] < 0:
            fail(f"negative duration: {e}")
        track = (e["pid"], e["tid"])
        if e["ts"] < last.get(track, 0):
            fail(f"timestamps go back on track {track}: {e}")
        last[track] = e["ts"]
        if e["name"] == "copy":
            key = (e["pid"], e["args"]["path"])
            copied[key] = copied.get(key, 0) + e["args"]["bytes"]
    want = {(0, "staged"): STAGED, (1, "staged"): STAGED,
            (0, "direct"): DIRECT}
    for key, n in want.items():
        if copied.get(key) != n:
            fail(f"rank {key[0]} copied {copied.get(key)} bytes by the "
                 f"{key[1]} path, expected {n}")
    if not summary or not summary.get("overlap", 0) > 0:
        fail(f"no overlap summary: {summary}")
    print(f"trace ok: {len(events)} events, {len(last)} tracks, "
          f"overlap {summary['overlap']}")


if __name__ == "__main__":
    main(sys.argv[1])
