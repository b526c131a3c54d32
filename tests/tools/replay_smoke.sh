#!/bin/bash
# replay_smoke.sh - CI smoke test of the main job: runs the README's command,
# tencache-bench replay, in host mode on a small model at a budget that makes
# the policies evict, and checks its outputs: the JSON result parses and holds
# every policy with sane figures (hits <= acquires, bytes moved, one time per
# measured step; the GPU-timeline hits and stall, which in host mode equal
# hits and stall, also per step), ours ran from a plan, and the timelines (ours, and with
# --timeline-all every other policy's next to it) are Chrome trace-event JSON with copy,
# compute and stall events. GOAL=belady (by hand, not in CI)
# checks the issue's goal instead: ours' GPU hit rate equals the Belady optimum
# for the budget. Exit 0 pass, 1 fail.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" replay-smoke
GOAL=${GOAL:-}
STEPS=2

# 4 layers of OPT-1.3B's shape at hidden 512, vocab 2048, 1 x 1024 tokens:
# 345 tensors, 229 MiB; the budget (75% of the fp16 params) is 1.6x the
# largest op. 10 TFLOP/s gives host mode's memcpy links time to keep up.
set -x
"$BENCH" replay --host --layers 4 --vocab 2048 --batch 1 --tflops 10 --gpu-budget 75% \
	--warmup 2 --steps $STEPS -o "$T/replay.json" --timeline "$T/timeline.json" --timeline-all \
	> "$T/out.txt" 2>&1
rc=$?
set +x
cat "$T/out.txt"
[ "$rc" = 0 ] || { echo "FAIL: replay exited $rc"; exit 1; }
grep -q '^tencache ' "$T/out.txt" || { echo "FAIL: no table row for ours"; exit 1; }

python3 - "$T/replay.json" "$T/timeline.json" "$STEPS" "$GOAL" <<'PY'
import json, sys

res, tl, steps, goal = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
bad = []
def check(cond, msg):
    if not cond:
        bad.append(msg)

d = json.load(open(res))
check(d.get("mode") == "host", "mode is %r, not host" % d.get("mode"))
pols = {p["policy"]: p for p in d["policies"]}
want = ["tencache", "lru", "zero-inf", "10cache"]
check(sorted(pols) == sorted(want), "policies %s, want %s" % (sorted(pols), want))
belady = d.get("belady_hit_rate", -1)
check(0 < belady <= 1, "belady_hit_rate %r" % belady)
state = d["trace"]["bytes"]
check(d["cache"]["gpu_budget"] < state, "the budget holds all the state: nothing to evict")
# the bounds' rates: per link, the fastest any policy's cache measured
runbw = {}
for p in d["policies"]:
    for k, v in (p.get("link_bw", {}) if p.get("ok") else {}).items():
        runbw[k] = max(runbw.get(k, 0), v)
