#!/usr/bin/env python3
"""lmin.py - layout-aware MIN prototype over a tencache-table trace.

  python3 lmin.py TABLE.json PCT [--variants a,b,..] [--laps N]

Reimplements plan.c's GPU-level cache core (cache_step/cache_run, policy ours,
reserve 0, cold-first off = the 'Belady (MIN)' figure replay prints) and a
layout-aware variant that keeps every resident at a fixed offset inside the
full budget: a miss (or write-alloc) goes into a free hole, or evicts one
contiguous window of non-held residents picked by a rule (see SCORES).
"""
import json, sys, time, math, argparse
from bisect import bisect_left, insort

READ, WRITE, HOST, END = 1, 2, 4, 8
NEED, RWRITE, RES, FLUSH, KILL = 1, 2, 4, 8, 16
INF = float('inf')
PIN = set()   # tensors kept at a reserved offset (--pin-small)
ALIGN = 256


def load(path):
    d = json.load(open(path))
    tens = d['tensors']
    acc = d['accesses']
    return [t[0] for t in tens], [t[1] for t in tens], acc


def requests(acc):
    n = len(acc)
    op_of, op_end = [0] * n, [0] * n
    op, start = 0, 0
    for i, a in enumerate(acc):
        op_of[i] = op
        if a[2] & END:
            for k in range(start, i + 1):
                op_end[k] = i
            start = i + 1
            op += 1
    rq = []
    for i, a in enumerate(acc):
        t, fl = a[0], a[2]
        if fl & HOST:
            f = (FLUSH if fl & READ else 0) | (KILL if fl & WRITE else 0)
            rq.append((t, -1, op_end[i], f))
        else:
            f = RES | (NEED if fl & READ else 0) | (RWRITE if fl & WRITE else 0)
            rq.append((t, op_of[i], op_end[i], f))
    return rq


def next_use(rq, nt):
    """plan.c next_use, cyclic: nkey[r] (unrolled pos of next NEED, INF if
    overwritten first), st_key[t] (key at lap start)."""
    n = len(rq)
    st_key = [INF] * nt
    nkey = [INF] * n
    for p in range(2 * n - 1, -1, -1):
        t, _, _, f = rq[p % n]
        if p < n:
            nkey[p] = st_key[t]
        if f & NEED:
            st_key[t] = p
        elif (f & (RES | RWRITE)) == (RES | RWRITE) or (f & KILL):
            st_key[t] = INF
    return nkey, st_key


def held_sets(rq):
    """per request index r: the op's tensors are held until its end (cache_step)."""
    grp = {}
    for r, (t, g, e, f) in enumerate(rq):
        if g >= 0:
            grp.setdefault(g, set()).add(t)
    return grp


