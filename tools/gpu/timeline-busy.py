#!/usr/bin/env python3
# timeline-busy.py - how busy each track of a replay's Perfetto timeline was
# (tencache-bench replay --timeline): per kind of track (H2D, D2H, NVMe
# read, NVMe write, compute, host op, acquire stall, NVMe read / write wait,
# tencache call: an acquire, release or detach of 100 us or more;
# the NVMe jobs in flight at once have a track each) its busy time (the
# union of its spans), its first and last span, and its longest idle gaps;
# then the same for the disk (NVMe read or write), and its idle time split
# by what the staging workers did: waited for their next job's dependencies
# (the wait tracks) or had none queued, and how much of the latter the
# caller spent inside tencache calls. Where the disk sets the step, its
# idle time is what the step loses against the bound. A timeline that holds
# the timing model's step too (pid 2) gets the same for it, then each
# executor span against the model's: how much later it ended, and where
# the lag grew most.
#   python3 tools/gpu/timeline-busy.py TIMELINE.json [...]
import collections
import json
import sys


def merge(spans):
    """The spans' union as sorted, disjoint intervals."""
    out = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def union(spans):
    """Busy time and the idle gaps between the merged spans (in us)."""
    m = merge(spans)
    return sum(b - a for a, b in m), [(x[1], y[0]) for x, y in zip(m, m[1:])]


def show(name, spans, window):
    busy, gaps = union(spans)
    top = sorted(gaps, key=lambda g: g[0] - g[1])[:4]
    print("  %-14s busy %8.1f ms (%5.1f%%)  first %8.1f  last %8.1f  longest idle: %s" % (
        name, busy / 1e3, 100 * busy / window if window else 0,
        min(a for a, _ in spans) / 1e3, max(b for _, b in spans) / 1e3,
        ", ".join("%.1f ms at %.1f" % ((b - a) / 1e3, a / 1e3) for a, b in top) or "none"))


def main(paths):
    for path in paths:
        t = json.load(open(path))
        ev = t["traceEvents"] if isinstance(t, dict) else t
        procs = {e["pid"]: e["args"]["name"] for e in ev
                 if e.get("ph") == "M" and e.get("name") == "process_name"}
        spans = {}
        for pid in sorted({e.get("pid", 1) for e in ev if e.get("ph") == "X"}):
            spans[pid] = [e for e in ev if e.get("ph") == "X" and e.get("pid", 1) == pid]
            one(path if len(spans) == 1 else "  " + procs.get(pid, "pid %d" % pid),
                spans[pid], pid == 1)
        if 1 in spans and 2 in spans:
            compare(spans[1], spans[2])


