#!/usr/bin/env python3
# stack-report.py - where the sampled thread spent its time, from a file of
# tools/gpu/stack-sample.c (STACK_SAMPLE_OUT.PID): the functions its samples
# were in (self: the innermost named frame; total: anywhere on the stack),
# then, of the samples inside a tencache call (an acquire, release or detach),
# the paths through the library that took them. Symbols come from addr2line
# (binutils) on each mapped object; a frame with no symbol is named by its
# object. Only samples from --from seconds before the last one are counted
# (default: all).
#   python3 tools/gpu/stack-report.py [--from S] [--top N] FILE
import argparse
import bisect
import collections
import os
import subprocess

# the public calls, and the static functions they may be folded into
CALLS = ("tencache_acquire", "tencache_release", "tencache_op_detach", "acquire", "release",
         "op_detach")


def load(path):
    samples, maps = [], []
    with open(path) as f:
        for line in f:
            if line.startswith("S "):
                p = line.split()
                samples.append((int(p[1]), [int(x, 16) for x in p[2:]]))
            elif line.startswith("M "):
                p = line[2:].split()
                if len(p) >= 6 and "x" in p[1]:
                    a, b = (int(x, 16) for x in p[0].split("-"))
                    maps.append((a, b, int(p[2], 16), p[5]))
    maps.sort()
    return samples, maps


def symbolize(samples, maps):
    starts = [m[0] for m in maps]
    where = {}
    for _, pcs in samples:
        for k, pc in enumerate(pcs):
            # return addresses point past the call: look up the call itself
            q = pc if k == 0 else pc - 1
            if q in where:
                continue
            i = bisect.bisect_right(starts, q) - 1
            if i >= 0 and q < maps[i][1]:
                a, _, off, obj = maps[i]
                where[q] = (obj, q - a + off)
            else:
                where[q] = ("?", q)
    names = {}
    byobj = collections.defaultdict(set)
    for obj, off in where.values():
        byobj[obj].add(off)
    for obj, offs in byobj.items():
        offs = sorted(offs)
        base = os.path.basename(obj)
        syms = []
        if os.path.exists(obj):
            try:
                out = subprocess.run(["addr2line", "-f", "-e", obj] + ["%x" % o for o in offs],
                                     capture_output=True, text=True, timeout=120).stdout.split("\n")
                syms = out[0::2]
            except (OSError, subprocess.SubprocessError):
                syms = []
        for k, o in enumerate(offs):
            s = syms[k] if k < len(syms) else "??"
            names[(obj, o)] = s if s and s != "??" else "[%s]" % base
    return {q: names[w] for q, w in where.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="frm", type=float, default=None)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("file")
    o = ap.parse_args()
    samples, maps = load(o.file)
    if not samples:
        print("no samples")
        return
    if o.frm is not None:
        last = samples[-1][0]
        samples = [s for s in samples if s[0] >= last - o.frm * 1e9]
    sym = symbolize(samples, maps)
    n = len(samples)
    span = (samples[-1][0] - samples[0][0]) / 1e9
    print("%s: %d samples over %.1f s" % (o.file, n, span))
    stacks = []
    for _, pcs in samples:
        st = [sym[pc if k == 0 else pc - 1] for k, pc in enumerate(pcs)]
        # the handler's own frame and the signal trampoline after it
        if "on_prof" in st:
            st = st[st.index("on_prof") + 2:]
        stacks.append(st)
    selfc = collections.Counter(st[0] if st else "?" for st in stacks)
    total = collections.Counter()
    for st in stacks:
        total.update(set(st))
    print("\nself (innermost frame), share of samples:")
    for f, c in selfc.most_common(o.top):
        print("  %6.2f%%  %s" % (100.0 * c / n, f))
    print("\ntotal (anywhere on the stack):")
    for f, c in total.most_common(o.top):
        print("  %6.2f%%  %s" % (100.0 * c / n, f))
    inside = [st for st in stacks if any(f in CALLS for f in st)]
    print("\ninside a tencache call: %.2f%% of the samples" % (100.0 * len(inside) / n))
    paths = collections.Counter()
    for st in inside:
        top = max(i for i, f in enumerate(st) if f in CALLS)
        chain = [f for f in reversed(st[:top + 1])]
        # collapse runs of one library's frames
        out = []
        for f in chain:
            if not out or out[-1] != f or not f.startswith("["):
                out.append(f)
        paths[" > ".join(out)] += 1
    print("  (share of those samples, path from the call inwards)")
    for p, c in paths.most_common(o.top):
        print("  %6.2f%%  %s" % (100.0 * c / len(inside), p))


if __name__ == "__main__":
    main()
