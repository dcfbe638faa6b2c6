#!/usr/bin/env bash
# Tokens per task on the eval set of the tests (tests/src/eval_dataset.rs:
# five real projects from the package registry, a bug planted in each):
# `forgehand run` on each instance's base against the scripted model
# (tests/examples/scripted_model), which looks for the code the problem
# names, reads the file, makes the fix and finishes. Read from the run's
# transcript (every request body as sent), as bench/context.sh does
# (no environment: detection is off, the counts are the agent's own):
# requests, input (the messages' bytes / 4) and the part of it that does
# not extend the request before it (what a prefix cache cannot serve).
#
#   bash bench/eval_tokens.sh [FORGEHAND_BIN ...]
#
# Each binary given runs every instance, in the order given (e.g. one
# built before a change and one after). Without arguments: this
# checkout's debug build. Environment: FORGEHAND_TEST_ROOTFS (the guest
# image, default /var/cache/forgehand/rootfs).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
ROOTFS=${FORGEHAND_TEST_ROOTFS:-/var/cache/forgehand/rootfs}
TARGET=${CARGO_TARGET_DIR:-$REPO/target}

(cd "$REPO" && cargo build -q -p forgehand-tests --example scripted_model --example eval_dataset)
bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
  (cd "$REPO" && cargo build -q -p forgehand-bot --bin forgehand)
  bins=("$TARGET/debug/forgehand")
fi

tmp=$(mktemp -d)
trap 'kill "${model_pid:-}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
"$TARGET/debug/examples/eval_dataset" "$tmp/set" > /dev/null

echo "binary,instance,status,requests,input_tokens,uncached_input_tokens,input_tokens_by_request"
for bin in "${bins[@]}"; do
  python3 - "$tmp/set/dataset.jsonl" > "$tmp/rows" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    row = json.loads(line)
    print(row["instance_id"], row["repo"], sep="\t")
PY
  while IFS=$'\t' read -r id source; do
    work="$tmp/run-$RANDOM"
    mkdir -p "$work"
    git clone -q "$source" "$work/repo"
    python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["instance_id"]==sys.argv[2]][0]["problem_statement"])' \
      "$tmp/set/dataset.jsonl" "$id" > "$work/task"
    "$TARGET/debug/examples/scripted_model" "$tmp/set/scripts/$id.json" > "$work/model.url" &
    model_pid=$!
    for _ in $(seq 50); do [ -s "$work/model.url" ] && break; sleep 0.1; done
    env -i PATH="$PATH" HOME="$work" \
      FORGEHAND_SANDBOX__ROOTFS="$ROOTFS" \
      FORGEHAND_MODEL__PROVIDER=openai \
      FORGEHAND_MODEL__BASE_URL="$(cat "$work/model.url")" \
      FORGEHAND_MODEL__NAME=scripted-model \
      FORGEHAND_GIT__WORK_DIR="$work/jobs" \
      FORGEHAND_AGENT__TRANSCRIPT_DIR="$work/transcripts" \
      FORGEHAND_SERVER__DATA_DIR="$work/data" \
      FORGEHAND_ENVIRONMENT__DETECT=false \
      "$bin" run --json --backend namespace \
        --repo "$work/repo" --task "$(cat "$work/task")" > "$work/report.json" 2> "$work/stderr" || true
    kill "$model_pid" 2>/dev/null || true
    wait "$model_pid" 2>/dev/null || true
    python3 "$HERE/requests.py" "$work/report.json" > "$work/requests.json"
    python3 - "$bin" "$id" "$work/requests.json" <<'PY'
import json, sys
bin, id, r = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3]))
each = "/".join(str(n) for n in r["by_request"])
print(f"{bin},{id},{r['status']},{r['requests']},{r['input_tokens']},{r['uncached_input_tokens']},{each}")
PY
  done < "$tmp/rows"
done
