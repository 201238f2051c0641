#!/usr/bin/env python3
"""Where a pipelined transfer loses time, from an IPCPIPE_TRACE file.

    scripts/trace_stats.py TRACE.json [--gap-max-us N]

Per copy track (rank, peer, direction, device, queue): the copies, the
rate while copying, and the idle gaps between one copy and the next (gaps
longer than --gap-max-us, default 2000, are counted as pauses between
transfers, not inside one).  Per direction of the staged path: the
hand-over, from the end of the sender's copy of a chunk into the ring to
the start of the receiver's copy of it out of the ring (the i-th staged
copy of one side paired with the i-th of the other, in start order); for
transfers the receiver copies itself, from the end of its copy of a chunk
into its stage ("stage": "out") to the start of its copy of it into the
receive buffer ("stage": "in"), on a line of their own.

The trace's own stamps sit between the copies of a queue, so the gaps
include their cost; compare runs traced the same way."""
import json
import re
import statistics
import sys


def pct(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    gap_max = 2000.0
    for a in argv[1:]:
        if a.startswith("--gap-max-us="):
            gap_max = float(a.split("=", 1)[1])
    if len(args) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(args[0]) as f:
        events = json.load(f)
    names = {}
    tracks = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
        elif e.get("ph") == "X" and e.get("name") == "copy":
            tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    if not tracks:
        if protocol(events):
            return 0
        print("no copy slices in the trace (was IPCPIPE_TRACE set on every "
              "rank?)")
        return 1

    print("%-44s %6s %8s %10s %10s %10s %6s" %
          ("track", "copies", "MiB", "GB/s copy", "gap med us", "gap p90 us",
           "pauses"))
    for key in sorted(tracks):
        cs = sorted(tracks[key], key=lambda e: e["ts"])
        nbytes = sum(e["args"]["bytes"] for e in cs)
        busy = sum(e["dur"] for e in cs)
        gaps = [b["ts"] - (a["ts"] + a["dur"]) for a, b in zip(cs, cs[1:])]
        inner = [g for g in gaps if g <= gap_max]
        label = "rank %d %s" % (key[0], names.get(key, "track %d" % key[1]))
        print("%-44s %6d %8.1f %10.1f %10.1f %10.1f %6d" %
              (label[:44], len(cs), nbytes / 2**20,
               nbytes / busy / 1e3 if busy > 0 else float("nan"),
               statistics.median(inner) if inner else float("nan"),
               pct(inner, 0.9), len(gaps) - len(inner)))

    # Staged chunks: the sender's copies into the ring are on its "to rank
    # R" tracks, the receiver's copies out on its "from rank S" tracks.  A
    # receiver-driven transfer makes both halves in the receiver, on "from"
    # tracks, marked "stage": "out" (into its stage) and "in"; they are
    # paired apart from the ring's.
    sides = {}
    for (pid, tid), cs in tracks.items():
        m = re.match(r"(to|from) rank (\d+)", names.get((pid, tid), ""))
        if not m:
            continue
        peer = int(m.group(2))
        flow = (pid, peer) if m.group(1) == "to" else (peer, pid)
        for e in cs:
            if e["args"].get("path") != "staged":
                continue
            half = e["args"].get("stage")
            out = half == "out" if half else m.group(1) == "to"
            key = flow + (half is not None,)
            sides.setdefault(key, ([], []))[0 if out else 1].append(e)
    for (src, dst, driven), (out, inn) in sorted(sides.items()):
        if not out or not inn:
            continue
        out.sort(key=lambda e: e["ts"])
        inn.sort(key=lambda e: e["ts"])
        n = min(len(out), len(inn))
        hand = [inn[i]["ts"] - (out[i]["ts"] + out[i]["dur"])
                for i in range(n)]
        print("staged rank %d -> rank %d%s: %d chunks paired (%d / %d), "
              "hand-over median %.1f us, p10 %.1f, p90 %.1f" %
              (src, dst, " (receiver-driven)" if driven else "", n,
               len(out), len(inn), statistics.median(hand),
               pct(hand, 0.1), pct(hand, 0.9)))
    transfers(events, names)
    protocol(events)
    return 0


def transfers(events, names):
    """Per transfer, seen from each rank's own span of it (from the post of
    its half to its completion): how long until the first copy of either
    rank starts, when the direct and the staged copies end, and how long
    the completion takes to be seen after the last copy.  For a striped
    transfer the part that ends last sets the time: the staged part ending
    well before the direct one says its share could grow, and the
    reverse."""
    copies = sorted((e for e in events
                     if e.get("ph") == "X" and e.get("name") == "copy"),
                    key=lambda e: e["ts"])
    spans = [e for e in events if e.get("ph") == "X" and e.get("name") == "transfer"
             and e["args"].get("bytes", 0) >= 1 << 20]
    rows = {}
    for x in spans:
        t0, t1 = x["ts"], x["ts"] + x["dur"]
        inside = [c for c in copies
                  if c["ts"] >= t0 and c["ts"] + c["dur"] <= t1]
        if not inside:
            continue
        first = min(c["ts"] for c in inside)
        last = max(c["ts"] + c["dur"] for c in inside)
        direct = [c["ts"] + c["dur"] for c in inside
                  if c["args"].get("path") != "staged"]
        staged = [c["ts"] + c["dur"] for c in inside
                  if c["args"].get("path") == "staged"]
        key = (x["pid"], x["args"].get("path", "?"), x["args"]["bytes"])
        rows.setdefault(key, []).append((
            first - t0, last - first,
            (max(direct) - first) if direct else float("nan"),
            (max(staged) - first) if staged else float("nan"),
            t1 - last))
    if not rows:
        return
    print("%-30s %5s %9s %10s %10s %10s %9s" %
          ("transfers (medians, us)", "n", "to copy", "copies",
           "direct end", "staged end", "to done"))
    for (pid, path, nbytes), rs in sorted(rows.items()):
        med = [statistics.median(r[i] for r in rs) for i in range(5)]
        print("%-30s %5d %9.1f %10.1f %10.1f %10.1f %9.1f" %
              (("rank %d %s %dM" % (pid, path, nbytes >> 20))[:30], len(rs),
               *med))


def protocol(events):
    """Per transfer between two ranks, the protocol's steps on one time
    line: from the later of the two calls (in the benchmark, both ranks
    leaving the barrier), when each side called and its progress thread
    took the call up (start: a sender's RTS leaves then), when the
    receiver met the RTS (recv meet) and sent its CTS, when the sender saw the
    CTS (send meet), when the call that enqueues each side's first copy
    returned (copy: submitted by then), when each side had all its
    operations queued (enq),
    when each saw its device work done, and when each completed (end).
    The k-th receive of a rank from a peer goes with the k-th send of that
    peer to it (one tag, in order: the benchmark's case).  Returns whether
    it printed anything."""
    spans = [e for e in events if e.get("ph") == "X"
             and e.get("name") == "transfer" and "call" in e["args"]
             and "side" in e["args"] and e["args"].get("bytes", 0) >= 1 << 20]
    sides = {}
    for x in sorted(spans, key=lambda e: e["args"]["call"]):
        a = x["args"]
        me, peer = x["pid"], a["peer"]
        key = (me, peer) if a["side"] == "send" else (peer, me)
        sides.setdefault((key, a["side"]), []).append(x)
    cols = (("send", "call"), ("recv", "call"), ("send", "start"),
            ("recv", "start"), ("recv", "meet"), ("recv", "cts"),
            ("send", "meet"), ("send", "copy"), ("recv", "copy"),
            ("send", "enq"), ("recv", "enq"),
            ("send", "done"), ("recv", "done"), ("send", "end"),
            ("recv", "end"))
    rows = {}
    for ((src, dst), side), xs in sides.items():
        if side != "send":
            continue
        for s, r in zip(xs, sides.get(((src, dst), "recv"), [])):
            if s["args"]["bytes"] != r["args"]["bytes"]:
                continue
            t0 = max(s["args"]["call"], r["args"]["call"])
            ev = {"send": s, "recv": r}
            vals = []
            for who, m in cols:
                e = ev[who]
                t = (e["ts"] + e["dur"] if m == "end"
                     else e["args"].get(m, float("nan")))
                vals.append(t - t0)
            key = (src, dst, r["args"].get("path", "?"), r["args"]["bytes"])
            rows.setdefault(key, []).append(vals)
    if not rows:
        return False
    print("protocol (medians, us from the later call)  n  " +
          " ".join("%9s" % ("%s %s" % c) for c in cols))
    for (src, dst, path, nbytes), vs in sorted(rows.items()):
        med = [statistics.median(v[i] for v in vs) for i in range(len(cols))]
        print("%-41s %3d  " % (("%d->%d %s %dM" % (src, dst, path,
                                                  nbytes >> 20))[:41],
                                len(vs)) +
              " ".join("%9.1f" % m for m in med))
    return True


if __name__ == "__main__":
    sys.exit(main(sys.argv))
