#!/usr/bin/env bash
# The gate's friction on real histories: each repository's last COMMITS
# (500) non-merge commits of HEAD, replayed through the gate's
# classification (the allow-list, `forgehand_gate::classify`) and through
# the catalogue it replaced, side by side in one run.
#
#   bash bench/gate_friction.sh GIT_DIR...     # git directories, bare ones too
#   STORIES=1 bash bench/gate_friction.sh ...  # also count the holds on the
#                                              # agents' own output in the stories
#
# For each repository it writes WORK/<name>.jsonl (bench/gate_friction/
# extract.py: the commits, their changed paths and modes) and
# WORK/<name>.json (gate/examples/friction.rs: the counts, the top
# reasons, and a sample of 50 held commits to label by hand), then prints
# one table against the thresholds issue 25 fixed before measuring: at
# least 98% of the commits that touch only source and tests pass, and at
# most 10 points more commits held than the catalogue held.
#
# The repositories are not fetched here (this machine reaches only the
# package registries): clone them bare beforehand, e.g.
# `git clone --bare <url> pytest.git`. bench/README.md names the three
# measured and the commits their HEADs were at.
#
# Environment: COMMITS (500), WORK (/var/tmp/forgehand-bench-friction),
# STORIES (unset: off).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
[ $# -ge 1 ] || { echo "usage: bash bench/gate_friction.sh GIT_DIR..." >&2; exit 2; }
commits="${COMMITS:-500}"
work="${WORK:-/var/tmp/forgehand-bench-friction}"
target="${CARGO_TARGET_DIR:-$repo/target}"
mkdir -p "$work"

echo "building the friction example (release)" >&2
cargo build --quiet --release -p forgehand-gate --example friction
friction="$target/release/examples/friction"

results=()
for git_dir in "$@"; do
  name="$(basename "$(cd "$git_dir" && pwd)")"
  name="${name%.git}"
  [ "$name" = repo ] && name="$(basename "$(dirname "$(cd "$git_dir" && pwd)")")"
  head="$(git --git-dir "$git_dir" rev-parse HEAD)"
  echo "$name: HEAD $head, the last $commits non-merge commits" >&2
  python3 bench/gate_friction/extract.py "$git_dir" "$work/$name.jsonl" -n "$commits"
  "$friction" "$work/$name.jsonl" "$git_dir" > "$work/$name.json"
  results+=("$name=$work/$name.json")
done

python3 - "${results[@]}" <<'PY'
import json, sys
print()
print("| repository | commits | held by the catalogue | held by the allow-list | points more | source-and-tests-only commits | of them pushed | thresholds |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for arg in sys.argv[1:]:
    name, path = arg.split("=", 1)
    d = json.load(open(path))
    n = d["commits"]
    more = d["points_more_held"]
    share = d["source_and_tests_pass_share"]
    ok = share >= 0.98 and more <= 10
    print("| %s | %d | %d (%.1f%%) | %d (%.1f%%) | %+.1f | %d | %d (%.1f%%) | %s |" % (
        name, n, d["held_by_the_catalogue"], 100 * d["catalogue_share"],
        d["held_by_the_allow_list"], 100 * d["held_share"], more,
        d["source_and_tests_only"], d["source_and_tests_only_passed"], 100 * share,
        "met" if ok else "MISSED"))
print()
for arg in sys.argv[1:]:
    name, path = arg.split("=", 1)
    d = json.load(open(path))
    top = ", ".join("%s %d" % (reason, count) for reason, count in d["top_reasons"][:8])
    print("- %s, top reasons (commits): %s" % (name, top))
PY

if [ -n "${STORIES:-}" ]; then
  logs="$work/story-logs"
  rm -rf "$logs"
  echo "running the stories, their logs kept in $logs" >&2
  cargo build --quiet -p forgehand-bot
  FORGEHAND_STORY_LOGS="$logs" cargo test --quiet -p forgehand-tests \
    --test stories --test story_commands --test story_environment --test story_faults \
    --test story_setup --test story_trust --test first_run --test story_held >/dev/null
  python3 - "$logs" <<'PY'
import os, re, sys
logs = sys.argv[1]
started = held = 0
held_in = []
for name in sorted(os.listdir(logs)):
    text = open(os.path.join(logs, name), errors="replace").read()
    started += len(re.findall(r"job started", text))
    for reason in re.findall(r"job failed error=(sensitive|destructive)", text):
        held += 1
        held_in.append("%s (%s)" % (name.rsplit("-", 2)[0], reason))
print()
print("stories: %d logs, %d jobs started; held by the gate: %d" % (
    len(os.listdir(logs)), started, held))
for story in held_in:
    print("- %s" % story)
PY
fi
