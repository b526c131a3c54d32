#!/bin/bash
# h200-ddp.sh - issue 8's plumbing run on the one-GPU test machine (as root):
# builds build/libtencache.so, runs tests/python/test_ddp_gpu.py (2 processes
# sharing GPU 0: NCCL if it takes 2 ranks on one device, else gloo) and
# bench/ddp_bench.py (1 rank vs 2 ranks on the one GPU, flagged "shared GPU:
# not a scaling figure"), within TOTAL_S seconds (default 230). Everything
# goes to OUTDIR: build.log, test_ddp_gpu.log, bench.log, result.json, table.md.
#   bash tools/gpu/h200-ddp.sh [OUTDIR] [ddp_bench.py args...]
# OUTDIR defaults to $OUT, else /tmp/tencache-ddp. PYTHON defaults to
# /opt/torch/.venv/bin/python. DEVICE=cpu tries the script without a GPU
# (host mode, gloo, tiny bench model).
set -uo pipefail
T0=$(date +%s)
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$TOP"
O=${1:-${OUT:-/tmp/tencache-ddp}}
[ $# -gt 0 ] && shift
mkdir -p "$O"
O=$(cd "$O" && pwd)
PY=${PYTHON:-/opt/torch/.venv/bin/python}
TOTAL=${TOTAL_S:-230}
step() { echo "==== $(date -u +%T) (+$(($(date +%s) - T0)) s) $*"; }
left() { echo $((TOTAL - ($(date +%s) - T0))); }
export NCCL_NVLS_ENABLE=0	# NVLink multicast stays off (device notes)
export TEST_DDP_LIMIT=${TEST_DDP_LIMIT:-45}	# a hung case is killed after 45 s

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader 2>&1
echo "cpus $(nproc)"; grep -E 'MemTotal|MemAvailable' /proc/meminfo
"$PY" -c "import torch, torch.distributed as d; print('torch', torch.__version__, 'cuda', \
torch.cuda.is_available(), torch.cuda.device_count(), 'nccl', d.is_nccl_available() and \
torch.cuda.nccl.version(), 'gloo', d.is_gloo_available())" 2>&1

step "build libtencache.so"
D=$TOP/.devdeps
export C_INCLUDE_PATH=$D/include CPLUS_INCLUDE_PATH=$D/include LIBRARY_PATH=$D/lib
export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}	# libcjson.so.1, libnuma.so.1
if make -s -j16 -C runtime > "$O/build.log" 2>&1 && [ -e build/libtencache.so ]; then
	echo "built build/libtencache.so"
else
	tail -20 "$O/build.log"
	echo "libtencache.so build FAILED"
	exit 1
fi
export TENCACHE_LIB=$TOP/build/libtencache.so PYTHONPATH=$TOP/python${PYTHONPATH:+:$PYTHONPATH}

step "test_ddp_gpu.py (2 ranks on GPU 0)"
[ "${DEVICE:-cuda}" = cpu ] && export TEST_DDP_GPU_ON_CPU=1 TEST_DDP_NVME=${TEST_DDP_NVME:-0}
timeout -k 5 $(($(left) - 70)) "$PY" tests/python/test_ddp_gpu.py 2>&1 | tee "$O/test_ddp_gpu.log"
echo "test_ddp_gpu: exit ${PIPESTATUS[0]}"
# the backend the test found working (NCCL with 2 ranks on one GPU, else gloo)
BACKEND=$(sed -n 's/.*, backend \([a-z]*\), libtencache.*/\1/p' "$O/test_ddp_gpu.log" | head -1)

step "ddp_bench.py (1 vs 2 ranks, backend ${BACKEND:-gloo})"
SMALL=()
[ "${DEVICE:-cuda}" = cpu ] && SMALL=(--dim 64 --heads 4 --layers 2 --vocab 256 --seq 32 --batch 2
	--warmup 1 --steps 3)
LIM=$(($(left) - 10))
[ "$LIM" -lt 30 ] && LIM=30
"$PY" bench/ddp_bench.py --device "${DEVICE:-cuda}" --ranks 2 --backend "${BACKEND:-gloo}" \
	--time-limit "$LIM" --out "$O" "${SMALL[@]}" "$@" 2>&1 | tee "$O/bench.log"
echo "ddp_bench: exit ${PIPESTATUS[0]}"
step "done"
