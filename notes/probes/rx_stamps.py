"""Reads the time stamps of a build with rx-stamps.patch applied (git apply
in a copy of the tree; four stamps per device transfer with another node:
start, the sender's copy seen ended or the receiver's message in, the
sender's message sent or the receiver's copy seen ended, retire; each
process writes /tmp/rxst.PID at exit).  Prints, per side and length, the
medians [10th-90th percentile] in us of the steps and of the gaps between
consecutive transfers at each stamp.

    python3 rx_stamps.py ['/tmp/rxst.*']
"""
import sys, glob
def statistics_fmt(v):
    v = sorted(v)
    if not v: return "-"
    return "%.2f [%.2f-%.2f]" % (v[len(v)//2]/1e3, v[len(v)//10]/1e3, v[len(v)*9//10]/1e3)
for fn in sorted(glob.glob(sys.argv[1] if len(sys.argv) > 1 else "/tmp/rxst.*")):
    rows = [list(map(int, l.split())) for l in open(fn)]
    by = {}
    for r in rows:
        send, ln = r[0] & 1, r[0] >> 1
        by.setdefault((send, ln), []).append(r[1:])
    for (send, ln), v in sorted(by.items()):
        v.sort()
        print("%s %s len %d n %d" % (fn, "send" if send else "recv", ln, len(v)))
        names = ["copied-start" if send else "head-start", "hopdone-copied" if send else "copied-head", "retire-last"]
        for i, nm in enumerate(names):
            d = [r[i+1] - r[i] for r in v if r[i+1] and r[i]]
            if i == 1 and send:
                d = [r[2] - r[1] for r in v if r[2] and r[1]]
            print("   %-16s us %s" % (nm, statistics_fmt(d)))
        for i in range(4):
            t = sorted(r[i] for r in v if r[i])
            gaps = [b - a for a, b in zip(t, t[1:]) if b - a < 200000]
            print("   gap t%d          us %s" % (i, statistics_fmt(gaps)))
