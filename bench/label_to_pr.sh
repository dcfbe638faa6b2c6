#!/usr/bin/env bash
# Label to pull request, excluding the model: p50 over RUNS labeled issues.
#
#   bash bench/label_to_pr.sh          # RUNS=20
#
# The release `forgehand serve` binary gets a signed `labeled` webhook from
# the fake GitHub; the scripted model answers at once with ten tool calls
# (reads, a search, commands, an edit) and a finish, run in the namespace
# sandbox; then the gate, the push over smart HTTP and the pull request.
# Timed from the moment the fake forge sends the webhook until the pull
# request exists on it. The JSON (all runs, and each pipeline step's p50)
# is kept under bench/results/.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
. "$repo/scripts/lib.sh"
cd "$repo"

RUNS=${RUNS:-20}
[[ $RUNS =~ ^[0-9]+$ ]] && ((RUNS >= 1)) || { echo "RUNS must be a positive number" >&2; exit 2; }

base_packages
sandbox_packages
git_server_packages
ensure_rust

echo "==> cargo build --release (forgehand, label_to_pr_bench)"
cargo build --release --locked -p forgehand-bot --bin forgehand
cargo build --release --locked -p forgehand-tests --example label_to_pr_bench
bin="${CARGO_TARGET_DIR:-$repo/target}/release/examples/label_to_pr_bench"

echo "==> guest rootfs (images/build-rootfs)"
FORGEHAND_TEST_ROOTFS="$(guest_rootfs)"
export FORGEHAND_TEST_ROOTFS

mkdir -p bench/results
out="bench/results/label-to-pr-$(date -u +%Y-%m-%dT%H%M%SZ).json"
echo "==> $RUNS runs"
"$bin" "$RUNS" | tee "$out"
python3 - "$out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["label_to_pull_request_ms"]
print()
print(f"label → pull request ({r['runs']} runs, {r['tool_calls_per_run']} tool calls each, model excluded):")
print(f"  p50 {t['p50']:.0f} ms, p90 {t['p90']:.0f} ms, min {t['min']:.0f} ms, max {t['max']:.0f} ms")
print("  each step's p50: " + ", ".join(f"{k} {v:.0f} ms" for k, v in r["step_p50_ms"].items()))
PY
echo "kept in $out"
