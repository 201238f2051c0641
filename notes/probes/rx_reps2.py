import sys, glob
# Per repetition (W transfers in start order) of rx-stamps2: us after the
# rep's first start, medians over reps (the first skipped) of the first,
# median and last transfer's stamp.
#   python3 notes/probes/rx_reps2.py W "/tmp/rxst.*"
W = int(sys.argv[1])
def fmt(v): v = sorted(v); return "%7.1f [%.1f-%.1f]" % (v[len(v)//2], v[0], v[-1]) if v else "-"
for fn in sorted(glob.glob(sys.argv[2])):
    rows = sorted([list(map(int, l.split())) for l in open(fn)], key=lambda r: r[1])
    side = "send" if rows and rows[0][0] & 1 else "recv"
    reps = [rows[i:i+W] for i in range(0, len(rows) - W + 1, W)][1:]
    if side == "send":
        names = ["call", "D2H seen", "MPI done", "retire", "D2H cb", "D2H handed"]
    else:
        names = ["call", "MPI done", "H2D seen", "retire", "H2D cb", "H2D handed"]
    print(fn, side, "reps", len(reps))
    for i in (0, 5, 4, 1, 2, 3):
        a, m, z = [], [], []
        for rp in reps:
            t0 = rp[0][1]
            v = sorted((r[i+1] - t0) / 1e3 for r in rp if r[i+1])
            if v: a.append(v[0]); m.append(v[len(v)//2]); z.append(v[-1])
        print("   %-10s first %s  median %s  last %s" % (names[i], fmt(a), fmt(m), fmt(z)))
