#!/usr/bin/env python3
"""Extract the last N non-merge commits of a git repository's default branch
(HEAD) as JSON Lines, one commit per line, newest first.

Usage: extract.py GIT_DIR OUTPUT.jsonl [-n 500] [--rev HEAD]

Each line:
  {"sha", "date" (committer date, ISO-8601 strict), "subject" (first line of
   the raw message), "changes": [{"status", "path", "old_path", "old_mode",
   "new_mode", "symlink_target"}]}

Changes come from `git diff-tree -r -M -l0 --raw -z --no-abbrev --root <sha>`,
i.e. the commit against its (only) parent, exact modes, rename detection at the
default 50% similarity with no rename limit, NUL-separated paths.
Python 3 standard library only.
"""
import argparse
import json
import subprocess
import sys


def git(git_dir, *args, check=True):
    p = subprocess.run(["git", "--git-dir", git_dir, *args],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if check and p.returncode != 0:
        raise RuntimeError("git %s failed: %s" % (" ".join(args),
                                                  p.stderr.decode(errors="replace")))
    return p


def dec(b):
    # Paths are bytes in git; non-UTF-8 bytes are kept as \xNN escapes.
    return b.decode("utf-8", errors="backslashreplace")


def list_commits(git_dir, rev, n):
    # -z: commits separated by NUL; fields separated by NUL too.
    out = git(git_dir, "log", "--no-merges", "-n", str(n), "-z",
              "--format=%H%x00%cI%x00%B", rev).stdout
    toks = out.split(b"\0")
    if toks and toks[-1] == b"":
        toks.pop()
    if len(toks) % 3:
        raise RuntimeError("unexpected git log output (%d tokens)" % len(toks))
    commits = []
    for i in range(0, len(toks), 3):
        sha, date, body = toks[i:i + 3]
        body = body.decode("utf-8", errors="replace")
        subject = body.split("\n", 1)[0].rstrip("\r")
        commits.append((sha.decode(), date.decode(), subject))
    return commits


def symlink_target(git_dir, blob):
    p = git(git_dir, "cat-file", "-p", blob, check=False)
    if p.returncode != 0:
        return None
    return dec(p.stdout)


def changes_of(git_dir, sha):
    out = git(git_dir, "diff-tree", "-r", "-M", "-l0", "--raw", "-z",
              "--no-abbrev", "--root", "--no-commit-id", sha).stdout
    toks = out.split(b"\0")
    changes = []
    i = 0
    while i < len(toks):
        meta = toks[i]
        if not meta:
            i += 1
            continue
        # ":old_mode new_mode old_sha new_sha STATUS[score]"
        if not meta.startswith(b":"):
            raise RuntimeError("%s: unexpected raw line %r" % (sha, meta))
        old_mode, new_mode, old_sha, new_sha, status = meta[1:].decode().split(" ")
        letter = status[0]
        if letter in "RC":
            old_path, path = dec(toks[i + 1]), dec(toks[i + 2])
            i += 3
        else:
            old_path, path = None, dec(toks[i + 1])
            i += 2
        changes.append({
            "status": letter,
            "path": path,
            "old_path": old_path,
            "old_mode": old_mode,
            "new_mode": new_mode,
            "symlink_target": symlink_target(git_dir, new_sha)
            if new_mode == "120000" else None,
        })
    return changes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("git_dir")
    ap.add_argument("output")
    ap.add_argument("-n", type=int, default=500)
    ap.add_argument("--rev", default="HEAD")
    a = ap.parse_args()
    commits = list_commits(a.git_dir, a.rev, a.n)
    with open(a.output, "w", encoding="utf-8") as f:
        for sha, date, subject in commits:
            rec = {"sha": sha, "date": date, "subject": subject,
                   "changes": changes_of(a.git_dir, sha)}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print("%s: %d commits" % (a.output, len(commits)), file=sys.stderr)


if __name__ == "__main__":
    main()
