#!/usr/bin/env bash
# Environment setup: real projects set up through Forgehand's egress
# (`forgehand env build`) beside the same setup command run directly on
# this host, side by side in one run, several rounds.
#
#   sudo bash bench/environment.sh          # ROUNDS=3
#   ROUNDS=5 sudo bash bench/environment.sh
#
# Projects, fetched at run time with the host's own package managers:
#   - npm:    minimist 1.2.8 (`npm pack`): tape, nyc, eslint … (532 packages);
#             no declaration, so Forgehand detects `npm install` (and the
#             Debian packages nodejs and npm)
#   - python: humanize 4.9.0's sdist (`pip download`), no declaration:
#             Forgehand detects its pyproject.toml and tox.ini (a venv in
#             $HOME, the dependencies, the tests extra and the build
#             backend; the project itself is installed by the test
#             command, not the setup)
# Each project is a git repository of its own (one commit) under WORK.
# No registry's host name is written anywhere: Forgehand's allow-list is
# what `forgehand env hosts` proposes from this host's pip, npm and apt.
#
# Host side: the same setup command, `sh -c`, in a fresh copy of the tree
# with a fresh HOME (cold npm and pip caches, as in the sandbox), the
# host's own CA settings, and without PIP_FIND_LINKS (a local wheel
# directory the sandbox does not have).
# Forgehand side: `forgehand env build --repo DIR` with a configuration
# written here (allow_hosts from `forgehand env hosts`, ca_bundle when the
# host's tools trust an extra CA bundle, data in WORK); the kept
# environment is removed after each round so every round builds anew.
# It prints its steps: `packages` (the Debian packages, downloaded
# through the egress: the host has its node and python already),
# `command` (the setup command: what the host side runs), `keep`.
#
# Prints a table (seconds; ratios to the host) and writes it, with every
# run's output, under bench/results/ (gitignored). Environment: ROUNDS
# (3), WORK (/var/tmp/forgehand-bench-environment), FORGEHAND_BIN (skip
# the cargo build), CONFIG_EXTRA (lines added to the [environment] table,
# e.g. "max_connections = 64").
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
. "$repo/scripts/lib.sh"
cd "$repo"

ROUNDS=${ROUNDS:-3}
[[ $ROUNDS =~ ^[0-9]+$ ]] && ((ROUNDS >= 1)) || { echo "ROUNDS must be a number >= 1" >&2; exit 2; }
WORK=${WORK:-/var/tmp/forgehand-bench-environment}
[ "$(id -u)" = 0 ] || { echo "run as root: sandboxes need it (sudo bash $0)" >&2; exit 2; }
for tool in npm python3 git; do
  command -v "$tool" >/dev/null || { echo "$tool is needed on the host (Debian: apt-get install nodejs npm python3-venv git)" >&2; exit 2; }
done
python3 -m venv --help >/dev/null 2>&1 || { echo "python3's venv module is needed (Debian: apt-get install python3-venv)" >&2; exit 2; }

sandbox_packages
sandbox_user
rootfs="$(guest_rootfs)"
if [ -n "${FORGEHAND_BIN:-}" ]; then
  bin="$FORGEHAND_BIN"
else
  ensure_rust
  echo "==> cargo build --release -p forgehand-bot --bin forgehand"
  cargo build --release -p forgehand-bot --bin forgehand
  bin="${CARGO_TARGET_DIR:-$repo/target}/release/forgehand"
fi

stamp="$(date -u +%Y%m%dT%H%M%SZ)"
out="$repo/bench/results/environment-$stamp"
mkdir -p "$out"
rm -rf "$WORK"
mkdir -p "$WORK/src"

# --- the projects -----------------------------------------------------
echo "==> fetching the projects"
commit() {
  git -C "$1" init -q
  git -C "$1" add -A
  git -C "$1" -c user.name=bench -c user.email=bench@localhost commit -qm "$2"
}
(cd "$WORK/src" && npm pack --silent minimist@1.2.8 >/dev/null && tar xzf minimist-1.2.8.tgz && mv package minimist)
commit "$WORK/src/minimist" "minimist 1.2.8 from npm"
(cd "$WORK/src" && env -u PIP_FIND_LINKS pip download -q --no-deps --no-binary :all: humanize==4.9.0 -d . \
  && tar xzf humanize-4.9.0.tar.gz && mv humanize-4.9.0 humanize)
commit "$WORK/src/humanize" "humanize 4.9.0 from its sdist"

# The setup command each side runs.
declare -A setup=(
  [npm]="npm install"
  # What Forgehand detects for humanize (environment/src/spec/detect.rs).
  [python]="python3 -m venv \"\$HOME/.venv\" && \"\$HOME/.venv/bin/pip\" install 'hatch-vcs' 'hatchling' 'freezegun' 'pytest' 'pytest-cov' 'editables'"
)
declare -A tree=([npm]=minimist [python]=humanize)

# --- Forgehand's configuration ----------------------------------------
# An extra CA bundle when the host's tools trust one (a TLS-inspecting
# network): the sandbox's tools must trust it too.
ca=""
for candidate in "${NODE_EXTRA_CA_CERTS:-}" "$(npm config get cafile 2>/dev/null || true)" \
  "${PIP_CERT:-}" "${REQUESTS_CA_BUNDLE:-}" "${SSL_CERT_FILE:-}"; do
  if [ -n "$candidate" ] && [ "$candidate" != null ] && [ -f "$candidate" ]; then
    ca="$candidate"
    break
  fi
