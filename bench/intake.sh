#!/usr/bin/env bash
# Intake benchmark: `forgehand serve` on SQLite and on PostgreSQL against
# GitHub's own Node toolkit (@octokit/webhooks 14, createNodeMiddleware,
# verification only), signed ~9 KB `issues` deliveries sent by
# `wrk -t2 -c32` to each, in one run. Every request is a distinct delivery
# (its own body and signature: bench/wrk/signed.lua), as a forge sends
# them; BENCH_SAME_BODY=1 sends one body under many ids, which the replay
# protection records as duplicates. See bench/README.md.
#
#   bash bench/intake.sh            # ROUNDS=3 of DURATION=15 s on each side
#
# The servers stay up for the whole run, and the rounds alternate
# (forgehand on SQLite, on PostgreSQL, octokit, ...), so that all see the machine
# in the same state: on a shared VM its speed drifts by 10 % and more within
# minutes, which one pair of runs cannot tell from a difference.
#
# Environment: ROUNDS (3), DURATION (15), WARMUP (2), FORGEHAND_BIN (skip the cargo build
# and use this binary), FORGEHAND_PORT / OCTOKIT_PORT (a free port each),
# STOP_SIGNAL (TERM; KILL checks that every 202 was committed before it was
# sent, with no graceful shutdown to flush anything), BENCH_DRAIN_MS (250,
# see bench/wrk/signed.lua), KEEP_TMP=1 keeps the temp dir (db and logs).
#
# Exits non-zero if a server fails to start or if the accepted deliveries
# recorded in the database differ from the 202 responses wrk received (plus,
# exactly, those accepted as wrk stopped, whose answers it never read).
# The targets (>= 2x the toolkit's requests/s, p99 < 10 ms) are reported,
# not enforced.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
cd "$REPO"

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-15}
WARMUP=${WARMUP:-2}
THREADS=2
CONNECTIONS=32
STOP_SIGNAL=${STOP_SIGNAL:-TERM}
WEBHOOK_PATH=/webhooks/github
RESULTS="$REPO/bench/results"

for v in ROUNDS DURATION WARMUP; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "$v must be a whole number above 0, got '${!v}'" >&2; exit 2; }
done

log() { printf '\n== %s\n' "$*"; }
die() { printf 'intake.sh: %s\n' "$*" >&2; exit 1; }

# ------------------------------------------------------------------ tools
as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else "$@"; fi; }

apt_install() {
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y "$@" \
    || { as_root apt-get update && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y "$@"; }
}

missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v sqlite3 >/dev/null || missing+=(sqlite3)
command -v curl >/dev/null || missing+=(curl)
command -v python3 >/dev/null || missing+=(python3)
ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1 || missing+=(postgresql)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if ((${#missing[@]})); then
  log "installing ${missing[*]}"
  apt_install "${missing[@]}"
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
((node_major >= 20)) || die "@octokit/webhooks 14 needs Node >= 20, found $(node --version)"

if [[ ! -f bench/octokit/node_modules/@octokit/webhooks/package.json ]]; then
  log "npm ci (bench/octokit)"
  (cd bench/octokit && { npm ci --no-audit --no-fund || npm install --no-audit --no-fund; })
fi
OCTOKIT_VERSION=$(node -p 'require("./bench/octokit/node_modules/@octokit/webhooks/package.json").version')

if [[ -n ${FORGEHAND_BIN:-} ]]; then
  BIN=$(readlink -f "$FORGEHAND_BIN" || true)
else
  log "cargo build --release -p forgehand-bot --bin forgehand"
  cargo build --release -p forgehand-bot --bin forgehand
  BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/forgehand"
fi
[[ -x $BIN ]] || die "no forgehand binary at $BIN"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
FH_PORT=${FORGEHAND_PORT:-$(free_port)}
PG_FH_PORT=$(free_port)
OCTO_PORT=${OCTOKIT_PORT:-$(free_port)}
[[ $FH_PORT != "$OCTO_PORT" ]] || OCTO_PORT=$(free_port)

# ------------------------------------------------------------------ setup
TMP=$(mktemp -d "${TMPDIR:-/tmp}/forgehand-bench.XXXXXX")
DB="$TMP/bench.db"
FH_PID=
PG_FH_PID=
OCTO_PID=
PG_CTL=
OK=0

stop_pid() { # pid signal timeout_s -> exit status of the process
  local pid=$1 sig=$2 t=$3 rc=0
  kill -"$sig" "$pid" 2>/dev/null || true
  for ((i = 0; i < t * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "process $pid still running ${t}s after SIG$sig: killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || rc=$?
  return "$rc"
}

# PostgreSQL refuses to run as root: the scratch server runs as nobody.
as_pg_user() { if [[ $(id -u) -eq 0 ]]; then runuser -u nobody -- "$@"; else "$@"; fi; }

cleanup() {
  [[ -n $FH_PID ]] && stop_pid "$FH_PID" KILL 5 || true
  [[ -n $PG_FH_PID ]] && stop_pid "$PG_FH_PID" KILL 5 || true
  [[ -n $PG_CTL ]] && as_pg_user "$PG_CTL" -D "$TMP/pg/data" -m fast -w stop >/dev/null 2>&1 || true
  [[ -n $OCTO_PID ]] && stop_pid "$OCTO_PID" KILL 5 || true
  if [[ $OK == 1 && -z ${KEEP_TMP:-} ]]; then
    rm -rf "$TMP"
  else
    echo "temp dir kept: $TMP (database, server logs, wrk output)" >&2
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

SECRET="bench-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
mkdir -p "$RESULTS"
log "payload"
python3 bench/make_payload.py "$SECRET" "$RESULTS"
export BENCH_PAYLOAD="$RESULTS/payload.json" BENCH_SIGNATURE="$RESULTS/payload.sig"

wait_healthy() { # name port pid log
  local name=$1 port=$2 pid=$3 logf=$4
  for ((i = 0; i < 600; i++)); do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "--- $logf" >&2; tail -n 40 "$logf" >&2 || true
      die "$name exited before answering GET /healthz"
    fi
    if [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://127.0.0.1:$port/healthz" || true) == 200 ]]; then
      return 0
    fi
    sleep 0.1
  done
  echo "--- $logf" >&2; tail -n 40 "$logf" >&2 || true
  die "$name did not answer 200 on GET /healthz within 60 s"
}

RUN_BASE=$(date +%s)
RUN_NO=0
WRK_CMD="wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s --latency -s bench/wrk/signed.lua http://127.0.0.1:<port>$WEBHOOK_PATH"

run_wrk() { # name port seconds show -> writes $TMP/<name>.wrk.txt
  local name=$1 port=$2 secs=$3 show=$4
  RUN_NO=$((RUN_NO + 1))
  local cmd=(wrk "-t$THREADS" "-c$CONNECTIONS" "-d${secs}s" --latency -s bench/wrk/signed.lua
             "http://127.0.0.1:$port$WEBHOOK_PATH")
  export BENCH_RUN=$((RUN_BASE + RUN_NO)) BENCH_DURATION=$secs BENCH_UNANSWERED_FILE="$TMP/$name.unanswered"
  if [[ $show == 1 ]]; then
    echo "\$ BENCH_RUN=$BENCH_RUN BENCH_DURATION=$secs ${cmd[*]}"
    "${cmd[@]}" | tee "$TMP/$name.wrk.txt"
  else
    "${cmd[@]}" > "$TMP/$name.wrk.txt"
  fi
  grep -q '^BENCH_RESULT ' "$TMP/$name.wrk.txt" || die "wrk printed no BENCH_RESULT line for $name (see $TMP/$name.wrk.txt)"
}

# ------------------------------------------------------------------ servers
log "forgehand serve on 127.0.0.1:$FH_PORT (sqlite $DB)"
# Started in the temp dir, so that no forgehand.toml lying in the repo applies.
(cd "$TMP" &&
  FORGEHAND_SERVER__LISTEN="127.0.0.1:$FH_PORT" \
  FORGEHAND_DATABASE__URL="sqlite://$DB" \
  FORGEHAND_GITHUB__WEBHOOK_SECRET="$SECRET" \
  FORGEHAND_BOT__USERNAME=forgehand \
  FORGEHAND_BOT__LABEL=forgehand \
  FORGEHAND_QUEUE__WORKERS=0 \
  FORGEHAND_LOG__LEVEL=warn \
  exec "$BIN" serve) > "$TMP/forgehand.log" 2>&1 &
FH_PID=$!
wait_healthy forgehand "$FH_PORT" "$FH_PID" "$TMP/forgehand.log"

# A scratch PostgreSQL (Debian's package, initdb in the temp dir, its
# socket there, no TCP), durable as a real one: fsync and
# synchronous_commit left on.
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
mkdir -p "$TMP/pg"
[[ $(id -u) -eq 0 ]] && chown nobody "$TMP" "$TMP/pg"
as_pg_user "$PG_BIN/initdb" -D "$TMP/pg/data" -U postgres --auth=trust -E UTF8 --no-locale >/dev/null
PG_CTL="$PG_BIN/pg_ctl"
as_pg_user "$PG_CTL" -D "$TMP/pg/data" -l "$TMP/pg/log" -w \
  -o "-k $TMP/pg -c listen_addresses= -c max_connections=100" start >/dev/null
"$PG_BIN/createdb" -h "$TMP/pg" -U postgres bench
PG_URL="postgres://postgres@localhost/bench?host=$TMP/pg"
PG_VERSION=$("$PG_BIN/postgres" --version | awk '{print $3}')

log "forgehand serve on 127.0.0.1:$PG_FH_PORT (postgresql $PG_VERSION)"
(cd "$TMP" &&
  FORGEHAND_SERVER__LISTEN="127.0.0.1:$PG_FH_PORT" \
  FORGEHAND_DATABASE__URL="$PG_URL" \
  FORGEHAND_GITHUB__WEBHOOK_SECRET="$SECRET" \
  FORGEHAND_BOT__USERNAME=forgehand \
  FORGEHAND_BOT__LABEL=forgehand \
  FORGEHAND_QUEUE__WORKERS=0 \
  FORGEHAND_LOG__LEVEL=warn \
  exec "$BIN" serve) > "$TMP/forgehand-pg.log" 2>&1 &
PG_FH_PID=$!
wait_healthy forgehand-pg "$PG_FH_PORT" "$PG_FH_PID" "$TMP/forgehand-pg.log"

log "@octokit/webhooks $OCTOKIT_VERSION createNodeMiddleware on 127.0.0.1:$OCTO_PORT"
(cd bench/octokit && BENCH_SECRET="$SECRET" BENCH_PORT="$OCTO_PORT" exec node server.mjs) > "$TMP/octokit.log" 2>&1 &
OCTO_PID=$!
wait_healthy octokit "$OCTO_PORT" "$OCTO_PID" "$TMP/octokit.log"

# ------------------------------------------------------------------ rounds
for ((round = 1; round <= ROUNDS; round++)); do
  log "round $round of $ROUNDS: forgehand (warm-up ${WARMUP}s, then ${DURATION}s)"
  run_wrk "forgehand-warmup-$round" "$FH_PORT" "$WARMUP" 0
  run_wrk "forgehand-$round" "$FH_PORT" "$DURATION" 1
  log "round $round of $ROUNDS: forgehand on postgresql (warm-up ${WARMUP}s, then ${DURATION}s)"
  run_wrk "forgehand-pg-warmup-$round" "$PG_FH_PORT" "$WARMUP" 0
  run_wrk "forgehand-pg-$round" "$PG_FH_PORT" "$DURATION" 1
  log "round $round of $ROUNDS: octokit (warm-up ${WARMUP}s, then ${DURATION}s)"
  run_wrk "octokit-warmup-$round" "$OCTO_PORT" "$WARMUP" 0
  run_wrk "octokit-$round" "$OCTO_PORT" "$DURATION" 1
done
stop_pid "$OCTO_PID" TERM 10 || true
OCTO_PID=

echo "stopping forgehand (SIG$STOP_SIGNAL)"
FH_RC=0
stop_pid "$FH_PID" "$STOP_SIGNAL" 30 || FH_RC=$?
FH_PID=
echo "forgehand exited with status $FH_RC"
PG_FH_RC=0
stop_pid "$PG_FH_PID" "$STOP_SIGNAL" 30 || PG_FH_RC=$?
PG_FH_PID=
echo "forgehand on postgresql exited with status $PG_FH_RC"
psql_q() { "$PG_BIN/psql" -h "$TMP/pg" -U postgres -d bench -Atc "$1"; }
PG_ACCEPTED_ROWS=$(psql_q "select count(*) from deliveries where outcome='accepted'") \
  || die "could not count deliveries in postgresql"
PG_OUTCOMES=$(psql_q "select outcome || '=' || count(*) from deliveries group by outcome order by outcome" | paste -sd' ' -)
PG_UNANSWERED=$(cat "$TMP"/forgehand-pg-*.unanswered | sed "s/.*/'&'/" | paste -sd, -)
PG_LATE_ROWS=0
if [[ -n $PG_UNANSWERED ]]; then
  PG_LATE_ROWS=$(psql_q "select count(*) from deliveries where outcome='accepted' and delivery_id in ($PG_UNANSWERED)")
fi
echo "postgresql deliveries by outcome: ${PG_OUTCOMES:-none}"
[[ -s $TMP/forgehand.log ]] && { echo "--- forgehand log (last lines)"; tail -n 10 "$TMP/forgehand.log"; }

ACCEPTED_ROWS=$(sqlite3 "$DB" "select count(*) from deliveries where outcome='accepted'") \
  || die "could not count deliveries in $DB"
OUTCOMES=$(sqlite3 "$DB" "select outcome || '=' || count(*) from deliveries group by outcome order by outcome" | paste -sd' ' -)
JOBS=$(sqlite3 "$DB" "select count(*) from jobs" 2>/dev/null || echo "?")
# Deliveries sent but never answered to wrk (cut off by its stop; listed
# when forgehand echoes delivery ids) may still have been accepted: count them.
UNANSWERED=$(cat "$TMP"/forgehand-[0-9w]*.unanswered | sed "s/.*/'&'/" | paste -sd, -)
LATE_ROWS=0
if [[ -n $UNANSWERED ]]; then
  LATE_ROWS=$(sqlite3 "$DB" "select count(*) from deliveries where outcome='accepted' and delivery_id in ($UNANSWERED)") \
    || die "could not look up the unanswered delivery ids in $DB"
fi
echo "deliveries by outcome: ${OUTCOMES:-none}; jobs: $JOBS"

# ------------------------------------------------------------------ report
STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
export TMP STAMP RESULTS ACCEPTED_ROWS LATE_ROWS OUTCOMES JOBS WRK_CMD ROUNDS DURATION WARMUP STOP_SIGNAL OCTOKIT_VERSION FH_RC
export PG_ACCEPTED_ROWS PG_LATE_ROWS PG_OUTCOMES PG_FH_RC PG_VERSION
export NODE_VERSION=$(node --version) WRK_VERSION=$(wrk -v 2>&1 | head -n1 | awk '{print $2}')
export GIT_REV=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo none)
set +e
python3 - <<'PY'
import json, os, platform, statistics, sys

tmp = os.environ["TMP"]
rounds_n = int(os.environ["ROUNDS"])

def result(name):
    with open(os.path.join(tmp, name + ".wrk.txt")) as f:
        for line in f:
            if line.startswith("BENCH_RESULT "):
                return json.loads(line[len("BENCH_RESULT "):])
    sys.exit(f"no BENCH_RESULT in {name}")

ms = lambda us: us / 1000.0
rounds = []
pg_rounds = []
fh_runs = []  # every forgehand run, warm-ups included: all of them recorded
pg_runs = []
for r in range(1, rounds_n + 1):
    fh, pg, oc = result(f"forgehand-{r}"), result(f"forgehand-pg-{r}"), result(f"octokit-{r}")
    fh_runs += [result(f"forgehand-warmup-{r}"), fh]
    pg_runs += [result(f"forgehand-pg-warmup-{r}"), pg]
    result(f"octokit-warmup-{r}")
    rounds.append((fh, oc, fh["rps"] / oc["rps"] if oc["rps"] else float("inf")))
    pg_rounds.append((pg, oc, pg["rps"] / oc["rps"] if oc["rps"] else float("inf")))


def recording(runs, rows, late):
    """Whether every accepted answer wrk read has its row, and the only
    other accepted rows are deliveries whose answer wrk never read."""
    n202 = sum(r["status"].get("202", 0) for r in runs)
    # forgehand's answers also say "outcome": 202 is also its answer to a
    # delivery it ignores. A 202 that says something else than "accepted"
    # is not counted; one that says nothing is.
    said_accepted = sum(r.get("outcomes", {}).get("accepted", 0) for r in runs)
    said_any = sum(sum(r.get("outcomes", {}).values()) for r in runs)
    said_other = said_any - said_accepted
    accepted_answers = n202 - said_other
    ok = accepted_answers > 0 and rows == accepted_answers + late
    return n202, said_accepted, said_any, said_other, ok


rows = int(os.environ["ACCEPTED_ROWS"])
late = int(os.environ["LATE_ROWS"])
n202, said_accepted, said_any, said_other, recorded_ok = recording(fh_runs, rows, late)
pg_rows = int(os.environ["PG_ACCEPTED_ROWS"])
pg_late = int(os.environ["PG_LATE_ROWS"])
pg_n202, pg_said_accepted, _, _, pg_recorded_ok = recording(pg_runs, pg_rows, pg_late)
in_flight = sum(r["in_flight_at_stop"] for r in fh_runs)
ids_echoed = all(r.get("ids_echoed") for r in fh_runs)

def side(r):
    return {
        "requests_per_s": r["rps"],
        "p50_ms": ms(r["p50_us"]),
        "p90_ms": ms(r["p90_us"]),
        "p99_ms": ms(r["p99_us"]),
        "max_ms": ms(r["max_us"]),
        "requests": r["requests"],
        "non_2xx": r["non_2xx"],
        "status": r["status"],
        "outcomes": r.get("outcomes", {}),
        "socket_errors": r["errors"],
        "unanswered_at_stop": r["in_flight_at_stop"],
    }

ratios = [ratio for _, _, ratio in rounds]
fh_p99s = [ms(fh["p99_us"]) for fh, _, _ in rounds]
pg_ratios = [ratio for _, _, ratio in pg_rounds]
pg_p99s = [ms(pg["p99_us"]) for pg, _, _ in pg_rounds]
median_ratio = statistics.median(ratios)
median_p99 = statistics.median(fh_p99s)
# All rounds last as long on both sides: the pooled ratio is the requests'.
pooled_ratio = (sum(fh["requests"] for fh, _, _ in rounds)
                / max(1, sum(oc["requests"] for _, oc, _ in rounds)))
both = sum(1 for ratio, p99 in zip(ratios, fh_p99s) if ratio >= 2.0 and p99 < 10.0)

report = {
    "benchmark": "intake",
    "date": os.environ["STAMP"],
    "git_rev": os.environ["GIT_REV"],
    "wrk_command": os.environ["WRK_CMD"],
    "rounds": rounds_n,
    "duration_s": int(os.environ["DURATION"]),
    "warmup_s": int(os.environ["WARMUP"]),
    "payload_bytes": rounds[0][0]["payload_bytes"],
    "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
    "versions": {"wrk": os.environ["WRK_VERSION"], "node": os.environ["NODE_VERSION"],
                 "octokit_webhooks": os.environ["OCTOKIT_VERSION"],
                 "postgresql": os.environ["PG_VERSION"]},
    "deliveries": "distinct" if os.environ.get("BENCH_SAME_BODY") != "1" else "one body",
    "by_round": [
        {"round": i + 1, "forgehand": side(fh), "forgehand_postgresql": side(pg),
         "octokit": side(oc),
         "ratio_rps_forgehand_over_octokit": round(ratio, 3),
         "ratio_rps_forgehand_postgresql_over_octokit": round(pg_ratio, 3)}
        for i, ((fh, oc, ratio), (pg, _, pg_ratio)) in enumerate(zip(rounds, pg_rounds))
    ],
    "median_ratio_rps_forgehand_postgresql_over_octokit": round(statistics.median(pg_ratios), 3),
    "forgehand_postgresql_p99_ms_median": statistics.median(pg_p99s),
    "postgresql_recording": {
        "responses_202_incl_warmup": pg_n202,
        "accepted_rows": pg_rows,
        "accepted_rows_for_answers_wrk_never_read": pg_late,
        "deliveries_by_outcome": os.environ["PG_OUTCOMES"],
        "forgehand_exit_status": int(os.environ["PG_FH_RC"]),
        "every_accepted_delivery_recorded": pg_recorded_ok,
    },
    "median_ratio_rps_forgehand_over_octokit": round(median_ratio, 3),
    "pooled_ratio_rps_forgehand_over_octokit": round(pooled_ratio, 3),
    "forgehand_p99_ms_median": median_p99,
    "forgehand_p99_ms_worst": max(fh_p99s),
    "recording": {
        "responses_202_incl_warmup": n202,
        "responses_saying_accepted_incl_warmup": said_accepted if said_any else None,
        "accepted_rows_for_answers_wrk_never_read": late if ids_echoed else None,
        "accepted_rows": rows,
        "deliveries_by_outcome": os.environ["OUTCOMES"],
        "jobs": os.environ["JOBS"],
        "unanswered_at_stop": in_flight,
        "stop_signal": os.environ["STOP_SIGNAL"],
        "forgehand_exit_status": int(os.environ["FH_RC"]),
        "every_accepted_delivery_recorded": recorded_ok,
    },
    "targets": {
        "median_round_rps_at_least_2x_octokit": median_ratio >= 2.0,
        "median_round_forgehand_p99_under_10ms": median_p99 < 10.0,
        "rounds_meeting_both": both,
    },
}
path = os.path.join(os.environ["RESULTS"], f"intake-{os.environ['STAMP']}.json")
with open(path, "w") as f:
    json.dump(report, f, indent=2)
    f.write("\n")

yes = lambda b: "yes" if b else "NO"
print()
print("== intake benchmark:", report["payload_bytes"], "byte signed issues deliveries")
print("   " + report["wrk_command"])
print(f"   {rounds_n} round(s), each forgehand then octokit; "
      f"{report['warmup_s']} s warm-up before each run, not counted")
print()
octo = "octokit " + report["versions"]["octokit_webhooks"]
print(f"{'round':<7}{'sqlite req/s':>13}{'p99 ms':>8}{'postgresql req/s':>18}{'p99 ms':>8}"
      f"{octo + ' req/s':>26}{'p99 ms':>8}{'ratios':>16}")
for i, ((fh, oc, ratio), (pg, _, pg_ratio)) in enumerate(zip(rounds, pg_rounds)):
    print(f"{i + 1:<7}{fh['rps']:>13.0f}{ms(fh['p99_us']):>8.2f}{pg['rps']:>18.0f}{ms(pg['p99_us']):>8.2f}"
          f"{oc['rps']:>26.0f}{ms(oc['p99_us']):>8.2f}{ratio:>8.2f}x{pg_ratio:>7.2f}x")
non2xx = sum(fh["non_2xx"] for fh, _, _ in rounds), sum(oc["non_2xx"] for _, oc, _ in rounds)
print(f"non-2xx responses: forgehand {non2xx[0]}, octokit {non2xx[1]}")
print()
print(f"ratio forgehand/octokit requests/s, median round: {median_ratio:.2f}x "
      f"(pooled {pooled_ratio:.2f}x)   target >= 2x: {yes(median_ratio >= 2.0)}")
print(f"forgehand p99, median round: {median_p99:.2f} ms (worst {max(fh_p99s):.2f})"
      f"   target < 10 ms: {yes(median_p99 < 10.0)}")
print(f"rounds meeting both targets: {both} of {rounds_n}")
print(f"postgresql/octokit requests/s, median round: {statistics.median(pg_ratios):.2f}x; "
      f"p99 median {statistics.median(pg_p99s):.2f} ms; "
      f"postgresql/sqlite: {statistics.median(p['rps'] / f['rps'] for (f, _, _), (p, _, _) in zip(rounds, pg_rounds)):.2f}x")
print(f"postgresql: {pg_rows} accepted rows for {pg_n202} responses 202"
      + (f" + {pg_late} accepted as wrk stopped" if pg_late else "")
      + f": {yes(pg_recorded_ok)}")
print(f"accepted deliveries recorded: {rows} rows for {n202} responses 202"
      + (f" ({said_accepted} saying accepted)" if said_any else "")
      + (f" + {late} accepted as wrk stopped, answer unread" if late else "")
      + f", warm-ups included, SIG{os.environ['STOP_SIGNAL']}: {yes(recorded_ok)}")
if said_other:
    print(f"note: {said_other} answers 202 said something else than accepted (ignored deliveries?)")
if in_flight and not ids_echoed:
    print(f"note: wrk had {in_flight} forgehand request(s) unanswered when it stopped "
          "and the answers do not echo delivery ids"
          + ("" if recorded_ok else "; if the server recorded them, raise BENCH_DRAIN_MS"))
if n202 == 0:
    print("error: forgehand answered no request with 202: nothing was measured")
print(f"\nwritten: {path}")
sys.exit(0 if recorded_ok and pg_recorded_ok else 3)
PY
status=$?
set -e
if [[ $status -ne 0 ]]; then
  die "the accepted deliveries in the database do not match the 202 responses (see above)"
fi
OK=1
