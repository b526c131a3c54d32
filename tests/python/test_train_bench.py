#!/usr/bin/env python3
"""test_train_bench.py - bench/train_bench.py on the CPU (smoke test for CI).

Runs the benchmark on a tiny OPT (ideal, naive FSDP2 CPU offload and
tencache in host mode, 1 warm-up + 1 measured step, one subprocess each)
and checks its outputs: result.json has every field the table is made of,
losses are finite, tencache's and the naive baseline's losses equal the
ideal's (the same math: bf16 compute, fp32 masters, AdamW; step 1 must be
bit-identical, step 2 within 1e-3 relative: torch's CPU sqrt vs tencache's
IEEE sqrt, see test_offload.py), table.md and the Perfetto timeline exist.
Then a DeepSpeed run from a wheels directory that does not exist: the run
must go on and the table must say "failed:" with the reason.

Prints TAP lines; exits 0, 1, or 77 when torch or transformers is missing.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

try:
    import torch    # noqa: F401
    import transformers    # noqa: F401
except Exception as e:    # noqa: BLE001
    print(f"# SKIP torch or transformers cannot be imported ({type(e).__name__}: {e})")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "bench", "train_bench.py")
counts = {"passed": 0, "failed": 0}


def tap(ok, name, detail=""):
    counts["passed" if ok else "failed"] += 1
    n = sum(counts.values())
    print(f"{'ok' if ok else 'not ok'} {n} - {name}" + (f" ({detail})" if detail else ""),
          flush=True)


def bench(out, *extra, timeout=600):
    cmd = [sys.executable, BENCH, "--device", "cpu", "--model", "tiny-opt", "--batch", "2",
           "--seq", "64", "--warmup", "1", "--steps", "1", "--out", out, *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def load_bench():
    import importlib.util
    spec = importlib.util.spec_from_file_location("train_bench", BENCH)
    tb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tb)
    return tb


def round_ratios():
    """--rounds: each round's tencache against its own round's DeepSpeed (round
    1 must not take a faster DeepSpeed of round 2), on made-up figures."""
    tb = load_bench()
    res = {m: {"ok": True, "method": m, "tokens_per_s": v} for m, v in (
        ("ideal", 100.0), ("tencache", 90.0), ("deepspeed2", 40.0), ("deepspeed3", 45.0),
        ("tencache#2", 80.0), ("deepspeed2#2", 50.0), ("deepspeed3#2", 20.0))}
    got = tb.round_ratios(list(res), res, 2)
    want = {"tencache/ideal": 0.9, "tencache/deepspeed": 2.0, "deepspeed_best": "deepspeed3",
            "tencache#2/ideal": 0.8, "tencache#2/deepspeed": 1.6,
            "deepspeed_best#2": "deepspeed2#2"}
    ok = all(rel(got.get(k), v) < 1e-12 if isinstance(v, float) else got.get(k) == v
             for k, v in want.items())
    tap(ok, "--rounds: each round's ratio against the best DeepSpeed of its own round", str(got))


def gpu_gaps():
    """--gpu-profile's summary on a made-up trace: overlapping kernels on two
    streams count once, copies are not kernels, gaps under 50 us are idle
    but not listed, and the largest gap names the kernels around it."""
    tb = load_bench()
    k = lambda ts, dur, name: {"ph": "X", "cat": "kernel", "ts": ts, "dur": dur, "name": name}
    trace = {"traceEvents": [
        k(1000, 100, "a"), k(1050, 100, "b"),        # overlap: busy 1000..1150
        k(1180, 20, "c"),                           # 30 us gap: idle, not listed
        {"ph": "X", "cat": "gpu_memcpy", "ts": 1200, "dur": 500, "name": "Memcpy HtoD"},
        k(1700, 100, "d"),                          # 500 us gap after c
        k(1900, 50, "e"),                           # 100 us gap after d
        {"ph": "M", "name": "thread_name"}]}
    g = tb.gpu_gaps(trace)
    want = dict(kernels=5, copies=1, copy_ms=0.5, span_ms=0.95, busy_ms=0.32, idle_ms=0.63,
                idle_gaps_ms=0.6, n_gaps=2)
    ok = all(abs(g.get(key, -1) - v) < 1e-9 for key, v in want.items()) and \
        [(x["ms"], x["at_ms"], x["after"], x["before"]) for x in g["gaps"]] == \
        [(0.5, 0.2, "c", "d"), (0.1, 0.8, "d", "e")]
    tap(ok, "--gpu-profile: busy time, idle gaps and the kernels around them", str(g))


def alloc_confs():
    """--alloc-conf: a plain CONF for every method, METHOD=CONF for one
    method in all its rounds and thread counts; an unknown METHOD is refused."""
    tb = load_bench()
    c = tb.alloc_confs(["", "deepspeed2=expandable_segments:True"])
    got = [tb.alloc_conf_of(c, m) for m in ("ideal", "tencache@8", "deepspeed2", "deepspeed2#2",
                                              "deepspeed3")]
    c2 = tb.alloc_confs(["expandable_segments:True,garbage_collection_threshold:0.8"])
    try:
        tb.alloc_confs(["deepspeed4=expandable_segments:True"])
        refused = False
    except ValueError:
        refused = True
    ok = got == ["", "", "expandable_segments:True", "expandable_segments:True", ""] and \
        tb.alloc_conf_of(c2, "naive") == "expandable_segments:True,garbage_collection_threshold:0.8" \
        and tb.alloc_conf_of({}, "tencache") == "" and refused
    tap(ok, "--alloc-conf: per method, for all methods, unknown method refused", str(got))


def main():
    round_ratios()
    gpu_gaps()
    alloc_confs()
    with tempfile.TemporaryDirectory(prefix="train-bench-") as td:
        out = os.path.join(td, "run")
        rc, text = bench(out, "--methods", "ideal,naive,tencache,tencache-serial@2", "--gpu-budget", "4MiB")
        tap(rc == 0, "the CPU run exits 0", f"exit {rc}")
        if rc:
            print("\n".join("#   " + ln for ln in text.splitlines()[-30:]))
        try:
            with open(os.path.join(out, "result.json")) as f:
                res = json.load(f)
        except (OSError, ValueError) as e:
            tap(False, "result.json readable", str(e))
            return 1
        R = res["results"]
        tap(set(R) == {"ideal", "naive", "tencache", "tencache-serial@2"} and all(r.get("ok") for r in R.values()),
            "every method ran", ", ".join(f"{m}: {r.get('ok')} {r.get('error', '')}"
                                          for m, r in R.items()))
        need = ("n_params", "losses", "step_ms", "fwd_bwd_ms", "opt_ms", "tokens_per_s",
                "host_rss_peak", "setup_s", "desc", "steps")
        missing = [f"{m}.{k}" for m, r in R.items() for k in need if k not in r]
        tap(not missing, "result fields present", ", ".join(missing) or "all")
        ok = all(len(r.get("losses", [])) == 2 and all(math.isfinite(v) for v in r["losses"])
                 for r in R.values())
        tap(ok, "losses finite, one per step", str({m: r.get("losses") for m, r in R.items()}))
        pos = all(r.get("tokens_per_s", 0) > 0 and r.get("step_ms", 0) > 0 and
                  r.get("host_rss_peak", 0) > 0 and r.get("n_params") == R["ideal"]["n_params"]
                  for r in R.values())
        tap(pos, "tokens/s, step time, host RSS positive; same parameter count")
        il = R["ideal"]["losses"]
        for m in ("tencache", "tencache-serial@2", "naive"):
            ml = R[m]["losses"]
            d = [rel(a, b) for a, b in zip(ml, il)]
            tap(ml[0] == il[0] and max(d) <= 1e-3, f"{m} losses equal the ideal's",
                f"{ml} vs {il}, rel diff {max(d):.3g}")
        t = R["tencache"].get("tencache", {})
        tkeys = ("hit_rate", "stall_ms_per_step", "h2d_bytes_per_step", "d2h_bytes_per_step",
                 "measured_steps", "planned_measured_steps", "link_bw", "gpu_arena_peak")
        tap(all(k in t for k in tkeys) and t["measured_steps"] == 1 and
            0 <= t["hit_rate"] <= 1 and t["stall_ms_per_step"] >= 0 and
            t["h2d_bytes_per_step"] > 0 and t["d2h_bytes_per_step"] > 0 and
            0 < t["gpu_arena_peak"] <= 4 << 20,
            "tencache stats: hit rate, stall, link bytes, arena peak",
            ", ".join(f"{k}={t.get(k)}" for k in tkeys if k != "link_bw"))
        ra = res["ratios"]
        want = R["tencache"]["tokens_per_s"] / R["ideal"]["tokens_per_s"]
        tap(ra.get("tencache/ideal") is not None and rel(ra["tencache/ideal"], want) < 1e-9 and
            ra.get("tencache/naive", 0) > 0 and ra.get("tencache-serial@2/tencache", 0) > 0,
            "ratios tencache/ideal, tencache/naive and tencache-serial@2/tencache",
            str(ra))
        try:
            with open(os.path.join(out, "table.md")) as f:
                md = f.read()
        except OSError as e:
            md = ""
            tap(False, "table.md", str(e))
        rows = [ln for ln in md.splitlines() if ln.startswith("| ")]
        tap("2 AdamW threads" in R["tencache-serial@2"].get("desc", ""),
            "tencache-serial@2 ran its AdamW on 2 threads", R["tencache-serial@2"].get("desc"))
        tap(len(rows) == 5 and all(f"| {m} | ok |" in md for m in R) and "tencache/ideal" in md,
            "table.md: a row per method and the ratios", f"{len(rows)} rows")
        try:
            with open(os.path.join(out, "tencache-timeline.json")) as f:
                tl = json.load(f)
            spans = [e for e in tl["traceEvents"] if e.get("ph") == "X"]
            tap(len(spans) > 0, "Perfetto timeline of a tencache step", f"{len(spans)} spans")
        except (OSError, ValueError, KeyError) as e:
            tap(False, "Perfetto timeline of a tencache step", str(e))

        # --rounds 2: the offload methods run again as method#2, with their
        # own ratios against that round's baselines
        out3 = os.path.join(td, "rounds")
        rc, text = bench(out3, "--methods", "ideal,tencache,naive", "--gpu-budget", "4MiB",
                         "--rounds", "2", "--no-timeline")
        try:
            with open(os.path.join(out3, "result.json")) as f:
                res3 = json.load(f)
            R3, ra3 = res3["results"], res3["ratios"]
        except (OSError, ValueError, KeyError) as e:
            R3, ra3 = {}, {"error": str(e)}
        tap(rc == 0 and set(R3) == {"ideal", "tencache", "naive", "tencache#2", "naive#2"} and
            all(r.get("ok") for r in R3.values()) and
            os.path.exists(os.path.join(out3, "result-tencache-round2.json")),
            "--rounds 2 runs the offload methods twice, ideal once",
            f"exit {rc}: " + ", ".join(f"{m}: {r.get('ok')}" for m, r in R3.items()))
        w = [R3.get(m, {}).get("tokens_per_s") for m in ("tencache#2", "ideal", "naive#2")]
        tap(all(w) and rel(ra3.get("tencache#2/ideal", 0), w[0] / w[1]) < 1e-9 and
            rel(ra3.get("tencache#2/naive", 0), w[0] / w[2]) < 1e-9 and
            R3["tencache#2"]["losses"] == R3["tencache"]["losses"],
            "round 2's ratios against its own baselines; the same losses as round 1", str(ra3))

        # a bad method name or round count is refused before anything runs
        rc, text = bench(os.path.join(td, "bad"), "--rounds", "0")
        tap(rc != 0 and "--rounds 0" in text and
            not os.path.exists(os.path.join(td, "bad", "result.json")),
            "--rounds 0 is refused", f"exit {rc}: {text.strip()[-200:]}")
        for bad in ("tencache@0", "ideal@2", "tencache@", "tencache@x", "nosuch", "tencache#1",
                    "tencache#x"):
            rc, text = bench(os.path.join(td, "bad"), "--methods", bad)
            tap(rc != 0 and "unknown method" in text and
                not os.path.exists(os.path.join(td, "bad", "result.json")),
                f"--methods {bad} is refused", f"exit {rc}: {text.strip()[-200:]}")

        # a method that cannot run is reported, the others still run
        r = subprocess.run([sys.executable, "-c", "import deepspeed"], capture_output=True)
        if r.returncode == 0:
            print("ok - a DeepSpeed failure is reported # SKIP deepspeed is importable here")
        else:
            out2 = os.path.join(td, "ds")
            rc, text = bench(out2, "--methods", "ideal,deepspeed2", "--wheels",
                             os.path.join(td, "no-such-wheels"))
            try:
                with open(os.path.join(out2, "result.json")) as f:
                    R2 = json.load(f)["results"]
                with open(os.path.join(out2, "table.md")) as f:
                    md2 = f.read()
            except (OSError, ValueError) as e:
                R2, md2 = {}, str(e)
            err = R2.get("deepspeed2", {}).get("error", "")
            tap(rc == 1 and R2.get("ideal", {}).get("ok") and "no-such-wheels" in err and
                "| deepspeed2 | failed: " in md2, "a DeepSpeed failure is reported, the run goes on",
                f"exit {rc}, error: {err}")
    print(f"{counts['passed']} passed, {counts['failed']} failed")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
