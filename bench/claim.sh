#!/usr/bin/env bash
# Claim benchmark: how long claiming a job takes with N jobs waiting on one
# issue (held back by its running job, or superseded by its newest
# request). See bot/examples/claim_bench.rs and bench/README.md.
#
#   bash bench/claim.sh              # N = 100, 1000, 10000, 50000
#   bash bench/claim.sh 200000       # other sizes
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo run --release -q -p forgehand-bot --example claim_bench -- "$@"
