#!/bin/bash
# stack_sample.sh - the GPU machine's sampling profiler (tools/gpu/
# stack-sample.c, LD_PRELOAD) and its report (stack-report.py) on a short
# host-mode replay: the library builds, samples only the process named by
# STACK_SAMPLE_COMM (a shell in between is left alone), writes its file at
# exit, and the report names the replay's own functions: main on nearly
# every sample, the step loop (run_step) on many, some inside tencache calls.
# Exit 0 pass, 1 fail, 77 skip (no C compiler or addr2line).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" stack-sample
command -v gcc > /dev/null && command -v addr2line > /dev/null ||
	{ echo "SKIP: gcc and addr2line (binutils) are needed"; exit 77; }
gcc -O2 -shared -fPIC -o "$T/ss.so" "$TOP/tools/gpu/stack-sample.c" -lpthread ||
	{ echo "FAIL: stack-sample.c does not build"; exit 1; }

STACK_SAMPLE_OUT=$T/st STACK_SAMPLE_US=500 LD_PRELOAD=$T/ss.so \
	bash -c '"$0" replay --host --layers 4 --vocab 2048 --batch 1 --tflops 10 \
		--gpu-budget 75% --policies ours --warmup 2 --steps 3 > "$1" 2>&1' "$BENCH" "$T/out.txt"
rc=$?
[ "$rc" = 0 ] || { tail -20 "$T/out.txt"; echo "FAIL: replay exited $rc"; exit 1; }
files=("$T"/st.*)
[ "${#files[@]}" = 1 ] && [ -s "${files[0]}" ] ||
	{ echo "FAIL: want one sample file (the bench's, not bash's): ${files[*]}"; exit 1; }
grep -q "^stack-sample: sampling tencache-bench" "$T/out.txt" ||
	{ echo "FAIL: no start line"; exit 1; }
python3 "$TOP/tools/gpu/stack-report.py" --top 60 "${files[0]}" > "$T/rep.txt" 2>&1 ||
	{ cat "$T/rep.txt"; echo "FAIL: the report failed"; exit 1; }
head -5 "$T/rep.txt"
python3 - "$T/rep.txt" <<'PY'
import re, sys

rep = open(sys.argv[1]).read()
bad = []
m = re.search(r": (\d+) samples over", rep)
if not m or int(m.group(1)) < 50:
    bad.append("fewer than 50 samples")
tot = dict((f, float(p)) for p, f in re.findall(r"^\s+([\d.]+)%\s+(\S+)$",
                                                 rep.split("total (anywhere")[1].split("inside")[0], re.M))
if tot.get("main", 0) < 90:
    bad.append("main on %.1f%% of the samples, want nearly all" % tot.get("main", 0))
if tot.get("run_step", 0) < 30:
    bad.append("run_step (the step loop) on %.1f%% of the samples" % tot.get("run_step", 0))
if "on_prof" in rep:
    bad.append("the handler's own frame was left in")
m = re.search(r"inside a tencache call: ([\d.]+)%", rep)
if not m or float(m.group(1)) <= 0:
    bad.append("no sample inside a tencache call")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
