#!/usr/bin/env python3
"""plot_replay.py - the PNG of a `tencache-bench replay` result (its -o JSON):
step time against the timing model and the bound, GPU hit rate against the
Belady optimum, stall per step, and bytes per link, one group per policy.

usage: plot_replay.py RESULT.json OUT.png
Exits 3 with a one-line message when matplotlib is missing."""
import json
import sys


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_replay: matplotlib is not installed (apt install python3-matplotlib)",
              file=sys.stderr)
        return 3
    with open(sys.argv[1]) as f:
        res = json.load(f)
    pols = res["policies"]
    names = [p["policy"] for p in pols]
    ok = [p.get("ok", False) for p in pols]
    ms = lambda v: v / 1e6
    step = [ms(p["step_mean_ns"]) if o else 0 for p, o in zip(pols, ok)]
    sim = [ms(p["model"].get("step_ns", 0)) for p in pols]
    bound = [ms(p.get("bound_ns", 0)) for p in pols]
    hit = [100 * p["hit_rate"] if o else 0 for p, o in zip(pols, ok)]
    stall = [ms(p["stall_ns"]) if o else 0 for p, o in zip(pols, ok)]
    links = ["H2D", "D2H", "NVMe rd", "NVMe wr"]
    lbytes = [[p["link_bytes"][i] / 1e9 if o else 0 for p, o in zip(pols, ok)]
              for i in range(4)]
    x = range(len(names))

    fig, ax = plt.subplots(2, 2, figsize=(12, 8))
    m = res["model"]
    fig.suptitle("tencache replay: %s (%d layers, hidden %d), %s mode, GPU budget %.2f GB"
                 % (m["name"], m["layers"], m["hidden"], res["mode"],
                    res["cache"]["gpu_budget"] / 1e9))

    a = ax[0][0]
    w = 0.27
    a.bar([i - w for i in x], step, w, label="measured")
    a.bar(x, sim, w, label="timing model")
    a.bar([i + w for i in x], bound, w, label="bound")
    a.set_xticks(list(x), names)
    a.set_ylabel("ms per step")
    a.set_title("step time")
    a.legend()

    a = ax[0][1]
    a.bar(x, hit, color="tab:green")
    a.axhline(100 * res["belady_hit_rate"], color="k", ls="--", label="Belady (MIN)")
    a.set_xticks(list(x), names)
    a.set_ylabel("% of GPU acquires")
    a.set_ylim(0, 105)
    a.set_title("GPU hit rate")
    a.legend()

    a = ax[1][0]
    a.bar(x, stall, color="tab:red")
    a.set_xticks(list(x), names)
    a.set_ylabel("ms per step")
    a.set_title("acquire stall")

    a = ax[1][1]
    w = 0.2
    for i in range(4):
        if any(lbytes[i]):
            a.bar([k + (i - 1.5) * w for k in x], lbytes[i], w, label=links[i])
    a.set_xticks(list(x), names)
    a.set_ylabel("GB per step")
    a.set_title("bytes per link")
    a.legend()

    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=100)
    print("plot: %s" % sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
