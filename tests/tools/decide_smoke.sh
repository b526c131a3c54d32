#!/bin/bash
# decide_smoke.sh - CI smoke test of tencache-bench decide (the acquire /
# release decision-cost benchmark): one short run; it must finish, ours and
# the nobatch, issuer and resident variants must run from a plan (decide exits 1 otherwise), and
# the table must have every variant, the device calls per decision and the
# goal line; with --call-ns also the device time per decision. Not timed: the figures
# are the benchmark's to show, not a test's. Exit 0 pass, 1 fail.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" decide-smoke
out=$T/out
for bad in x 100001; do	# --gap-us: a number of us up to 100000
	"$BENCH" decide --gap-us $bad > "$out" 2>&1
	rc=$?
	[ "$rc" = 2 ] && grep -q "bad value for --gap-us: $bad" "$out" ||
		{ cat "$out"; echo "FAIL: --gap-us $bad: exit $rc"; exit 1; }
done
"$BENCH" decide --steps 2 -o "$out.res" > "$out" 2>&1
rc=$?
cat "$out"
[ "$rc" = 0 ] || { echo "FAIL: decide exited $rc"; exit 1; }
for v in ours nobatch issuer resident on-demand naive; do
	grep -qE "^$v +([0-9]+ +){4}\|" "$out" || { echo "FAIL: no figures for $v"; exit 1; }
done
grep -qE '^goal: .*: (PASS|FAIL)$' "$out" || { echo "FAIL: no goal line"; exit 1; }
# the device calls per decision: ours copies and records events (a budget of
# half the parameters evicts), and resident, with every tensor kept, copies less;
# ours batches its copies: fewer copy calls than nobatch, and a batch's copies
# share one event record: nobatch's records less the copy calls batching saved
# (within 5%: each variant plans from its own profiled step, and the plans,
# made for less where the layout needs it, may differ by a few copies)
awk '/^device calls per decision/ { t = 1; next }
     t && NF == 0 { t = 0 }
     t && $1 == "ours" { oc = $2; orc = $4; oa = $NF }
     t && $1 == "nobatch" { nc = $2; nrc = $4 }
     t && $1 == "resident" { ra = $NF }
     END { d = orc + (nc - oc) - nrc; if (d < 0) d = -d
	   exit !(oc > 0 && orc > 0 && ra > 0 && ra < oa && oc < nc && d <= 0.05 * nrc) }' "$out" ||
	{ sed -n '/^device calls/,/^$/p' "$out"
	  echo "FAIL: device calls per decision: none counted, resident's not below ours, or ours' copies not batched"; exit 1; }
grep -q "^device ns per decision" "$out" && { echo "FAIL: device ns printed without --call-ns"; exit 1; }
# --call-ns: the time inside the calls, per kind: ours copies, and spends time in all of them
"$BENCH" decide --steps 2 --call-ns > "$out" 2>&1
rc=$?
[ "$rc" = 0 ] || { cat "$out"; echo "FAIL: decide --call-ns exited $rc"; exit 1; }
awk '/^device ns per decision/ { t = 1; next }
     t && NF == 0 { t = 0 }
     t && $1 == "ours" { oc = $2; oa = $NF }
     END { exit !(oc > 0 && oa >= oc) }' "$out" ||
	{ sed -n '/^device ns/,/^$/p' "$out"; echo "FAIL: --call-ns: no device time for ours' copies"; exit 1; }
echo "decide: ran"