for name in want:
    p = pols.get(name)
    if not p:
        continue
    if not p.get("ok"):
        bad.append("%s did not run: %s" % (name, p.get("error")))
        continue
    check(p["acquires"] > 0, "%s: no acquires" % name)
    check(0 <= p["hits"] <= p["acquires"], "%s: hits %d of %d acquires" % (name, p["hits"], p["acquires"]))
    check(len(p["step_ns"]) == steps and all(t > 0 for t in p["step_ns"]),
          "%s: step times %r, want %d" % (name, p["step_ns"], steps))
    # the compute's clock: in host mode the host's, so the same figures
    for k in ("gpu_hits", "gpu_hit_rate", "gpu_stall_ns", "step_hits", "step_gpu_hits",
              "step_stall_ns", "step_gpu_stall_ns"):
        check(k in p, "%s: no %s in the JSON" % (name, k))
    if all(k in p for k in ("gpu_hits", "gpu_stall_ns", "step_gpu_hits", "step_gpu_stall_ns")):
        check(p["gpu_hits"] == p["hits"] and p["gpu_stall_ns"] == p["stall_ns"],
              "%s: host mode GPU-timeline hits %d stall %d ns differ from hits %d stall %d ns" %
              (name, p["gpu_hits"], p["gpu_stall_ns"], p["hits"], p["stall_ns"]))
        check(p["step_gpu_hits"] == p["step_hits"] and
              p["step_gpu_stall_ns"] == p["step_stall_ns"] and len(p["step_hits"]) == steps,
              "%s: per-step GPU-timeline figures %r %r differ from %r %r" %
              (name, p["step_gpu_hits"], p["step_gpu_stall_ns"], p["step_hits"],
               p["step_stall_ns"]))
        check(abs(p["gpu_hit_rate"] - p["hits"] / max(p["acquires"], 1)) < 1e-9,
              "%s: gpu_hit_rate %r" % (name, p["gpu_hit_rate"]))
    check(p["link_bytes"][0] > 0 and p["link_bytes"][1] > 0,
          "%s: no H2D or D2H bytes moved: %r" % (name, p["link_bytes"]))
    check(p["bound_ns"] > 0 and p["step_mean_ns"] > 0, "%s: no step time or bound" % name)
    # the bound: the busiest link at the run's rates, a pair of links
    # (H2D and D2H) at the most it moves at once or apart
    check(len(p.get("link_bw", {})) == 6, "%s: link_bw %r" % (name, p.get("link_bw")))
    lbw = runbw
    need = max([p["link_bytes"][i] / lbw[k] * 1e9 for i, k in enumerate(("H2D", "D2H"))
                if lbw.get(k, 0) > 0] or [0])
    top = max(lbw.get("H2D+D2H", 0), lbw.get("H2D", 0), lbw.get("D2H", 0))
    if lbw.get("H2D+D2H", 0) > 0:
        need = max(need, (p["link_bytes"][0] + p["link_bytes"][1]) / top * 1e9)
    check(p["bound_ns"] + 1 >= need and p["bound_ns"] <= max(need, d["trace"].get("bound_compute_ns", d["trace"]["compute_ns"])) * 1.0001 + 1,
          "%s: bound %r ns against links %r" % (name, p["bound_ns"], lbw))
    check("step_ns" in p["model"], "%s: no timing model: %r" % (name, p["model"]))
    check(p["gpu_bytes_peak"] <= d["cache"]["gpu_budget"],
          "%s: GPU peak %d over the budget %d" % (name, p["gpu_bytes_peak"], d["cache"]["gpu_budget"]))
ours = pols.get("tencache", {})
if ours.get("ok"):
    # the warm-up's second step and every measured one ran from the plan
    check(ours["planned_steps"] >= steps, "ours: %d planned steps, want >= %d (it fell back to "
          "on demand)" % (ours["planned_steps"], steps))
    check(ours["reprofiles"] == 0, "ours: %d re-profiles of a fixed order" % ours["reprofiles"])
    hit = ours["hits"] / ours["acquires"]
    print("ours: hit rate %.4f (%d/%d), planned %.4f, Belady %.4f" %
          (hit, ours["hits"], ours["acquires"], ours["model"].get("hit_rate", -1), belady))
    # host mode: the cache delivers the hits of the plan it ran, no fewer
    ep = ours.get("exec_plan_hit_rate", -1)
    check(ours.get("exec_plan_gpu_bytes", 0) > 0 and abs(hit - ep) < 1e-9,
          "ours' hit rate %.4f differs from its plan's %.4f" % (hit, ep))
    if goal == "belady":
        check(abs(hit - belady) < 1e-9, "ours' GPU hit rate %.4f is not the Belady optimum %.4f "
              "for the budget (the planner's own plan: %.4f)" % (hit, belady,
              ours["model"].get("hit_rate", -1)))

# ours' at the path given; --timeline-all: the others' next to it
for name, path in [("tencache", tl)] + [(n, tl[:-len(".json")] + "-" + n + ".json")
                                        for n in want if n != "tencache"]:
    try:
        t = json.load(open(path))
    except (OSError, ValueError) as e:
        bad.append("timeline of %s: %s" % (name, e))
        continue
    ev = t["traceEvents"] if isinstance(t, dict) else t
    spans = [e for e in ev if e.get("ph") == "X"]
    check(len(spans) > 0, "timeline of %s: no events" % name)
    check(all(isinstance(e.get("ts"), (int, float)) and e.get("dur", -1) >= 0 for e in spans),
          "timeline of %s: an event without ts/dur" % name)
    cats = {e.get("cat") for e in spans}
    for c in ("H2D", "D2H", "compute"):
        check(c in cats, "timeline of %s: no %s events (has %s)" % (name, c, sorted(map(str, cats))))
    print("timeline of %s: %d events: %s" % (name, len(spans), ", ".join(sorted(map(str, cats)))))
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
