#!/usr/bin/env bash
# Refreshes the offline query data that the compiler checks the stores'
# SQL against: store/.sqlx (SQLite) and store-pg/.sqlx (PostgreSQL). Run
# it after changing a query in store/queries or store-pg/queries, or
# adding a migration. For each store it builds a database from the
# migrations (a scratch PostgreSQL server in a temporary directory, run
# as an unprivileged user when this runs as root), checks the crate
# against it with sqlx's macros live, and keeps what they found. CI
# builds offline from the committed data (no database needed), and a
# test of each store checks that the data still fits the migrations.
# The same as `cargo sqlx prepare`, without installing sqlx-cli.
#   bash scripts/sqlx-prepare.sh [sqlite|postgres]   (both by default)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
. "$repo/scripts/lib.sh"
which="${1:-all}"
ensure_rust

work="$(mktemp -d)"
pg_ctl_bin=""
cleanup() {
  if [ -n "$pg_ctl_bin" ]; then
    as_pg_user "$pg_ctl_bin" -D "$work/pg/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# as_pg_user CMD...: PostgreSQL refuses to run as root.
as_pg_user() {
  if [ "$(id -u)" = 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi
}

prepare_sqlite() {
  apt_install sqlite3
  local db="$work/prepare.db"
  for migration in "$repo"/store/migrations/*.sql; do
    sqlite3 "$db" <"$migration"
  done
  rm -rf "$repo/store/.sqlx"
  mkdir -p "$repo/store/.sqlx"
  # The macros run again only when the crate is rebuilt.
  touch "$repo"/store/src/lib.rs "$repo"/store/src/sqlite/*.rs
  (cd "$repo" && DATABASE_URL="sqlite://$db" SQLX_OFFLINE=false SQLX_OFFLINE_DIR="$repo/store/.sqlx" \
    cargo check -p forgehand-store --all-targets --locked)
  echo "==> $(ls "$repo/store/.sqlx" | wc -l) queries kept in store/.sqlx"
}

prepare_postgres() {
  postgres_packages
  local bin
  bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
  mkdir -p "$work/pg"
  [ "$(id -u)" = 0 ] && chown nobody "$work" "$work/pg"
  as_pg_user "$bin/initdb" -D "$work/pg/data" -U postgres --auth=trust -E UTF8 --no-locale -N >/dev/null
  pg_ctl_bin="$bin/pg_ctl"
  as_pg_user "$bin/pg_ctl" -D "$work/pg/data" -l "$work/pg/log" -w \
    -o "-k $work/pg -c listen_addresses= -c fsync=off" start >/dev/null
  for migration in "$repo"/store-pg/migrations/*.sql; do
    "$bin/psql" -q -v ON_ERROR_STOP=1 -h "$work/pg" -U postgres -d postgres -f "$migration" >/dev/null
  done
  rm -rf "$repo/store-pg/.sqlx"
  mkdir -p "$repo/store-pg/.sqlx"
  touch "$repo"/store-pg/src/*.rs
  # The live database is named in store-pg/.env alone, for the time of the
  # check: set in the environment, it would reach the SQLite store's
  # macros too (store/.env keeps those offline).
  cp "$repo/store-pg/.env" "$work/store-pg.env"
  restore_env() { cp "$work/store-pg.env" "$repo/store-pg/.env"; }
  trap 'restore_env; cleanup' EXIT
  printf 'DATABASE_URL=%s\n' "postgres://postgres@localhost/postgres?host=$work/pg" \
    >"$repo/store-pg/.env"
  # sqlx writes what it found only where the environment's
  # SQLX_OFFLINE_DIR says (the offline SQLite store writes nothing).
  (cd "$repo" && env -u SQLX_OFFLINE -u DATABASE_URL SQLX_OFFLINE_DIR="$repo/store-pg/.sqlx" \
    cargo check -p forgehand-store-pg --all-targets --locked)
  restore_env
  echo "==> $(ls "$repo/store-pg/.sqlx" | wc -l) queries kept in store-pg/.sqlx"
}

case "$which" in
  sqlite) prepare_sqlite ;;
  postgres) prepare_postgres ;;
  all) prepare_sqlite; prepare_postgres ;;
  *) echo "usage: $0 [sqlite|postgres]" >&2; exit 2 ;;
esac
