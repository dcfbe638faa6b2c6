#!/usr/bin/env bash
# Refreshes the offline query data (store/.sqlx) that the compiler checks
# the store's SQL against: run it after changing a query in store/queries
# or adding a migration. It builds a database from the migrations, checks
# the store crate against it with sqlx's macros live, and keeps what they
# found. CI builds offline from the committed data (no database needed),
# and a store test checks that the data still fits the migrations.
# The same as `cargo sqlx prepare`, without installing sqlx-cli.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
. "$repo/scripts/lib.sh"
apt_install sqlite3
ensure_rust

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
db="$work/prepare.db"
for migration in "$repo"/store/migrations/*.sql; do
  sqlite3 "$db" <"$migration"
done

rm -rf "$repo/store/.sqlx"
mkdir -p "$repo/store/.sqlx"
# The macros run again only when the crate is rebuilt.
touch "$repo"/store/src/lib.rs "$repo"/store/src/sqlite/*.rs
cd "$repo"
DATABASE_URL="sqlite://$db" SQLX_OFFLINE=false SQLX_OFFLINE_DIR="$repo/store/.sqlx" \
  cargo check -p forgehand-store --all-targets --locked
echo "==> $(ls "$repo/store/.sqlx" | wc -l) queries kept in store/.sqlx"
