#!/usr/bin/env bash
# Contention benchmark: how long the SQLite store's writes take while a
# reader holds a transaction, and a worker's writes while webhooks flood
# the intake. See store/examples/contention_bench.rs and bench/README.md.
#
#   bash bench/contention.sh         # 3 s of deliveries per case
#   bash bench/contention.sh 10      # 10 s
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo run --release -q -p forgehand-store --example contention_bench -- "$@"