def one(title, ev, executor):
    """A process's tracks (the executor's, or the timing model's)."""
    # by kind (cat): the NVMe jobs in flight at once have a track each
    tracks = collections.defaultdict(list)
    why = collections.defaultdict(list)     # NVMe waits by what they waited for
    for e in ev:
        tracks[e.get("cat", e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
        if str(e.get("cat", "")).endswith(" wait"):
            w = e.get("args", {}).get("waited for", "unknown")
            why[w.split(" of tensor")[0].split(" ending at")[0]].append(
                (e["ts"], e["ts"] + e["dur"]))
    if not tracks:
        print("%s: no spans" % title)
        return
    t0 = min(a for s in tracks.values() for a, _ in s)
    t1 = max(b for s in tracks.values() for _, b in s)
    print("%s: %.1f ms" % (title, (t1 - t0) / 1e3))
    disk = []
    for name in sorted(tracks, key=str):
        show(str(name), tracks[name], t1 - t0)
        if str(name) in ("NVMe read", "NVMe write"):
            disk += tracks[name]
    if disk:
        show("disk (either)", disk, t1 - t0)
        if executor:
            idle_why(disk, tracks, why, t0, t1)


def compare(real, model):
    """Each copy, staging and op of the executor's step against the same one
    in the model's (the n-th span of a kind and id in each): how much later
    it ended, and where the lag grew most (what to look at first), on the
    model's clock."""
    def by_key(ev):
        d = collections.defaultdict(list)
        for e in sorted(ev, key=lambda e: e["ts"]):
            arg = e.get("args", {})
            d[(e["cat"], arg.get("tensor", arg.get("access")))].append(e)
        return d
    r, m = by_key(real), by_key(model)
    pairs = collections.defaultdict(list)   # kind: (model start, model end, lag of end, id)
    for key, ms in m.items():
        for a, b in zip(r.get(key, []), ms):
            pairs[key[0]].append((b["ts"], b["ts"] + b["dur"],
                                  (a["ts"] + a["dur"]) - (b["ts"] + b["dur"]), key[1]))
    # each clock counts from its own step start (the model's: its last GPU
    # op before; the executor's: step_begin), so the two are aligned at
    # the median of every span's lag
    every = sorted(x[2] for v in pairs.values() for x in v)
    if not every:
        return
    off = every[len(every) // 2]
    for v in pairs.values():
        v[:] = [(a, b, lag - off, i) for a, b, lag, i in v]
    print("  executor against the model (end of each span: the executor's less the model's, "
          "less their median %+.1f ms):" % (off / 1e3))
    for kind in sorted(pairs):
        p = sorted(pairs[kind])
        lags = sorted(x[2] for x in p)
        worst = max(p, key=lambda x: x[2])
        jumps = sorted(((b[2] - a[2], b) for a, b in zip(p, p[1:])), reverse=True)[:3]
        print("    %-12s %4d spans: median %+8.1f ms, max %+8.1f ms (id %s, due at %.1f); "
              "lag grew most at: %s" % (
                  kind, len(p), lags[len(lags) // 2] / 1e3, worst[2] / 1e3, worst[3],
                  worst[1] / 1e3, ", ".join("id %s due at %.1f (%+.1f ms)" % (
                      x[3], x[1] / 1e3, d / 1e3) for d, x in jumps if d > 0) or "none"))


def covered(gaps, spans):
    """How much of the gaps the spans cover (us)."""
    return sum(max(0.0, min(b, d) - max(a, c)) for a, b in gaps for c, d in merge(spans))


def minus(gaps, spans):
    """The parts of the gaps that the spans do not cover."""
    out = []
    m = merge(spans)
    for a, b in gaps:
        for c, d in m:
            if d <= a or c >= b:
                continue
            if c > a:
                out.append((a, c))
            a = max(a, d)
        if a < b:
            out.append((a, b))
    return out


def idle_why(disk, tracks, why, t0, t1):
    """The disk's idle time in the window, split by what its workers did:
    waited for their next job's dependencies (a copy from the GPU, an op,
    pinned space), or had no job queued; and the waits by what they waited
    for last (they may overlap)."""
    _, gaps = union(disk)
    gaps = [(t0, min(a for a, _ in disk))] + gaps + [(max(b for _, b in disk), t1)]
    idle = sum(b - a for a, b in gaps)
    rd = tracks.get("NVMe read wait", [])
    wr = tracks.get("NVMe write wait", [])
    either = covered(gaps, rd + wr)
    print("  disk idle %8.1f ms: a worker waited for its next job's dependencies %.1f ms "
          "(reader %.1f, writer %.1f), neither had a job queued %.1f ms" % (
              idle / 1e3, either / 1e3, covered(gaps, rd) / 1e3, covered(gaps, wr) / 1e3,
              (idle - either) / 1e3))
    # no job queued: the caller had not issued it; was the caller inside
    # a tencache call then (acquire, release or detach of 100 us or more)?
    calls = tracks.get("tencache call", [])
    if calls:
        nojob = minus(gaps, rd + wr)
        print("    of the time with no job queued, the caller was in a tencache call "
              "(>= 100 us) for %.1f ms; such calls took %.1f ms of the step" % (
                  covered(nojob, calls) / 1e3, union(calls)[0] / 1e3))
    parts = sorted(((covered(gaps, v), k) for k, v in why.items()), reverse=True)
    if parts:
        print("    the waits in it, by what they waited for last: %s" % ", ".join(
            "%s %.1f ms" % (k, v / 1e3) for v, k in parts if v > 0))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: timeline-busy.py TIMELINE.json [...]")
    main(sys.argv[1:])
