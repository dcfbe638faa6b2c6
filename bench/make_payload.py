#!/usr/bin/env python3
"""Write the intake benchmark's payload and its signature.

    python3 bench/make_payload.py SECRET [OUT_DIR]

Starts from GitHub's real `issues` / `labeled` example
(<repo>/../shared/testdata/github/webhook-examples/issues/labeled.1.json),
sets the label to `forgehand`, and sizes the body to TARGET_BYTES (9 KiB,
compact JSON as GitHub sends it). Writes OUT_DIR/payload.json and
OUT_DIR/payload.sig (bare hex HMAC-SHA256 of payload.json's bytes under
SECRET; the wrk script adds the `sha256=` prefix). OUT_DIR defaults to
bench/results.

The example is ~11.8 KB as it comes, mostly user objects repeated for the
assignee, the assignees and the milestone's creator. An issue with no
assignee and no milestone is the common case, so those are cleared (as
GitHub sends them then: null, [], null) and the issue body, a bug report
written the way people write them, makes up the rest of the size.
Python 3 standard library only.
"""

import hashlib
import hmac
import json
import pathlib
import sys
import time

TARGET_BYTES = 9 * 1024  # 9216: inside 8.5..9.5 KB whether a KB is 1000 or 1024 bytes
LABEL = "forgehand"

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
EXAMPLE = (
    REPO.parent
    / "shared"
    / "testdata"
    / "github"
    / "webhook-examples"
    / "issues"
    / "labeled.1.json"
)

BODY_PARAGRAPHS = [
    "It looks like you accidently spelled 'commit' with two 't's.",
    "### What happened\n\n"
    "Running `git comit -m \"fix typo\"` in a fresh clone prints the usual "
    "`git: 'comit' is not a git command` hint, but the contributing guide "
    "tells new contributors to run exactly that. Three people in the last "
    "week opened discussions asking why the first step of the guide fails.",
    "### Steps to reproduce\n\n"
    "1. Clone the repository: `git clone https://github.com/Codertocat/Hello-World.git`\n"
    "2. Open `CONTRIBUTING.md` and follow the section *Making your first change*\n"
    "3. Stage a change with `git add -p`\n"
    "4. Run the commit command exactly as written in the guide\n"
    "5. See the error below",
    "### Expected behaviour\n\n"
    "The command in the guide should work when pasted as it is. Ideally the "
    "guide would also link to the section about signing commits, because the "
    "branch protection rule on `main` rejects unsigned commits and that is the "
    "second thing new contributors trip over.",
    "### Logs\n\n"
    "```\n"
    "$ git comit -m \"fix typo\"\n"
    "git: 'comit' is not a git command. See 'git --help'.\n"
    "\n"
    "The most similar commands are\n"
    "\tcommit\n"
    "\tconfig\n"
    "$ git --version\n"
    "git version 2.43.0\n"
    "```",
    "### Environment\n\n"
    "- OS: Ubuntu 24.04 LTS (also seen on macOS 14.5 by @octocat)\n"
    "- Shell: bash 5.2.21, zsh 5.9\n"
    "- Git: 2.43.0 and 2.45.1\n"
    "- Editor: VS Code 1.90 with the GitLens extension",
    "### Additional context\n\n"
    "The same typo appears in `docs/getting-started.md` (line 42) and in the "
    "pull request template, so a search-and-replace across `docs/` and "
    "`.github/` should catch all of them. I am happy to open a pull request "
    "for this if someone can confirm that the guide is still the canonical "
    "place for onboarding instructions and not the wiki.",
    "While looking at this I also noticed that the guide still refers to the "
    "default branch as `master` in two places, and that the link to the code "
    "of conduct points at a file that was moved last year. Those could be "
    "fixed in the same change or tracked separately, whichever the "
    "maintainers prefer.",
    "- [ ] Fix the typo in `CONTRIBUTING.md`\n"
    "- [ ] Fix the typo in `docs/getting-started.md`\n"
    "- [ ] Fix the pull request template\n"
    "- [ ] Update the branch name and the code of conduct link\n"
    "- [ ] Add a link to the commit signing section",
    "> **Note**\n"
    "> This was found while onboarding the new team; see the notes from the "
    "onboarding session for the full list of rough edges we hit.",
]


def compact(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def build(example: dict) -> dict:
    payload = json.loads(json.dumps(example))  # deep copy
    label = payload["label"]
    label["name"] = LABEL
    label["url"] = label["url"].rsplit("/", 1)[0] + "/" + LABEL
    label["description"] = "Ask Forgehand to look at this issue"
    label["default"] = False
    issue = payload["issue"]
    issue["labels"] = [dict(label)]  # a labeled issue carries the label it just got
    issue["assignee"] = None
    issue["assignees"] = []
    issue["milestone"] = None
    # Labeled now: a body whose timestamps are older than
    # database.digest_retention_days is refused as a replay. (Same length
    # as the example's, so the size below is unchanged.)
    issue["updated_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    full_body = "\n\n".join(BODY_PARAGRAPHS)
    issue["body"] = ""
    if len(compact(payload)) > TARGET_BYTES:
        sys.exit("the example without a body is already larger than the target")
    # Longest prefix of the body text whose payload fits in TARGET_BYTES
    # (the JSON encoding escapes newlines, so measure the encoded size).
    lo, hi = 0, len(full_body)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        issue["body"] = full_body[:mid]
        if len(compact(payload)) <= TARGET_BYTES:
            lo = mid
        else:
            hi = mid - 1
    if lo == len(full_body):
        sys.exit("BODY_PARAGRAPHS is too short to reach the target size")
    # Cut at a word boundary, then make the size exact with trailing dots
    # (reads as an ellipsis, like a truncated paste).
    body = full_body[:lo]
    cut = body.rfind(" ")
    body = body[:cut].rstrip() if cut > 0 else body
    issue["body"] = body
    while len(compact(payload)) < TARGET_BYTES:
        issue["body"] += "."
    return payload


def main() -> None:
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    secret = sys.argv[1].encode("utf-8")
    out_dir = pathlib.Path(sys.argv[2]) if len(sys.argv) == 3 else HERE / "results"
    if not EXAMPLE.is_file():
        sys.exit(f"example payload not found: {EXAMPLE}")
    payload = build(json.loads(EXAMPLE.read_text(encoding="utf-8")))
    data = compact(payload)
    assert len(data) == TARGET_BYTES, len(data)
    json.loads(data)  # still valid JSON
    sig = hmac.new(secret, data, hashlib.sha256).hexdigest()

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "payload.json").write_bytes(data)
    (out_dir / "payload.sig").write_text(sig, encoding="ascii")  # no newline
    print(
        f"wrote {out_dir / 'payload.json'} ({len(data)} bytes, "
        f"issues/{payload['action']}, label {payload['label']['name']!r}) "
        f"and payload.sig"
    )


if __name__ == "__main__":
    main()