done
config="$WORK/forgehand.toml"
{
  "$bin" env hosts 2>/dev/null
  echo
  if [ -n "$ca" ]; then echo "ca_bundle = \"$ca\""; fi
  if [ -n "${CONFIG_EXTRA:-}" ]; then echo "$CONFIG_EXTRA"; fi
  echo
  echo "[sandbox]"
  echo "rootfs = \"$rootfs\""
  echo
  echo "[server]"
  echo "data_dir = \"$WORK/data\""
} >"$config"
cp "$config" "$out/forgehand.toml"
echo "==> configuration ($config):"
sed 's/^/    /' "$config"

# --- the runs ----------------------------------------------------------
now() { date +%s.%N; }
results="$out/runs.tsv"
printf 'round\tproject\tside\tseconds\tpackages\tcommand\tkeep\tstatus\n' >"$results"

host_run() { # project round
  local project=$1 round=$2 dir="$WORK/host-$1-$2" start end status=ok
  rm -rf "$dir"
  mkdir -p "$dir/home"
  git -C "$WORK/src/${tree[$project]}" archive --format=tar HEAD | (mkdir "$dir/tree" && tar -x -C "$dir/tree")
  start=$(now)
  (cd "$dir/tree" && env -u PIP_FIND_LINKS HOME="$dir/home" npm_config_update_notifier=false \
    sh -c "${setup[$project]}") >"$out/host-$project-$round.log" 2>&1 || status=failed
  end=$(now)
  printf '%s\t%s\thost\t%.1f\t\t\t\t%s\n' "$round" "$project" "$(echo "$end - $start" | bc)" "$status" >>"$results"
  rm -rf "$dir"
}

forgehand_run() { # project round
  local project=$1 round=$2 log="$out/forgehand-$project-$round.log" start end status=ok key
  start=$(now)
  "$bin" --config "$config" env build --repo "$WORK/src/${tree[$project]}" >"$log" 2>&1 || status=failed
  end=$(now)
  step() { awk -v s="$1" '$1 == s && $3 == "s" { print $2 }' "$log"; }
  printf '%s\t%s\tforgehand\t%.1f\t%s\t%s\t%s\t%s\n' "$round" "$project" "$(echo "$end - $start" | bc)" \
    "$(step packages)" "$(step command)" "$(step keep)" "$status" >>"$results"
  grep '^egress:' "$log" | sed "s/^/    $project: /" || true
  key="$(awk '$1 == "key:" { print $2 }' "$log")"
  if [ -n "$key" ]; then "$bin" --config "$config" env rm "$key" >/dev/null 2>&1 || true; fi
}

for round in $(seq 1 "$ROUNDS"); do
  # Alternate which side goes first: the machine's speed drifts.
  for project in npm python; do
    if ((round % 2)); then
      echo "==> round $round: $project on the host, then through Forgehand"
      host_run "$project" "$round"
      forgehand_run "$project" "$round"
    else
      echo "==> round $round: $project through Forgehand, then on the host"
      forgehand_run "$project" "$round"
      host_run "$project" "$round"
    fi
    tail -n 2 "$results" | sed 's/^/    /'
  done
done

# --- the table -----------------------------------------------------------
python3 - "$results" "$ROUNDS" <<'PY' | tee "$out/table.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
rounds = int(sys.argv[2])
def num(v):
    return float(v) if v else None
print(f"\n{'project':<8} {'round':>5} {'host s':>8} {'forgehand s':>12} {'packages':>9} {'command':>8} {'keep':>6} {'total/host':>11} {'command/host':>13}")
summary = {}
for project in ("npm", "python"):
    for r in range(1, rounds + 1):
        host = next(x for x in rows if x["project"] == project and x["round"] == str(r) and x["side"] == "host")
        fh = next(x for x in rows if x["project"] == project and x["round"] == str(r) and x["side"] == "forgehand")
        h, f, c = num(host["seconds"]), num(fh["seconds"]), num(fh["command"])
        bad = [s["side"] for s in (host, fh) if s["status"] != "ok"]
        note = f"  FAILED: {', '.join(bad)}" if bad else ""
        ratio = f"{f / h:.2f}" if h else "-"
        cratio = f"{c / h:.2f}" if h and c else "-"
        print(f"{project:<8} {r:>5} {h:>8.1f} {f:>12.1f} {fh['packages'] or '-':>9} {fh['command'] or '-':>8} {fh['keep'] or '-':>6} {ratio:>11} {cratio:>13}{note}")
        if not bad:
            summary.setdefault(project, []).append((h, f, c))
print()
for project, runs in summary.items():
    h = statistics.median(x[0] for x in runs)
    f = statistics.median(x[1] for x in runs)
    cs = [x[2] for x in runs if x[2]]
    c = statistics.median(cs) if cs else None
    line = f"{project}: median host {h:.1f} s, forgehand {f:.1f} s ({f / h:.2f}x)"
    if c:
        line += f", its setup command {c:.1f} s ({c / h:.2f}x)"
    print(line + f" over {len(runs)} round(s)")
failed = sum(1 for x in rows if x["status"] != "ok")
if failed:
    print(f"{failed} run(s) failed: see their logs")
    sys.exit(1)
PY
echo "==> results in $out"
