#!/bin/bash
# ds-wheels.sh - fill .devdeps/wheels (git-ignored) with DeepSpeed for the GPU
# test machine, which has no internet: the sdist, a pure-Python wheel built
# from it here (DS_BUILD_OPS=0: ops are JIT-built there at first use) and the
# wheels of the dependencies that machine lacks, for CPython 3.12 x86_64.
# torch, ninja, psutil, py-cpuinfo, msgpack, numpy, tqdm and packaging are
# already there. bench/train_bench.py installs them with pip --no-deps.
#   bash tools/gpu/ds-wheels.sh [VERSION]      (needs pip, torch and internet)
set -euo pipefail
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
W=$TOP/.devdeps/wheels
V=${1:-0.19.8}
PY=${PYTHON:-python3}
mkdir -p "$W"
"$PY" -m pip download --no-deps --no-binary :all: "deepspeed==$V" -d "$W"
DS_BUILD_OPS=0 DS_ACCELERATOR=cuda "$PY" -m pip wheel --no-deps --no-build-isolation \
	"$W/deepspeed-$V.tar.gz" -w "$W"
"$PY" -m pip download --only-binary=:all: --python-version 3.12 --implementation cp \
	--abi cp312 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
	--platform manylinux_2_28_x86_64 -d "$W" \
	hjson 'pydantic>=2.0.0' einops nvidia-ml-py 'typing-extensions>=4.14.1'
ls -l "$W"