# ---------------------------------------------------------------- plain MIN
def run_min(rq, bytes_, cap, laps=16, align=False, rule='min'):
    n, nt = len(rq), len(bytes_)
    nkey, st_key = next_use(rq, nt)
    grp = held_sets(rq)
    b = [(x + ALIGN - 1) // ALIGN * ALIGN for x in bytes_] if align else bytes_
    resident = set()
    used = 0
    key = [INF] * nt
    prev_start = None
    hist = []
    for lap in range(laps):
        start = frozenset(resident)
        key = list(st_key)
        held = set()
        cur_g, held_end = None, -1
        hits = reads = 0
        hb = rb = 0
        occ = 0
        for r in range(n):
            t, g, e, f = rq[r]
            if g >= 0 and g != cur_g:
                cur_g, held, held_end = g, grp[g], e
            if r > held_end:
                held = set()
            if (f & KILL) and t in resident:
                resident.discard(t)
                used -= b[t]
            if f & RES:
                if f & NEED:
                    reads += 1
                    rb += bytes_[t]
                if t in resident:
                    if f & NEED:
                        hits += 1
                        hb += bytes_[t]
                else:
                    while used + b[t] > cap:
                        best, bk = None, None
                        for v in resident:
                            if v in held or v in PIN:
                                continue
                            if rule == 'min':
                                k = (key[v], b[v])
                            else:   # 'dens': least (1/dist) per byte, dead first
                                k = (INF if key[v] == INF else -1.0 / ((key[v] - r) * b[v]), b[v])
                            if bk is None or k > bk:
                                best, bk = v, k
                        if best is None:
                            raise RuntimeError('ENOSPC')
                        resident.discard(best)
                        used -= b[best]
                    resident.add(t)
                    used += b[t]
            if f & (RES | FLUSH | KILL):
                key[t] = nkey[r]
            occ += used
        hist.append(hits)
        end = frozenset(resident)
        if start == end and prev_start == start:
            break
        prev_start = start
    return hits, reads, lap + 1, hist, hb, rb, occ / n


# ---------------------------------------------------------- layout-aware MIN
class Arena:
    """residents at fixed offsets; offs sorted list of (off, t)."""

    def __init__(self, B):
        self.B = B
        self.offs = []       # sorted [(off, t)]
        self.where = {}      # t -> off

    def add(self, t, off, ln):
        insort(self.offs, (off, t))
        self.where[t] = off

    def remove(self, t):
        off = self.where.pop(t)
        i = bisect_left(self.offs, (off, t))
        del self.offs[i]


def layout_lap(rq, bytes_, b, B, score, nkey, st_key, grp, start_map, fit='best'):
    """one lap from start_map {t: off}; returns (hits, reads, hb, rb, occ, end_map, stats)"""
    n = len(rq)
    pinb = sum(b[t] for t in PIN)
    A = Arena(B - pinb)
    present = set()
    for t, o in start_map.items():
        A.add(t, o, b[t])
    used = sum(b[t] for t in start_map)
    key = list(st_key)
    held, cur_g, held_end = set(), None, -1
    hits = reads = hb = rb = occ = 0
    st = dict(win_evict=0, evicted_live=0, hole=0)
    for r in range(n):
        t, g, e, f = rq[r]
        if g >= 0 and g != cur_g:
            cur_g, held, held_end = g, grp[g], e
        if r > held_end:
            held = set()
        if t in PIN:
            if f & KILL:
                present.discard(t)
            if f & RES:
                if f & NEED:
                    reads += 1
                    rb += bytes_[t]
                    if t in present:
                        hits += 1
                        hb += bytes_[t]
                present.add(t)
            if f & (RES | FLUSH | KILL):
                key[t] = nkey[r]
            occ += used + pinb
            continue
        if (f & KILL) and t in A.where:
            A.remove(t)
            used -= b[t]
        if f & RES:
            if f & NEED:
                reads += 1
                rb += bytes_[t]
            if t in A.where:
                if f & NEED:
                    hits += 1
                    hb += bytes_[t]
            else:
                off, victims = choose(A, b, key, held, b[t], r, n, score, fit)
                if off is None:
                    raise RuntimeError('ENOSPC at %d' % r)
                for v in victims:
                    A.remove(v)
                    used -= b[v]
                    if key[v] != INF:
                        st['evicted_live'] += 1
                st['win_evict' if victims else 'hole'] += 1
                A.add(t, off, b[t])
                used += b[t]
        if f & (RES | FLUSH | KILL):
            key[t] = nkey[r]
        occ += used + pinb
    return hits, reads, hb, rb, occ / n, dict(A.where), st


def run_layout(rq, bytes_, B, score, laps=8, fit='best', verbose=False):
    """Runs laps from empty until the start map repeats (period) or `laps`;
    then closes the cycle: S <- S & E (same tensor at the same offset) until a
    lap from S ends with E >= S (the seam then only drops E - S), which makes
    the offsets periodic by construction. Returns the closed lap's figures."""
    n, nt = len(rq), len(bytes_)
    nkey, st_key = next_use(rq, nt)
    grp = held_sets(rq)
    b = [(x + ALIGN - 1) // ALIGN * ALIGN for x in bytes_]
    S, seen, hist, period = {}, [], [], 0
    for lap in range(laps):
        res = layout_lap(rq, bytes_, b, B, score, nkey, st_key, grp, S)
        hist.append(res[0])
        seen.append(S)
        E = res[5]
        if E in seen:
            period = len(seen) - seen.index(E)
            break
        S = E
    free = res          # the last free-running lap
    # closure
    cl = 0
    S = {t: o for t, o in S.items()} if period else {t: o for t, o in seen[-1].items() if E.get(t) == o}
    while True:
        res = layout_lap(rq, bytes_, b, B, score, nkey, st_key, grp, S)
        cl += 1
        E = res[5]
        if all(E.get(t) == o for t, o in S.items()):
            break
        S = {t: o for t, o in S.items() if E.get(t) == o}
    st = res[6]
    st['occ'] = res[4]
    st['closure_laps'] = cl
    st['seam_drop'] = len(E) - len(S)
    st['S'] = len(S)
    st['free_hits'] = (free[0], free[2])
    return res[0], res[1], lap + 1, hist, period, st, res[2], res[3]


def choose(A, b, key, held, need, now, n, score, fit):
    """Pick the window [w, w+need) in [0, B): candidates start at a segment
    start or end at a segment end. Returns (offset, victims)."""
    B = A.B
    offs = A.offs
    # segments: residents in address order
    segs = [(o, o + b[t], t) for o, t in offs]
    # boundaries for candidate windows
    cands = set([0, B - need])
    prev_end = 0
    for o, e, t in segs:
        cands.add(o)
        cands.add(e)
        cands.add(o - need)
        cands.add(e - need)
    best, bestsc = None, None
    m = len(segs)
    starts = [s[0] for s in segs]
    for w in sorted(cands):   # deterministic: ties go to the lowest offset
        if w < 0 or w + need > B:
            continue
        we = w + need
        # residents overlapping [w, we)
        i = bisect_left(starts, w)
        if i > 0 and segs[i - 1][1] > w:
            i -= 1
        vic = []
        ok = True
        j = i
        while j < m and segs[j][0] < we:
            if segs[j][2] in held:
                ok = False
                break
            vic.append(segs[j])
            j += 1
        if not ok:
            continue
        # snugness: free bytes adjacent to the window that stay unusable slivers
        lo = segs[i - 1][1] if i > 0 else 0
        hi = segs[j][0] if j < m else B
        lo = min(lo, vic[0][0]) if vic else lo
        hi = max(hi, vic[-1][1]) if vic else hi
        slack = (hi - lo) - need   # free + freed bytes left around it
        sc = (score(vic, key, now, n, slack), len(vic))
        if bestsc is None or sc < bestsc:
            best, bestsc = (w, [v[2] for v in vic]), sc
    if best is None:
        return None, None
    return best


def _live(vic, key):
    return [(key[t], e - o) for o, e, t in vic if key[t] != INF]


def sc_maxmin(vic, key, now, n, slack):
    lv = _live(vic, key)
    soon = min((k for k, _ in lv), default=INF)
    return (-soon, len(lv), sum(x for _, x in lv), slack)


def sc_lex(vic, key, now, n, slack):
    lv = sorted(k for k, _ in _live(vic, key))
    # larger sorted keys better: compare as tuple of negatives, fewer victims better
    return (tuple(-k for k in lv) + (-INF,), slack) if lv else ((-INF,), slack)


def sc_inv(vic, key, now, n, slack):
    lv = _live(vic, key)
    return (sum(1.0 / (k - now) for k, _ in lv), slack)


def sc_binv(vic, key, now, n, slack):
    lv = _live(vic, key)
    return (sum(x / (k - now) for k, x in lv), slack)


def sc_lin(vic, key, now, n, slack):
    # a victim reused within a lap costs ~1 miss; weight by 1 - dist/(2n)
    lv = _live(vic, key)
    return (sum(max(0.0, 1.0 - (k - now) / (2.0 * n)) for k, _ in lv), slack)


SCORES = dict(maxmin=sc_maxmin, lex=sc_lex, inv=sc_inv, binv=sc_binv, lin=sc_lin)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('table')
    ap.add_argument('pct', type=float)
    ap.add_argument('--variants', default='maxmin,lex,inv,binv,lin')
    ap.add_argument('--fracs', default='1.0,0.9,0.85,0.8')
    ap.add_argument('--laps', type=int, default=8)
    ap.add_argument('--dens', action='store_true', help='also byte-granular count-aware MIN (no layout)')
    ap.add_argument('--json')
    ap.add_argument('--pin-small', type=int, default=0, help='bytes: GPU tensors below it get a reserved slot')
    a = ap.parse_args()
    bytes_, roles, acc = load(a.table)
    p16 = sum(x for x, r in zip(bytes_, roles) if r in (0, 1))
    B = int(p16 * a.pct / 100)
    rq = requests(acc)
    if a.pin_small:
        PIN.update(t for t, g, e, f in rq if g >= 0 and bytes_[t] < a.pin_small)
        print('pinned %d tensors, %.2f MiB' % (len(PIN), sum(bytes_[t] for t in PIN) / 2**20))
    out = dict(table=a.table, pct=a.pct, budget=B, n=len(rq))
    print('%s: %d tensors %d accesses, budget %.1f MiB (%.0f%% of fp16 params %.1f MiB)' %
          (a.table, len(bytes_), len(rq), B / 2**20, a.pct, p16 / 2**20))
    for fr in [float(x) for x in a.fracs.split(',') if x]:
        t0 = time.time()
        h, rd, it, hist, hb, rb, occ = run_min(rq, bytes_, int(B * fr), a.laps)
        print('  MIN   %4.0f%%: hits %4d / %d = %6.2f%%  bytes %6.2f%%  occ %.0f%%  laps %d %s  (%.1fs)' %
              (fr * 100, h, rd, 100.0 * h / rd, 100.0 * hb / rb, 100.0 * occ / B, it, hist[-3:], time.time() - t0))
        out['min%.0f' % (fr * 100)] = (h, hb)
        out['reads'] = rd
    if a.dens:
        for fr in [float(x) for x in a.fracs.split(',') if x] or [1.0]:
            h, rd, it, hist, hb, rb, occ = run_min(rq, bytes_, int(B * fr), a.laps, rule='dens')
            print('  DENS  %4.0f%%: hits %4d / %d = %6.2f%%  bytes %6.2f%%  occ %.0f%%  laps %d %s' %
                  (fr * 100, h, rd, 100.0 * h / rd, 100.0 * hb / rb, 100.0 * occ / B, it, hist[-3:]))
            out['dens%.0f' % (fr * 100)] = (h, hb)
    for v in [x for x in a.variants.split(',') if x]:
        t0 = time.time()
        try:
            h, rd, it, hist, per, stt, hb, rb = run_layout(rq, bytes_, B, SCORES[v], a.laps)
        except RuntimeError as e:
            print('  L-%-6s: %s' % (v, e))
            continue
        occ = stt.pop('occ')
        print('  L-%-7s: hits %4d / %d = %6.2f%%  bytes %6.2f%%  occ %.0f%%  laps %d period %s hist %s %s (%.1fs)' %
              (v, h, rd, 100.0 * h / rd, 100.0 * hb / rb, 100.0 * occ / B, it, per, hist[-4:], stt, time.time() - t0))
        out['L-' + v] = (h, hb)
        out['L-' + v + '-periodic'] = per
    if a.json:
        json.dump(out, open(a.json, 'w'))


if __name__ == '__main__':
    main()
