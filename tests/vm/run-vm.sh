#!/bin/bash
# run-vm.sh - build tencache.ko against Debian's packaged headers, boot the *matching*
# Debian kernel under QEMU (TCG, no KVM needed) from a busybox initramfs, load the module,
# run the module's kselftest programs (tests/kmod/*.c) and the benchmark tools (static),
# unload the module and judge the logs: WARN/BUG/Oops in the console, bad taint bits,
# blocks not returned. Adapted from the kmodvm kit; needs nothing outside this repository.
#
# Usage: tests/vm/run-vm.sh [TEST.c|TESTBIN ...]     (default: tests/kmod/*.c + VM benchmarks)
# Last line: "kmodvm: N passed, M failed"; exit 0 iff M is 0 (setup errors count as failed).
#
# Env (default in brackets):
#   INSTALL=1       apt-get update + install the packages first (Debian 12 "bookworm")
#   KVER            kernel ABI, e.g. 6.1.0-57-amd64      [newest installed linux-headers-*-amd64]
#   KIMG            auto|installed|extract                [auto]
#   BOOT            pvh|bzimage                           [pvh]
#   MODPARAMS       tencache.ko parameters                [pool_mb=32 max_pool_mb=512]
#   KSFT_DIR        directory holding kselftest_harness.h [extracted from linux-source-X.Y]
#   BENCH=0         skip the benchmarks in the VM
#   EXTRA_TESTS     more static binaries or .c files to run in the guest (space-separated)
#   ACCEL [tcg] CPU [max] MEM [2G] SMP [2] HUGEPAGES [16] DISK_SIZE [256M] TIMEOUT [900]
#   GUEST_TIMEOUT [300] per test program (s)
#   WORK [/tmp/tencache-vm]  logs + scratch, wiped each run   KCACHE [/var/tmp/kmodvm-cache]
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
T0=$(date +%s%N)
ts() { local d=$((($(date +%s%N) - T0) / 100000000)); printf '[%4d.%ds] %s\n' $((d / 10)) $((d % 10)) "$*"; }
CLOSED=0
trap 'if [ "$CLOSED" = 0 ]; then echo "kmodvm: 0 passed, 1 failed"; exit 1; fi' EXIT
die() { echo "kmodvm: error: $*" >&2; exit 1; }

