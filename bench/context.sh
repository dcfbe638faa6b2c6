#!/usr/bin/env bash
# What a long run sends the model: `forgehand run` against the scripted
# model (tests/examples/scripted_model) over 60 turns of large command
# output, then a fix and a finish. Read from the run's transcript (every
# request body as sent): the input of every request, and the part of it
# that does not extend the request before it — what a provider's prefix
# cache cannot serve and bills at the full input price. Tokens are bytes
# of the request's messages / 4.
#
#   bash bench/context.sh [FORGEHAND_BIN ...]
#
# Each binary given runs the same script, side by side (e.g. one built
# before a change and one after). Without arguments: this checkout's
# debug build. Environment: TURNS (60), OUTPUT_BYTES (16000 a turn),
# CONTEXT_TOKENS (agent.context_tokens, 100000), FORGEHAND_TEST_ROOTFS
# (the guest image, default /var/cache/forgehand/rootfs).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
TURNS=${TURNS:-60}
OUTPUT_BYTES=${OUTPUT_BYTES:-16000}
CONTEXT_TOKENS=${CONTEXT_TOKENS:-100000}
ROOTFS=${FORGEHAND_TEST_ROOTFS:-/var/cache/forgehand/rootfs}
TARGET=${CARGO_TARGET_DIR:-$REPO/target}

(cd "$REPO" && cargo build -q -p forgehand-tests --example scripted_model)
bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
  (cd "$REPO" && cargo build -q -p forgehand-bot --bin forgehand)
  bins=("$TARGET/debug/forgehand")
fi

tmp=$(mktemp -d)
trap 'kill "${model_pid:-}" 2>/dev/null || true; rm -rf "$tmp"' EXIT

python3 - "$TURNS" "$OUTPUT_BYTES" > "$tmp/script.json" <<'PY'
import json, sys
turns, size = int(sys.argv[1]), int(sys.argv[2])
steps = [{"call": "bash", "args": {"command": f"head -c {size} /dev/zero | tr '\\0' x; echo; echo turn {n}"}} for n in range(turns)]
steps.append({"call": "bash", "args": {"command": "sed -i 's/- \\$2/+ $2/' calc.sh && sh test.sh"}})
steps.append({"finish": "add now adds; sh test.sh passes.", "title": "Fix add in calc.sh"})
print(json.dumps(steps))
PY

echo "binary,requests,input_tokens,uncached_input_tokens,cached_share,clearings,seconds"
for bin in "${bins[@]}"; do
  work="$tmp/$(basename "$(dirname "$(dirname "$bin")")")-$RANDOM"
  mkdir -p "$work/repo"
  git -C "$work/repo" init -q -b main
  printf 'add() {\n  echo $(($1 - $2))\n}\n' > "$work/repo/calc.sh"
  printf '. ./calc.sh\n[ "$(add 2 3)" = 5 ] && echo "ok: add"\n' > "$work/repo/test.sh"
  git -C "$work/repo" add -A
  git -C "$work/repo" -c user.name=bench -c user.email=bench@example.invalid commit -qm base
  # The budgets out of the way: the run is the measure.
  printf '[agent]\nmax_turns = %d\nmax_tool_calls = %d\ncontext_tokens = %d\nmax_input_tokens = 1000000000\n' \
    $((TURNS + 10)) $((TURNS + 10)) "$CONTEXT_TOKENS" > "$work/forgehand.toml"
  "$TARGET/debug/examples/scripted_model" "$tmp/script.json" > "$work/model.url" &
  model_pid=$!
  for _ in $(seq 50); do [ -s "$work/model.url" ] && break; sleep 0.1; done
  start=$(date +%s.%N)
  env -i PATH="$PATH" HOME="$work" \
    FORGEHAND_SANDBOX__ROOTFS="$ROOTFS" \
    FORGEHAND_MODEL__PROVIDER=openai \
    FORGEHAND_MODEL__BASE_URL="$(cat "$work/model.url")" \
    FORGEHAND_MODEL__NAME=scripted-model \
    FORGEHAND_GIT__WORK_DIR="$work/jobs" \
    FORGEHAND_AGENT__TRANSCRIPT_DIR="$work/transcripts" \
    "$bin" run --json --backend namespace --config "$work/forgehand.toml" \
      --repo "$work/repo" --task "Fix add in calc.sh" > "$work/report.json" 2> "$work/stderr" || true
  end=$(date +%s.%N)
  kill "$model_pid" 2>/dev/null || true
  wait "$model_pid" 2>/dev/null || true
  python3 "$HERE/requests.py" "$work/report.json" > "$work/requests.json"
  python3 - "$bin" "$work/requests.json" "$(echo "$end - $start" | bc)" <<'PY'
import json, sys
bin, r, secs = sys.argv[1], json.load(open(sys.argv[2])), float(sys.argv[3])
cached = 1 - r["uncached_input_tokens"] / r["input_tokens"]
print(f"{bin},{r['requests']},{r['input_tokens']},{r['uncached_input_tokens']},{cached:.3f},{r['clearings']},{secs:.1f}")
if r["status"] not in ("succeeded", "untested"):
    print(f"  (the run ended {r['status']}: {r['reason']} {r['message']})", file=sys.stderr)
PY
done
