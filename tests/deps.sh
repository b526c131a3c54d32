#!/bin/bash
# deps.sh - install what building and testing tencache needs on Debian 12 (root).
# Kernel side: headers matching Debian's current kernel, QEMU and the initramfs tools;
# the matching kernel image itself is fetched by tests/vm/run-vm.sh (apt-get download).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
	build-essential pkg-config linux-headers-amd64 qemu-system-x86 busybox-static cpio \
	kmod e2fsprogs xz-utils zstd binutils liburing-dev libnuma-dev libcjson-dev libaio-dev \
	python3 python3-matplotlib ca-certificates > /tmp/tencache-apt.log 2>&1 ||
	{ tail -30 /tmp/tencache-apt.log; echo "deps.sh: apt-get install failed" >&2; exit 1; }
echo "deps.sh: packages installed"
