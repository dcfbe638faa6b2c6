#!/usr/bin/env python3
"""Write the intake benchmark's payload and its signature.

    python3 bench/make_payload.py SECRET [OUT_DIR]

Starts from GitHub's real `issues` / `labeled` example
(<repo>/../shared/testdata/github/webhook-examples/issues/labeled.1.json),
sets the label to `forgehand`, and sizes the body to TARGET_BYTES (9 KiB,
compact JSON as GitHub sends it). Writes OUT_DIR/payload.json and
OUT_DIR/payload.sig (bare hex HMAC-SHA256 of payload.json's bytes under
SECRET; the wrk script adds the `sha256=` prefix), and for distinct
bodies (a nonce field last) OUT_DIR/payload.prefix and OUT_DIR/payload.hmac
(the HMAC's inner and outer SHA-256 states after the prefix). OUT_DIR defaults to
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


# SHA-256's compression, to hand the wrk script the HMAC's state after
# the part of every body that is the same (hashlib does not expose it).
_K = [
    0x428A2F98, 0x71374491, 0xB5C0FBCF, 0xE9B5DBA5, 0x3956C25B, 0x59F111F1, 0x923F82A4, 0xAB1C5ED5,
    0xD807AA98, 0x12835B01, 0x243185BE, 0x550C7DC3, 0x72BE5D74, 0x80DEB1FE, 0x9BDC06A7, 0xC19BF174,
    0xE49B69C1, 0xEFBE4786, 0x0FC19DC6, 0x240CA1CC, 0x2DE92C6F, 0x4A7484AA, 0x5CB0A9DC, 0x76F988DA,
    0x983E5152, 0xA831C66D, 0xB00327C8, 0xBF597FC7, 0xC6E00BF3, 0xD5A79147, 0x06CA6351, 0x14292967,
    0x27B70A85, 0x2E1B2138, 0x4D2C6DFC, 0x53380D13, 0x650A7354, 0x766A0ABB, 0x81C2C92E, 0x92722C85,
    0xA2BFE8A1, 0xA81A664B, 0xC24B8B70, 0xC76C51A3, 0xD192E819, 0xD6990624, 0xF40E3585, 0x106AA070,
    0x19A4C116, 0x1E376C08, 0x2748774C, 0x34B0BCB5, 0x391C0CB3, 0x4ED8AA4A, 0x5B9CCA4F, 0x682E6FF3,
    0x748F82EE, 0x78A5636F, 0x84C87814, 0x8CC70208, 0x90BEFFFA, 0xA4506CEB, 0xBEF9A3F7, 0xC67178F2,
]
_H0 = [0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19]


def _compress(h, block):
    ror = lambda x, n: ((x >> n) | (x << (32 - n))) & 0xFFFFFFFF
    w = [int.from_bytes(block[i:i + 4], "big") for i in range(0, 64, 4)]
    for i in range(16, 64):
        s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3)
        s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10)
        w.append((w[i - 16] + s0 + w[i - 7] + s1) & 0xFFFFFFFF)
    a, b, c, d, e, f, g, hh = h
    for i in range(64):
        t1 = (hh + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + _K[i] + w[i]) & 0xFFFFFFFF
        t2 = ((ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) & 0xFFFFFFFF
        a, b, c, d, e, f, g, hh = (t1 + t2) & 0xFFFFFFFF, a, b, c, (d + t1) & 0xFFFFFFFF, e, f, g
    return [(x + y) & 0xFFFFFFFF for x, y in zip(h, [a, b, c, d, e, f, g, hh])]


def _state(data):
    assert len(data) % 64 == 0
    h = list(_H0)
    for i in range(0, len(data), 64):
        h = _compress(h, data[i:i + 64])
    return h


def _finish(h, tail, total):
    padded = tail + b"\x80" + b"\0" * ((55 - len(tail)) % 64) + (total * 8).to_bytes(8, "big")
    for i in range(0, len(padded), 64):
        h = _compress(h, padded[i:i + 64])
    return b"".join(x.to_bytes(4, "big") for x in h)


NONCE_HEX = 32


def distinct(secret: bytes, data: bytes, out_dir: pathlib.Path) -> None:
    """Every request its own body (the replay protection records one body
    sent again under a new delivery id as a duplicate, so one body would
    measure the duplicate path): the body with a last field, a nonce of
    32 hex digits, padded with spaces so that what comes before the nonce
    fills whole SHA-256 blocks. The wrk script then signs each body from
    the HMAC's state after that prefix: two compressions a request."""
    key = secret if len(secret) <= 64 else hashlib.sha256(secret).digest()
    key = key.ljust(64, b"\0")
    ipad = bytes(k ^ 0x36 for k in key)
    opad = bytes(k ^ 0x5C for k in key)
    head = data[:-1]  # without the closing brace
    field = b',"forgehand_bench_nonce":"'
    pad = (-(len(head) + len(field))) % 64
    prefix = head + b" " * pad + field
    assert len(prefix) % 64 == 0
    inner, outer = _state(ipad + prefix), _state(opad)
    # Checked against hashlib's HMAC before the state is handed on.
    nonce = b"0123456789abcdef" * 2
    body = prefix + nonce + b'"}'
    json.loads(body)
    tail = nonce + b'"}'
    digest = _finish(inner, tail, 64 + len(prefix) + len(tail))
    mine = _finish(outer, digest, 64 + 32).hex()
    assert mine == hmac.new(secret, body, hashlib.sha256).hexdigest(), "midstate"
    (out_dir / "payload.prefix").write_bytes(prefix)
    (out_dir / "payload.hmac").write_text(
        " ".join(f"{x:08x}" for x in inner + outer) + "\n", encoding="ascii"
    )


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
    distinct(secret, data, out_dir)
    print(
        f"wrote {out_dir / 'payload.json'} ({len(data)} bytes, "
        f"issues/{payload['action']}, label {payload['label']['name']!r}) "
        f"and payload.sig"
    )


if __name__ == "__main__":
    main()
