#!/bin/bash
# h200-train.sh - issue 7's training benchmark on the GPU test machine (as
# root): builds build/libtencache.so and meanwhile installs DeepSpeed from
# .devdeps/wheels (tools/gpu/ds-wheels.sh makes them) and JIT-builds its
# cpu_adam op; then bench/train_bench.py trains OPT-1.3B (random weights)
# under ideal, tencache, FSDP2 CPU offload, DeepSpeed ZeRO-2 and ZeRO-3
# offload, one subprocess each with its own timeout. Everything goes to
# OUTDIR: result.json, table.md, tencache-timeline.json, logs/, bench.log.
#   bash tools/gpu/h200-train.sh [OUTDIR] [train_bench.py args...]
# OUTDIR defaults to $OUT, else /tmp/tencache-train. Extra args go to the
# bench (e.g. --model opt-2.7b --cap 40GiB). TOTAL_S (default 530) bounds
# the whole script; PYTHON defaults to /opt/torch/.venv/bin/python; DEVICE=cpu
# tries the script on a machine without a GPU (host mode, tiny model args).
set -uo pipefail
T0=$(date +%s)
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$TOP"
O=${1:-${OUT:-/tmp/tencache-train}}
[ $# -gt 0 ] && shift
mkdir -p "$O"
O=$(cd "$O" && pwd)
PY=${PYTHON:-/opt/torch/.venv/bin/python}
WORK=$O/tmp    # DeepSpeed's install and torch extensions; removed at the end
step() { echo "==== $(date -u +%T) (+$(($(date +%s) - T0)) s) $*"; }

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader 2>&1
echo "cpus $(nproc)"; grep -E 'MemTotal|MemAvailable' /proc/meminfo
command -v g++ ninja nvcc make
"$PY" - << 'EOF'
import importlib, os, sys, sysconfig
inc = sysconfig.get_paths()["include"]
print("python", sys.version.split()[0], sys.executable, "| Python.h",
      "present" if os.path.exists(os.path.join(inc, "Python.h")) else "MISSING", "in", inc)
for m in ("torch", "transformers", "accelerate", "pip", "ninja", "psutil", "cpuinfo", "msgpack",
          "numpy", "pydantic", "hjson", "einops", "deepspeed"):
    try:
        print(f"  {m} {getattr(importlib.import_module(m), '__version__', '')}")
    except Exception as e:    # noqa: BLE001
        print(f"  {m} missing ({type(e).__name__})")
EOF

step "build libtencache.so; meanwhile install DeepSpeed and build its cpu_adam"
D=$TOP/.devdeps
export C_INCLUDE_PATH=$D/include CPLUS_INCLUDE_PATH=$D/include LIBRARY_PATH=$D/lib
export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}	# libcjson.so.1, libnuma.so.1
# DeepSpeed is prepared unless --methods leaves it out
NEED_DS=1
ARGS=("$@")
for i in "${!ARGS[@]}"; do
	if [ "${ARGS[$i]}" = --methods ] && [[ "${ARGS[$((i + 1))]:-}" != *deepspeed* ]]; then
		NEED_DS=0
	fi
done
if [ $NEED_DS = 1 ]; then
	timeout -k 5 200 "$PY" bench/train_bench.py --prepare-deepspeed --device "${DEVICE:-cuda}" \
		--out "$O" --work "$WORK" --ds-build-timeout 150 > "$O/deepspeed-prepare.log" 2>&1 &
	DS=$!
fi
if make -s -j16 -C runtime > "$O/build.log" 2>&1 && [ -e build/libtencache.so ]; then
	echo "built build/libtencache.so"
else
	tail -20 "$O/build.log"
	echo "libtencache.so build FAILED: the tencache method will fail"
fi
if [ $NEED_DS = 1 ]; then
	wait $DS
	echo "DeepSpeed prepare: exit $? ($(tail -n 1 "$O/deepspeed-prepare.log" | cut -c1-600))"
fi

step "train_bench"
export TENCACHE_LIB=$TOP/build/libtencache.so PYTHONPATH=$TOP/python${PYTHONPATH:+:$PYTHONPATH}
LEFT=$((${TOTAL_S:-530} - ($(date +%s) - T0) - 15))
"$PY" bench/train_bench.py --device "${DEVICE:-cuda}" --out "$O" --work "$WORK" --keep-work \
	--deadline "$LEFT" "$@" 2>&1 | tee "$O/bench.log"
echo "train_bench: exit ${PIPESTATUS[0]}"
rm -rf "$WORK" "$O"/config-*.json
step "done"
