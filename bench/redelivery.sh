#!/usr/bin/env bash
# Redelivery benchmark: how fast `forgehand serve` answers a storm of
# deliveries it has already recorded (GitHub's "Redeliver", or a replayed
# signed request), once many deliveries are recorded. Each one is a lookup
# inside the intake's one writer, so it must not cost more as the database
# grows. See bench/README.md.
#
#   bash bench/redelivery.sh
#
# Environment: FILL (seconds of new deliveries first, 5), DURATION (seconds
# of redeliveries, 10), FORGEHAND_BIN (skip the cargo build), KEEP_TMP=1.
# Needs wrk, sqlite3, curl and python3 (bench/intake.sh installs them).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
cd "$REPO"

FILL=${FILL:-5}
DURATION=${DURATION:-10}
die() { printf 'redelivery.sh: %s\n' "$*" >&2; exit 1; }
for tool in wrk sqlite3 curl python3; do
  command -v "$tool" >/dev/null || die "$tool is missing (apt-get install wrk sqlite3 curl python3, or run bench/intake.sh once)"
done

if [[ -n ${FORGEHAND_BIN:-} ]]; then
  BIN=$(readlink -f "$FORGEHAND_BIN" || true)
else
  cargo build --release -p forgehand-bot --bin forgehand
  BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/forgehand"
fi
[[ -x $BIN ]] || die "no forgehand binary at $BIN"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/forgehand-redelivery.XXXXXX")
PID=
cleanup() {
  [[ -n $PID ]] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
  if [[ -z ${KEEP_TMP:-} ]]; then rm -rf "$TMP"; else echo "temp dir kept: $TMP" >&2; fi
}
trap cleanup EXIT

SECRET="bench-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
python3 bench/make_payload.py "$SECRET" "$TMP" >/dev/null
export BENCH_PAYLOAD="$TMP/payload.json" BENCH_SIGNATURE="$TMP/payload.sig"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL="http://127.0.0.1:$PORT/webhooks/github"

(cd "$TMP" &&
  FORGEHAND_SERVER__LISTEN="127.0.0.1:$PORT" \
  FORGEHAND_DATABASE__URL="sqlite://$TMP/bench.db" \
  FORGEHAND_GITHUB__WEBHOOK_SECRET="$SECRET" \
  FORGEHAND_BOT__USERNAME=forgehand \
  FORGEHAND_QUEUE__WORKERS=0 \
  FORGEHAND_LOG__LEVEL=warn \
  exec "$BIN" serve) > "$TMP/forgehand.log" 2>&1 &
PID=$!
for ((i = 0; i < 300; i++)); do
  [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://127.0.0.1:$PORT/healthz" || true) == 200 ]] && break
  kill -0 "$PID" 2>/dev/null || { tail -n 20 "$TMP/forgehand.log" >&2; die "forgehand exited"; }
  sleep 0.1
done

echo "== ${FILL}s of new deliveries"
BENCH_RUN=$RANDOM BENCH_DURATION=$FILL wrk -t2 -c32 -d"${FILL}s" -s bench/wrk/signed.lua "$URL" > "$TMP/fill.txt"
FIRST=$(sqlite3 "$TMP/bench.db" "select delivery_id from deliveries where outcome = 'accepted' order by id limit 1")
[[ -n $FIRST ]] || die "nothing was recorded while filling (see $TMP/fill.txt)"
RECORDED=$(sqlite3 "$TMP/bench.db" "select count(*) from deliveries; select count(*) from jobs" | paste -sd/ -)
echo "recorded deliveries/jobs: $RECORDED"

echo "== ${DURATION}s of redeliveries of $FIRST"
BENCH_RUN=$RANDOM BENCH_DURATION=$DURATION BENCH_DELIVERY_ID=$FIRST \
  wrk -t2 -c32 -d"${DURATION}s" --latency -s bench/wrk/signed.lua "$URL" | tee "$TMP/redeliver.txt"
kill "$PID"; wait "$PID" 2>/dev/null || true; PID=

ANSWERED=$(sed -n 's/^  200: //p' "$TMP/redeliver.txt")
DUPLICATES=$(sqlite3 "$TMP/bench.db" "select count(*) from deliveries where outcome = 'duplicate' and delivery_id = '$FIRST'")
echo "answered 200 (duplicate): ${ANSWERED:-0}; duplicate rows recorded: $DUPLICATES"
# Every answered redelivery is on record; a few more may have been
# recorded as wrk stopped, with their answers unread.
((${ANSWERED:-0} > 0)) || die "no redelivery was answered 200"
((DUPLICATES >= ANSWERED)) || die "$ANSWERED redeliveries answered but only $DUPLICATES recorded"
