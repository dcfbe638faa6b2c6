#!/usr/bin/env bash
# A job's working copy: ready from the mirror cache versus a fresh clone
# over smart HTTP, side by side (alternating) in one run.
#
#   bash bench/workcopy.sh            # FILES=10000 COMMITS=1000 RUNS=5
#
# A repository of FILES files and COMMITS commits (each after the first
# changes ten files) is generated with git fast-import and served by
# `git http-backend` behind basic auth on 127.0.0.1 (the tests' server).
# Each run measures, after a `sync` so that no run pays for the last one's
# writes:
#   fresh_git_clone     git clone over smart HTTP (the git command)
#   fresh_git2_clone    Forgehand's transport (git2) cloning, then checkout
#   mirror_hardlinks    mirror update (an incremental fetch over HTTP) and
#                       a working copy whose objects are hard links (the
#                       default, CopyStrategy::HardLinks)
#   mirror_local_fetch  the same with a local fetch from the mirror
#   layered             what jobs do: the mirror updated, a writable overlay
#                       over the shared checkout of the base commit (made once,
#                       by the first job: its time reported beside), the job's
#                       git directory with the checkout's index
# Then the disk ten concurrent jobs take, layered, beside ten full clones.
# Medians and ratios are printed as JSON and kept under bench/results/.
# Needs root (overlay mounts), as Forgehand itself does.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
. "$repo/scripts/lib.sh"
cd "$repo"

FILES=${FILES:-10000}
COMMITS=${COMMITS:-1000}
RUNS=${RUNS:-5}
for v in FILES COMMITS RUNS; do
  [[ ${!v} =~ ^[0-9]+$ ]] && ((${!v} >= 1)) || { echo "$v must be a positive number" >&2; exit 2; }
done

base_packages
git_server_packages
ensure_rust

echo "==> cargo build --release --example workcopy_bench"
cargo build --release --locked -p forgehand-tests --example workcopy_bench
bin="${CARGO_TARGET_DIR:-$repo/target}/release/examples/workcopy_bench"

mkdir -p bench/results
out="bench/results/workcopy-$(date -u +%Y-%m-%dT%H%M%SZ).json"
echo "==> $FILES files, $COMMITS commits, $RUNS runs"
"$bin" "$FILES" "$COMMITS" "$RUNS" | tee "$out"
python3 - "$out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print()
print("| working copy ready | p50 | min | max |")
print("| --- | --- | --- | --- |")
for key in ["fresh_git_clone", "fresh_git2_clone", "mirror_hardlinks", "mirror_local_fetch",
            "of_which_mirror_update", "layered"]:
    m = r[key]
    print(f"| {key} | {m['p50_ms']:.0f} ms | {m['min_ms']:.0f} ms | {m['max_ms']:.0f} ms |")
print()
print(f"fresh git clone / mirror (hard links): {r['ratio_git_clone_over_hardlinks']:.2f}x")
print(f"fresh git clone / mirror (local fetch): {r['ratio_git_clone_over_local_fetch']:.2f}x")
print(f"fresh git clone / layered over the shared checkout: {r['ratio_git_clone_over_layered']:.1f}x"
      f" (the shared checkout's first build: {r['first_shared_checkout_ms']:.0f} ms)")
mib = 1 << 20
print(f"disk of 10 concurrent jobs: layered {r['disk_ten_layered_bytes'] / mib:.1f} MiB,"
      f" 10 full clones {r['disk_ten_full_copies_bytes'] / mib:.1f} MiB"
      f" ({r['disk_ten_full_copies_bytes'] / max(r['disk_ten_layered_bytes'], 1):.1f}x)")
PY
echo "kept in $out"
