import sys, glob
# Per repetition (W transfers in start order) of rx-stamps and poll-stamps:
# us after the rep's first start, medians over reps (the first skipped).
#   python3 notes/probes/rx_reps.py W "/tmp/rxst.*" "/tmp/pollst.*"
W = int(sys.argv[1])
def med(v): v = sorted(v); return v[len(v)//2] if v else float('nan')
def fmt(v): v = sorted(v); return "%7.1f [%.1f-%.1f]" % (v[len(v)//2], v[0], v[-1]) if v else "-"
for fn in sorted(glob.glob(sys.argv[2])):
    rows = sorted([list(map(int, l.split())) for l in open(fn)], key=lambda r: r[1])
    side = "send" if rows and rows[0][0] & 1 else "recv"
    reps = [rows[i:i+W] for i in range(0, len(rows) - W + 1, W)][1:]
    names = ["start", "copied" if side == "send" else "head", "hopdone" if side == "send" else "copied", "retire"]
    print(fn, side, "reps", len(reps))
    for i in range(4):
        a, m, z = [], [], []
        for rp in reps:
            t0 = rp[0][1]
            v = sorted((r[i+1] - t0) / 1e3 for r in rp if r[i+1])
            if v: a.append(v[0]); m.append(v[len(v)//2]); z.append(v[-1])
        print("   %-8s first %s  median %s  last %s" % (names[i], fmt(a), fmt(m), fmt(z)))
for fn in sorted(glob.glob(sys.argv[3])):
    ops = [list(map(int, l.split()[1:])) for l in open(fn) if l[0] == 'o']
    evs = sorted(int(l.split()[1]) for l in open(fn) if l[0] == 'e')
    cp = sorted([o for o in ops if o[0] == 0], key=lambda o: o[1])
    nt = sorted([o for o in ops if o[0] == 1], key=lambda o: o[1])
    print(fn, "copies", len(cp), "notifies", len(nt), "events", len(evs))
    reps = [(cp[i:i+W], nt[i:i+W], evs[i:i+W]) for i in range(0, min(len(cp), len(nt), len(evs)) - W + 1, W)][1:]
    cols = {k: [] for k in ("pick-hand", "enq-pick", "lastenq", "ev1", "evmed", "evlast", "ev-gap")}
    for c, n, e in reps:
        t0 = c[0][1]
        cols["pick-hand"].append(med([o[2] - o[1] for o in c]) / 1e3)
        cols["enq-pick"].append(med([o[3] - o[2] for o in c]) / 1e3)
        cols["lastenq"].append((max(o[3] for o in c + n) - t0) / 1e3)
        cols["ev1"].append((e[0] - t0) / 1e3)
        cols["evmed"].append((e[len(e)//2] - t0) / 1e3)
        cols["evlast"].append((e[-1] - t0) / 1e3)
        cols["ev-gap"].append(med([(e[j+1] - e[j]) / 1e3 for j in range(len(e) - 1)]))
    for k, v in cols.items():
        print("   %-10s %s" % (k, fmt(v)))
