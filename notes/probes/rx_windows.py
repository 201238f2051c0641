import sys, glob
# Reads the stamps of notes/probes/rx-stamps.patch per window: for each
# stamp, its first, median and last time after the window's first start
# (a window: transfers started with no gap over 50 us), medians over the
# windows after the first two.
#   python3 rx_windows.py "/tmp/rxst.*"
# per window (a new one after 50 us without a start): us after the first start
def q(v):
    v = sorted(v); return "%.0f/%.0f/%.0f" % (v[0], v[len(v)//2], v[-1]) if v else "-"
for fn in sorted(glob.glob(sys.argv[1])):
    rows = sorted([list(map(int, l.split())) for l in open(fn)], key=lambda r: r[1])
    wins, cur = [], []
    for r in rows:
        if cur and r[1] - cur[-1][1] > 50000: wins.append(cur); cur = []
        cur.append(r)
    if cur: wins.append(cur)
    side = "send" if rows and rows[0][0] & 1 else "recv"
    acc = [[], [], [], [], []]
    for w in wins[2:]:
        t0 = w[0][1]
        for i in range(0, 4):
            v = [ (r[i+1] - t0) / 1e3 for r in w if r[i+1] ]
            if v: acc[i].append((min(v), sorted(v)[len(v)//2], max(v)))
    print(fn, side, "windows", len(wins))
    for i in range(0, 4):
        if acc[i]:
            print("   stamp %d: first %s  median %s  last %s (us after the window's start; medians over windows of min/med/max)" % (i,
                  q([a[0] for a in acc[i]]), q([a[1] for a in acc[i]]), q([a[2] for a in acc[i]])))
