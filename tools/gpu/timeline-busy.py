#!/usr/bin/env python3
# timeline-busy.py - how busy each track of a replay's Perfetto timeline was
# (tencache-bench replay --timeline): per kind of track (H2D, D2H, NVMe
# read, NVMe write, compute, host op, acquire stall; the NVMe jobs in flight
# at once have a track each) its busy time (the union of its spans), its
# first and last span, and its longest idle gaps; then the same for the
# disk (NVMe read or write). Where the disk sets the step, its idle
# time is what the step loses against the bound.
#   python3 tools/gpu/timeline-busy.py TIMELINE.json [...]
import collections
import json
import sys


def union(spans):
    """Busy time and the idle gaps between the merged spans (in us)."""
    spans = sorted(spans)
    busy, gaps, cur = 0.0, [], None
    for a, b in spans:
        if cur is None or a > cur[1]:
            if cur:
                busy += cur[1] - cur[0]
                gaps.append((cur[1], a))
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    if cur:
        busy += cur[1] - cur[0]
    return busy, gaps


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
        # by kind (cat): the NVMe jobs in flight at once have a track each
        tracks = collections.defaultdict(list)
        for e in ev:
            if e.get("ph") == "X":
                tracks[e.get("cat", e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
        if not tracks:
            print("%s: no spans" % path)
            continue
        t0 = min(a for s in tracks.values() for a, _ in s)
        t1 = max(b for s in tracks.values() for _, b in s)
        print("%s: %.1f ms" % (path, (t1 - t0) / 1e3))
        disk = []
        for name in sorted(tracks, key=str):
            show(str(name), tracks[name], t1 - t0)
            if str(name).startswith("NVMe"):
                disk += tracks[name]
        if disk:
            show("disk (either)", disk, t1 - t0)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: timeline-busy.py TIMELINE.json [...]")
    main(sys.argv[1:])
