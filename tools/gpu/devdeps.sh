#!/bin/bash
# devdeps.sh - fill .devdeps/ (git-ignored) with the build dependencies a GPU
# test machine lacks, taken from this Debian 12 host's packages: the headers
# of liburing, libnuma, libaio and cJSON, static liburing/libaio, and the
# shared libnuma and libcjson (libnuma.a is not PIC, so libtencache.so cannot
# link it). Pass ".devdeps" in the device run's carry list.
#   bash tools/gpu/devdeps.sh
set -euo pipefail
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
D=$TOP/.devdeps
L=/usr/lib/x86_64-linux-gnu
for p in liburing-dev libnuma-dev libaio-dev libcjson-dev; do
	dpkg -s "$p" > /dev/null 2>&1 || { echo "devdeps.sh: $p missing: run bash tests/deps.sh" >&2; exit 1; }
done
rm -rf "$D/include" "$D/lib"
mkdir -p "$D/include" "$D/lib"
for p in liburing-dev libnuma-dev libaio-dev libcjson-dev; do
	dpkg -L "$p" | grep '^/usr/include/.*\.h$' | while read -r h; do
		mkdir -p "$D/include/$(dirname "${h#/usr/include/}")"
		cp "$h" "$D/include/${h#/usr/include/}"
	done
done
cp "$L/liburing.a" "$L/libaio.a" "$D/lib/"
for so in libnuma.so.1 libcjson.so.1; do
	cp -L "$L/$so" "$D/lib/$so"
	cp "$D/lib/$so" "$D/lib/${so%.1}"	# real files: carry may drop links
done
echo "devdeps.sh: $(find "$D" -type f | wc -l) files in $D"