TESTS=("$@")
if [ "${#TESTS[@]}" = 0 ]; then
  TESTS=("$TOP"/tests/kmod/*.c)
  [ "${BENCH:-1}" = 0 ] || TESTS+=("$TOP"/tools/vm/*.c)
fi
# shellcheck disable=SC2206
[ -z "${EXTRA_TESTS:-}" ] || TESTS+=($EXTRA_TESTS)

WORK=${WORK:-/tmp/tencache-vm}; KCACHE=${KCACHE:-/var/tmp/kmodvm-cache}; KIMG=${KIMG:-auto}; BOOT=${BOOT:-pvh}
ACCEL=${ACCEL:-tcg}; CPU=${CPU:-max}; MEM=${MEM:-2G}; SMP=${SMP:-2}; HUGEPAGES=${HUGEPAGES:-16}
TIMEOUT=${TIMEOUT:-900}; GUEST_TIMEOUT=${GUEST_TIMEOUT:-300}; DISK_SIZE=${DISK_SIZE:-256M}
MODPARAMS=${MODPARAMS-pool_mb=32 max_pool_mb=512}; QUIET=${QUIET-loglevel=5}
TEST_CFLAGS=${TEST_CFLAGS:--O2 -Wall -Wno-unused-function -Wno-misleading-indentation}; TEST_LDLIBS=${TEST_LDLIBS:--luring -laio -lpthread}
KSFT=1; KSFT_DIR=${KSFT_DIR:-}; NARGS=1; KMOD=tencache
mkdir -p "$KCACHE"; chmod 755 "$KCACHE"

# ---- 1. packages (Debian 12; apt only) ------------------------------------------------
if [ "${INSTALL:-0}" = 1 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq > "$KCACHE/apt.log" 2>&1 || { cat "$KCACHE/apt.log"; die "apt-get update failed"; }
  # No linux-image-* on purpose: it drags in initramfs-tools + udev and upgrades systemd on
  # the host. The image is fetched with apt-get download + dpkg-deb -x below instead.
  apt-get install -y -qq --no-install-recommends "linux-headers-${KVER:-amd64}" qemu-system-x86 \
    busybox-static cpio kmod liburing-dev libnuma-dev e2fsprogs xz-utils zstd binutils gcc make \
    libc6-dev libaio-dev >> "$KCACHE/apt.log" 2>&1 || { tail -30 "$KCACHE/apt.log"; die "apt-get install failed"; }
  ts "apt install done"
fi
for c in qemu-system-x86_64 make gcc cpio depmod modprobe modinfo readelf mke2fs debugfs xz zstd; do
  command -v "$c" > /dev/null || die "$c not found (run with INSTALL=1)"
done
[ -x /bin/busybox ] || die "/bin/busybox not found (INSTALL=1 installs busybox-static)"

# ---- 2. kernel: headers pick the version, the image must be the same ABI + Debian build --
pick_kver() {  # newest /usr/src/linux-headers-*-amd64 whose package is really installed
  local d k
  for d in $(ls -d /usr/src/linux-headers-*-amd64 2> /dev/null | sort -rV); do
    k=${d#/usr/src/linux-headers-}
    case $(dpkg-query -W -f='${db:Status-Abbrev}' "linux-headers-$k" 2> /dev/null) in ii*) echo "$k"; return ;; esac
  done
}
[ -n "${KVER:-}" ] || KVER=$(pick_kver)
[ -n "$KVER" ] || die "no linux-headers-*-amd64 installed (INSTALL=1, or apt-get install linux-headers-amd64)"
KDIR=/usr/src/linux-headers-$KVER
[ -f "$KDIR/Makefile" ] || die "$KDIR missing (apt-get install linux-headers-$KVER)"
HVER=$(dpkg-query -W -f='${Version}' "linux-headers-$KVER") || die "linux-headers-$KVER is not a dpkg package"

fetch_image() {  # $1 = root: linux-image-$KVER=$HVER unpacked (boot/, lib/modules/) + depmod
  local root=$1 deb log=$KCACHE/download.log
  rm -f "$KCACHE"/linux-image-*.deb
  if ! (cd "$KCACHE" && { apt-get download "linux-image-$KVER=$HVER" ||
        apt-get download "linux-image-$KVER-unsigned=$HVER"; }) > "$log" 2>&1; then
    cat "$log" >&2
    echo "hint: linux-image-$KVER=$HVER is no longer in the apt index (the archive moved on)." >&2
    echo "      apt-get update && apt-get install linux-headers-amd64 (or run with INSTALL=1)" >&2
    return 1
  fi
  deb=$(ls "$KCACHE"/linux-image-"$KVER"*_amd64.deb | head -1)
  rm -rf "$root.tmp"; dpkg-deb -x "$deb" "$root.tmp"
  depmod -b "$root.tmp" "$KVER"
  rm -f "$deb"; mv "$root.tmp" "$root"
  for d in "$KCACHE/$KVER"-*; do  # drop older builds of the same ABI
    case $d in "$root" | *.tmp) ;; *) [ ! -d "$d" ] || rm -rf "$d" ;; esac
  done
  rm -f "$KCACHE/vmlinux-$KVER"-*
}

extract_vmlinux() {  # bzImage $1 -> ELF vmlinux $2 that has a PVH entry note (CONFIG_PVH=y)
  local fmt magic dec off notes
  for fmt in xz zstd gzip; do  # Debian 6.1: XZ, 6.12: ZSTD
    case $fmt in
      xz) magic='\xfd7zXZ\x00' dec='xz -dc --single-stream' ;;
      zstd) magic='\x28\xb5\x2f\xfd' dec='zstd -dcq' ;;  # exits 1 on trailing data; output is complete
      gzip) magic='\x1f\x8b\x08' dec='gzip -dcq' ;;
    esac
    for off in $(LC_ALL=C grep -obUaP "$magic" "$1" | cut -d: -f1 | head -3); do
      tail -c +$((off + 1)) "$1" > "$2.c"  # a file, not a pipe: the decoder stops early (SIGPIPE)
      $dec "$2.c" > "$2.tmp" 2> /dev/null || true
      [ "$(head -c4 "$2.tmp")" = $'\x7fELF' ] || continue
      notes=$(readelf -n "$2.tmp" 2> /dev/null || true)
      if [[ $notes == *0x00000012* || $notes == *PHYS32* ]]; then
        rm -f "$2.c"; mv "$2.tmp" "$2"; return 0
      fi
    done
  done
  rm -f "$2.c" "$2.tmp"; return 1
}

fetch_ksft() {  # $1 = dir, $2 = series (6.1): kselftest headers from linux-source-$2
  local dir=$1 series=$2 deb log=$KCACHE/download.log m
  m=linux-source-$series/tools/testing/selftests
  rm -f "$KCACHE"/linux-source-*.deb
  if ! (cd "$KCACHE" && { apt-get download "linux-source-$series=$HVER" ||
        apt-get download "linux-source-$series"; }) > "$log" 2>&1; then
    cat "$log" >&2; return 1
  fi
  deb=$(ls "$KCACHE"/linux-source-"$series"_*_all.deb | head -1)
  rm -rf "$dir.tmp"; mkdir -p "$dir.tmp"
  dpkg-deb -W --showformat='${Package} ${Version}\n' "$deb" > "$dir.tmp/SOURCE"
  # --occurrence: tar stops once both are found; the pipe upstream then dies of SIGPIPE
  (set +o pipefail; dpkg-deb --fsys-tarfile "$deb" | tar -xO "./usr/src/linux-source-$series.tar.xz" |
    tar -xJ --occurrence --strip-components=4 -C "$dir.tmp" "$m/kselftest_harness.h" "$m/kselftest.h") 2> /dev/null || true
  rm -f "$deb"
  [ -s "$dir.tmp/kselftest_harness.h" ] && [ -s "$dir.tmp/kselftest.h" ] || return 1
  mv "$dir.tmp" "$dir"
}

exec 9> "$KCACHE/.lock"; flock 9  # one writer of the cache at a time
if [ "$KIMG" != extract ] && [ -f "/boot/vmlinuz-$KVER" ] && [ -d "/lib/modules/$KVER/kernel" ]; then
  IVER=$(dpkg-query -W -f='${Version}' "linux-image-$KVER" 2> /dev/null ||
    dpkg-query -W -f='${Version}' "linux-image-$KVER-unsigned" 2> /dev/null) || IVER=unknown
  MODROOT=""; VMLINUZ=/boot/vmlinuz-$KVER
elif [ "$KIMG" != installed ]; then
  MODROOT=$KCACHE/$KVER-$HVER
  if [ ! -f "$MODROOT/boot/vmlinuz-$KVER" ]; then
    fetch_image "$MODROOT" || die "cannot download linux-image-$KVER=$HVER"
    ts "linux-image-$KVER $HVER unpacked into $MODROOT"
  fi
  IVER=$HVER; VMLINUZ=$MODROOT/boot/vmlinuz-$KVER
else
  die "linux-image-$KVER is not installed (KIMG=installed)"
fi
[ "$HVER" = "$IVER" ] || die "headers $HVER != image $IVER for $KVER (install both from one apt-get update)"
BOOTK=$VMLINUZ
if [ "$BOOT" = pvh ]; then
  if [ -s "$KCACHE/vmlinux-$KVER-$HVER" ] || extract_vmlinux "$VMLINUZ" "$KCACHE/vmlinux-$KVER-$HVER"; then
    BOOTK=$KCACHE/vmlinux-$KVER-$HVER
  else echo "# could not extract a PVH vmlinux, booting the bzImage"; fi
fi
if [ -z "$KSFT_DIR" ] && [ "$KSFT" = 1 ]; then
  series=$(echo "$KVER" | cut -d. -f1,2)
  KSFT_DIR=$KCACHE/kselftest-$series
  if [ ! -s "$KSFT_DIR/kselftest_harness.h" ]; then
    fetch_ksft "$KSFT_DIR" "$series" || die "cannot get kselftest headers from linux-source-$series"
    ts "kselftest headers from $(cat "$KSFT_DIR/SOURCE") cached in $KSFT_DIR"
  fi
fi
flock -u 9
[ -z "$KSFT_DIR" ] || [ -s "$KSFT_DIR/kselftest_harness.h" ] || die "no kselftest_harness.h in KSFT_DIR=$KSFT_DIR"
ts "kernel $KVER (Debian $HVER), modules from ${MODROOT:-/}, boot $BOOTK"


# ---- 3. build the module (Kbuild, on a clean copy: no stale .ko can be reused) -----------
if [ -e "$WORK" ] && [ ! -e "$WORK/.kmodvm" ] && [ -n "$(ls -A "$WORK")" ]; then
  die "WORK=$WORK is not empty and was not made by run-vm.sh; refusing to wipe it"
fi
rm -rf "$WORK"; mkdir -p "$WORK/mod" "$WORK/tests"; touch "$WORK/.kmodvm"
cp -a "$TOP/Kbuild" "$TOP/kmod" "$TOP/include" "$WORK/mod/"
make -s -j"$(nproc)" -C "$KDIR" M="$WORK/mod" W=1 modules > "$WORK/build.log" 2>&1 ||
  { cat "$WORK/build.log"; die "module build failed"; }
grep -v 'Skipping BTF generation' "$WORK/build.log" || true
KO=$WORK/mod/$KMOD.ko
[ -f "$KO" ] || die "no $KMOD.ko was built"
vm_ref=$(modinfo -F vermagic "$(ls "$MODROOT/lib/modules/$KVER/kernel/drivers/block/"virtio_blk.ko* | head -1)")
vm_mod=$(modinfo -F vermagic "$KO")
[ "$vm_mod" = "$vm_ref" ] || die "vermagic mismatch: $KMOD.ko '$vm_mod' vs kernel '$vm_ref'"
ts "built $KMOD.ko vermagic='$vm_ref'"

# ---- 4. static test programs (no libc in the guest) ----------------------------------------
NAMES=""
for src in "${TESTS[@]}"; do
  case $src in
    *.c) name=$(basename "$src" .c)
      # shellcheck disable=SC2086
      gcc $TEST_CFLAGS -static -I"$TOP/include" -I"$TOP/tests/kmod" -I"$KSFT_DIR" \
        -o "$WORK/tests/$name" "$src" $TEST_LDLIBS || die "building $src failed" ;;
    *) name=$(basename "$src")
      [ "$(head -c4 "$src")" = $'\x7fELF' ] || die "$src: expected a .c file or a static binary"
      [[ $(readelf -lW "$src") != *"program interpreter"* ]] || die "$src is dynamically linked"
      install -m 755 "$src" "$WORK/tests/$name" ;;
  esac
  NAMES+=" $name"
done
ts "built tests:$NAMES"

# ---- 5. initramfs: static busybox, in-tree drivers, tencache.ko, the tests, /init ----------
R=$WORK/root
mkdir -p "$R"/{bin,sbin,dev,proc,sys,tmp,mnt,t,lib/modules/$KVER/extra}
cp /bin/busybox "$R/bin/busybox"
for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -sf busybox "$R/bin/$a"; done
ln -sf ../bin/busybox "$R/sbin/modprobe"
GMODS="virtio_pci virtio_blk nvme ext4"
for m in $GMODS crc32c_generic crc64_rocksoft_generic crct10dif_generic; do
  deps=$(modprobe ${MODROOT:+-d "$MODROOT"} -S "$KVER" --show-depends "$m" 2> /dev/null) || continue
  for f in $(awk '$1=="insmod"{print $2}' <<< "$deps"); do
    rel=${f#"$MODROOT"}; mkdir -p "$R$(dirname "$rel")"
    case $f in
      *.ko.xz) xz -dc "$f" > "$R${rel%.xz}" ;;
      *.ko.zst) zstd -dcq "$f" > "$R${rel%.zst}" ;;
      *) cp "$f" "$R$rel" ;;
    esac
  done
done
cp "$MODROOT/lib/modules/$KVER"/modules.{order,builtin,builtin.modinfo} "$R/lib/modules/$KVER/"
cp "$KO" "$R/lib/modules/$KVER/extra/"
depmod -b "$R" "$KVER"
cp -a "$WORK/tests/." "$R/t/"
# Guest side. TAP goes to the 2nd serial port (tap.log), the kernel log to ttyS0.
# Each test program prints its own TAP lines (kselftest); a program that exits non-zero
# without a "not ok" line (a crash, a setup failure) adds one.
cat > "$R/init" << INIT
#!/bin/sh
export PATH=/bin:/sbin
mount -t proc proc /proc; mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev; mount -t tmpfs tmpfs /tmp
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
exec 3>/dev/ttyS1
echo "TAP version 13" >&3
rc=0; n=0
t() { n=\$((n+1)); if [ "\$1" = 0 ]; then echo "ok \$n - \$2" >&3; else echo "not ok \$n - \$2" >&3; rc=1; fi; }
memfree() { echo 3 > /proc/sys/vm/drop_caches; awk '/^MemFree:/{print \$2}' /proc/meminfo; }
modprobe -a $GMODS || echo "# modprobe of in-tree drivers failed" >&3
for i in \$(seq 100); do [ -b /dev/vdb ] && [ -b /dev/nvme0n1 ] && break; sleep 0.1; done
mkdir -p /mnt/ext4; mount -t ext4 /dev/vdb /mnt/ext4; t \$? "mount ext4 (virtio-blk) at /mnt/ext4"
m0=\$(memfree)
modprobe $KMOD $MODPARAMS; t \$? "modprobe $KMOD $MODPARAMS"
S=/sys/class/misc/tencache
exec 4< /dev/tencache; rmmod $KMOD 2> /dev/null; r=\$?; exec 4<&-
t \$(( r == 0 )) "rmmod is refused while /dev/tencache is open"
export TENCACHE_NVME=/dev/nvme0n1 TENCACHE_EXT4=/mnt/ext4 TEST_DIR=/mnt/ext4
cd /tmp
for x in $NAMES; do
  echo "# ---- \$x" >&3
  { timeout $GUEST_TIMEOUT /t/\$x 2>&1; echo \$? > /tmp/rc; } | tee /tmp/out >&3
  r=\$(cat /tmp/rc)
  if grep -qE '^(not )?ok ' /tmp/out; then   # a TAP producer (kselftest): its lines count
    if grep -qE '^not ok ' /tmp/out; then rc=1; elif [ "\$r" != 0 ]; then t 1 "\$x exited with status \$r"; fi
  else                                        # a plain program: its exit status counts
    case \$r in 0) t 0 "\$x" ;; 4|77) echo "ok - \$x # SKIP" >&3 ;; *) t 1 "\$x exited with status \$r" ;; esac
  fi
done
t \$(( \$(cat \$S/blocks_used) + \$(cat \$S/buffers_live) )) "after the tests: blocks_used=\$(cat \$S/blocks_used) buffers_live=\$(cat \$S/buffers_live)"
t \$(( \$(cat \$S/blocks_held) != \$(cat \$S/reserved_bytes) / 2097152 )) "pool holds exactly its reservation (\$(cat \$S/blocks_held) blocks)"
t \$(( \$(cat \$S/io_inflight) )) "no staging I/O in flight"
t \$(( \$(cat \$S/blocks_released_pinned) )) "no block was still referenced when its buffer was released"
umount /mnt/ext4
# rmmod must give back what the module holds: grow the reservation to 256 MiB first
echo 256 > \$S/reserved_mb; m1=\$(memfree)
rmmod $KMOD; t \$? "rmmod $KMOD"
m2=\$(memfree)
echo "# MemFree: before modprobe \${m0} kB, holding 256 MiB \${m1} kB, after rmmod \${m2} kB" >&3
t \$(( m2 - m1 < 229376 )) "rmmod returned the 256 MiB pool to the kernel (MemFree +\$(( (m2 - m1) / 1024 )) MiB)"
# MemFree moves by tens of MiB with per-cpu lists and caches: a coarse leak bound only
t \$(( m0 - m2 > 65536 )) "MemFree after rmmod within 64 MiB of before modprobe (\$(( (m2 - m0) / 1024 )) MiB)"
tn=\$(cat /proc/sys/kernel/tainted)  # bad: M=16 B=32 D=128 W=512 L=16384; O=4096 E=8192 expected
t \$((tn & 17072)) "no oops/WARN/bad-page/lockup taint (tainted=\$tn)"
echo "# uname=\$(uname -r) cmdline=\$(cat /proc/cmdline)" >&3
echo "1..\$n" >&3
sync
echo "KMODVM-DONE rc=\$rc" >&3
poweroff -f
INIT
chmod +x "$R/init"
(cd "$R" && find . | cpio -o -H newc --quiet | gzip -1) > "$WORK/initramfs.cpio.gz"
ts "initramfs $(du -h "$WORK/initramfs.cpio.gz" | cut -f1)"

# ---- 6. disks: /dev/vda raw, /dev/vdb ext4, /dev/nvme0n1 raw ------------------------------
truncate -s "$DISK_SIZE" "$WORK/vda.img" "$WORK/nvme.img"
mke2fs -q -F -t ext4 "$WORK/ext4.img" "$DISK_SIZE" > /dev/null

# ---- 7. boot (CI has no stdin: -display none -monitor none, not -nographic) ---------------
# shellcheck disable=SC2206,SC2054
QEMU=(qemu-system-x86_64 -accel "$ACCEL" -cpu "$CPU" -m "$MEM" -smp "$SMP"
  -display none -monitor none -no-reboot -nodefaults
  -kernel "$BOOTK" -initrd "$WORK/initramfs.cpio.gz"
  -append "console=ttyS0 panic=-1 oops=panic $QUIET hugepages=$HUGEPAGES"
  -serial file:"$WORK/console.log" -serial file:"$WORK/tap.log"
  -drive file="$WORK/vda.img",if=virtio,format=raw,cache=unsafe
  -drive file="$WORK/ext4.img",if=virtio,format=raw,cache=unsafe
  -drive file="$WORK/nvme.img",if=none,id=nv0,format=raw,cache=unsafe
  -device "nvme,drive=nv0,serial=tencache0")
printf '%q ' "${QEMU[@]}" > "$WORK/qemu.cmd"; echo >> "$WORK/qemu.cmd"
: > "$WORK/tap.log"; : > "$WORK/console.log"
ts "booting (accel=$ACCEL cpu=$CPU mem=$MEM smp=$SMP hugepages=$HUGEPAGES; tests:$NAMES)"
tail -n +1 -f "$WORK/tap.log" 2> /dev/null | grep --line-buffered -E '^# ----|^not ok|^# [A-Z]' &
TAILPID=$!
B0=$(date +%s%N); set +e
timeout "$TIMEOUT" "${QEMU[@]}" < /dev/null > "$WORK/qemu.out" 2>&1
qrc=$?; set -e
kill "$TAILPID" 2> /dev/null || true; wait "$TAILPID" 2> /dev/null || true
B=$((($(date +%s%N) - B0) / 100000000))
ts "qemu exited rc=$qrc after $((B / 10)).$((B % 10))s"
[ "$qrc" = 0 ] || cat "$WORK/qemu.out"

# ---- 8. verdict -----------------------------------------------------------------------------
echo "# ---- tap.log"
cat "$WORK/tap.log"
hp=0; hf=0
check() { if eval "$2"; then echo "ok - host: $1"; hp=$((hp + 1)); else echo "not ok - host: $1"; hf=$((hf + 1)); fi; }
BAD='BUG:|Oops|WARNING:|general protection|Call Trace|Kernel panic|Bad rss-counter|Bad page|still held at exit'
check "guest reached KMODVM-DONE rc=0 (qemu rc=$qrc)" "grep -q '^KMODVM-DONE rc=0' '$WORK/tap.log'"
check "no BUG/Oops/WARNING/bad page/rss-counter in console.log" "! grep -qE '$BAD' '$WORK/console.log'"
if grep -qE "$BAD" "$WORK/console.log"; then
  echo "# ---- console.log excerpt ----"; grep -E -B2 -A25 "$BAD" "$WORK/console.log" | head -80 || true
fi
p=$(grep -cE '^ok ' "$WORK/tap.log" | tr -d ' ' || true)
s=$(grep -cE '^ok .*# SKIP' "$WORK/tap.log" || true)
f=$(grep -cE '^not ok ' "$WORK/tap.log" || true)
p=$((p - s + hp)); f=$((f + hf))
ts "done (logs in $WORK: console.log tap.log build.log qemu.out qemu.cmd)"
CLOSED=1
echo "kmodvm: $p passed, $f failed, $s skipped"
[ "$f" = 0 ]
