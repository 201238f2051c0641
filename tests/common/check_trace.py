#!/usr/bin/env python3
"""Checks a trace written by IPCPIPE_TRACE (test_trace.c's run).

    check_trace.py TRACE.json
    check_trace.py --driven TRACE.json TRACE_STATS.py BYTES [SRC:DST]

The second form checks a transfer of BYTES from rank 0 to rank 1 that rank
1 copied itself, striped (test_trace.c's "driven" mode on host memory, or
test_cuda_sendrecv between GPUs SRC and DST), and that trace_stats.py
pairs the staged part's copies out and in."""
import json
import re
import subprocess
import sys

STAGED, DIRECT = 3 << 20, (5 << 20) + 7


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def load(path):
    with open(path) as f:
        events = json.load(f)
    if not isinstance(events, list) or not events:
        fail("not a non-empty JSON array")
    return events


def driven(path, stats, nbytes, devices):
    """Rank 1 copied everything: direct pieces (path "striped"), the staged
    part out of rank 0's buffer into its stage ("stage": "out") and from
    there into its own ("stage": "in"), the two halves on tracks of their
    own and of equal bytes; between GPUs, the direct part and the copies
    out on the sender's GPU's queues, the copies in on the receiver's."""
    events = load(path)
    check_tracks(events)
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    copies = [e for e in events
              if e.get("ph") == "X" and e.get("name") == "copy"]
    if any(e["pid"] != 1 for e in copies):
        fail("rank 0 has copies: the receiver should have made them all")
    parts = {"direct": [], "out": [], "in": []}
    for e in copies:
        a = e["args"]
        if a["path"] == "striped":
            parts["direct"].append(e)
        elif a["path"] == "staged" and a.get("stage") in ("out", "in"):
            parts[a["stage"]].append(e)
        else:
            fail(f"a copy of path {a['path']}, stage {a.get('stage')}: {e}")
    n = {k: sum(e["args"]["bytes"] for e in v) for k, v in parts.items()}
    if not n["in"] or n["out"] != n["in"]:
        fail(f"staged bytes out {n['out']}, in {n['in']}: expected equal, "
             "and more than none")
    if n["direct"] + n["in"] != nbytes:
        fail(f"direct {n['direct']} + staged {n['in']} bytes, expected "
             f"{nbytes}")
    tracks = {k: {e["tid"] for e in v} for k, v in parts.items()}
    if tracks["out"] & (tracks["in"] | tracks["direct"]):
        fail(f"copies out share a track with others: {tracks}")
    if devices:
        src, dst = devices.split(":")
        for part, dev in (("direct", src), ("out", src), ("in", dst)):
            for tid in tracks[part]:
                name = names.get((1, tid), "")
                if not name.startswith(f"from rank 0, cuda device {dev} "):
                    fail(f"{part} copies on track '{name}', expected one "
                         f"of rank 1's queues of GPU {dev}")
    res = subprocess.run([sys.executable, stats, path], capture_output=True,
                         text=True)
    chunks = len(parts["in"])
    want = (rf"staged rank 0 -> rank 1 \(receiver-driven\): {chunks} "
            rf"chunks paired \({chunks} / {chunks}\)")
    if res.returncode != 0 or not re.search(want, res.stdout):
        fail(f"trace_stats.py (rc {res.returncode}) did not print "
             f"'{want}':\n{res.stdout}{res.stderr}")
    print(f"driven trace ok: direct {n['direct']}, staged {n['in']} bytes "
          f"in {chunks} chunks")


def check_tracks(events):
    """Every event named; durations not negative; on each track the slices
    in time order and none starting before the previous one ended; an
    overlap summary from the merge.  Returns (summary, tracks seen)."""
    end = {}
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
        # The request track's transfers may overlap (a window of them);
        # a queue's slices follow one another.
        if e["tid"] != 0 and e["ts"] < end.get(track, 0) - 1e-3:
            fail(f"a slice on track {track} starts before the one before "
                 f"it ended: {e}")
        end[track] = max(end.get(track, 0), e["ts"] + e["dur"])
    if not summary or not summary.get("overlap", 0) > 0:
        fail(f"no overlap summary: {summary}")
    return summary, len(end)


def main(path):
    events = load(path)
    summary, ntracks = check_tracks(events)
    copied = {}
    for e in events:
        if e["ph"] == "X" and e["name"] == "copy":
            key = (e["pid"], e["args"]["path"])
            copied[key] = copied.get(key, 0) + e["args"]["bytes"]
    want = {(0, "staged"): STAGED, (1, "staged"): STAGED,
            (0, "direct"): DIRECT}
    for key, n in want.items():
        if copied.get(key) != n:
            fail(f"rank {key[0]} copied {copied.get(key)} bytes by the "
                 f"{key[1]} path, expected {n}")
    print(f"trace ok: {len(events)} events, {ntracks} tracks, "
          f"overlap {summary['overlap']}")


if __name__ == "__main__":
    if len(sys.argv) in (5, 6) and sys.argv[1] == "--driven":
        driven(sys.argv[2], sys.argv[3], int(sys.argv[4]),
               sys.argv[5] if len(sys.argv) == 6 else None)
    elif len(sys.argv) == 2:
        main(sys.argv[1])
    else:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
