//! What varies between runs of a story, made stable for snapshots: the
//! texts the bot writes on the forge are compared whole (inline `insta`
//! snapshots), and only what a run cannot reproduce is replaced, each
//! kind by a placeholder that says what stood there.

use std::sync::LazyLock;

use regex::Regex;

/// The rules, in the order they apply: a timestamp before the numbers
/// in it are read as anything else, a UUID before its parts are read as
/// commits.
static RULES: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    let worker = format!(r"\b{}-[0-9a-f]{{8}}-\d+\b", regex::escape(&hostname()));
    [
        // A queue worker: the host's name, the process's random node id
        // and the worker's number (which of them took a job is a race).
        (worker.as_str(), "[worker]"),
        // RFC 3339 (and the same with a space), to the second or finer.
        (
            r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?",
            "[timestamp]",
        ),
        (
            r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b",
            "[uuid]",
        ),
        // A temporary directory (tempfile's `.tmpXXXXXX`) and what is in it.
        (r"/(tmp|var/tmp)/\.tmp[A-Za-z0-9]+", "[tmp]"),
        // A port picked at random.
        (r"\b(127\.0\.0\.1|localhost):\d+\b", "$1:[port]"),
        // A commit, whole or cut short (git's short forms are 7 or more).
        (r"\b[0-9a-f]{7,40}\b", "[sha]"),
        // Tokens as the footer counts them (the scripted model's usage
        // follows the size of what it was sent).
        (
            r"\b\d[\d,]* tokens in( \([^)]*\))? · \d[\d,]* out\b",
            "[tokens]",
        ),
        // How long something took.
        (
            r"\b\d+(\.\d+)? ?(ms|s|secs?|seconds?|minutes?)\b",
            "[duration]",
        ),
    ]
    .into_iter()
    .map(|(pattern, with)| (Regex::new(pattern).unwrap(), with))
    .collect()
});

/// This machine's name, as Forgehand's queue names its workers.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default()
}

/// `text` with what varies between runs replaced by placeholders:
/// queue workers, timestamps, UUIDs, temporary paths, random ports,
/// commit ids and durations. Everything else is left as it is.
pub fn normalise(text: &str) -> String {
    RULES.iter().fold(text.to_owned(), |text, (rule, with)| {
        rule.replace_all(&text, *with).into_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::normalise;

    #[test]
    fn each_kind_of_varying_value_gets_its_placeholder() {
        for (text, normal) in [
            ("at 2026-12-07T14:10:34Z.", "at [timestamp]."),
            ("at 2026-12-07 14:10:34.123+01:00", "at [timestamp]"),
            (
                "job 0b7c63c2-1f4e-4a8e-9d55-07c1f3f5d1aa ran",
                "job [uuid] ran",
            ),
            ("in /tmp/.tmpAb12Cd/jobs/1", "in [tmp]/jobs/1"),
            (
                "· 4 turns · 12,400 tokens in (9,000 cached) · 800 out · unpriced ·",
                "· 4 turns · [tokens] · unpriced ·",
            ),
            (
                "http://127.0.0.1:40123/acme/demo/pulls/2",
                "http://127.0.0.1:[port]/acme/demo/pulls/2",
            ),
            ("localhost:8080", "localhost:[port]"),
            (
                "commit 0123456789abcdef0123456789abcdef01234567 pushed",
                "commit [sha] pushed",
            ),
            (
                "kept as commit `3f2a9c01de`, on no branch",
                "kept as commit `[sha]`, on no branch",
            ),
            (
                "Done in 1a2b3c4: Added a comment.",
                "Done in [sha]: Added a comment.",
            ),
            (
                "set up for this job in 3 s)",
                "set up for this job in [duration])",
            ),
            (
                "· 4 turns · $0.0000 · 12 s</sub>",
                "· 4 turns · $0.0000 · [duration]</sub>",
            ),
            (
                "took 250ms, then 1.5 seconds",
                "took [duration], then [duration]",
            ),
        ] {
            assert_eq!(normalise(text), normal, "{text:?}");
        }
    }

    #[test]
    fn a_queue_worker_is_named_by_its_place_not_its_id() {
        let host = super::hostname();
        assert!(!host.is_empty(), "no host name in /proc");
        let text = format!("after: lease of {host}-3126cf77-1 expired");
        assert_eq!(normalise(&text), "after: lease of [worker] expired");
    }

    #[test]
    fn what_does_not_vary_is_left_alone() {
        // Words of hex letters, short numbers, exit codes, issue numbers,
        // a shell's `sh`, Markdown.
        let text = "❌ Stopped: `forge_error`. HTTP 502 on #2 (attempt 2 of 5): \
                    `sh test.sh` exited 1 in its own sandbox; add() and sub() face 4 turns.\n\
                    - [x] authorized\n<!-- forgehand:job:12 -->";
        assert_eq!(normalise(text), text);
    }

    #[test]
    fn normalising_twice_changes_nothing_more() {
        let text = "2026-12-07T14:10:34Z 127.0.0.1:4000 0123456789 in 3 s /tmp/.tmpX1";
        let once = normalise(text);
        assert_eq!(
            once,
            "[timestamp] 127.0.0.1:[port] [sha] in [duration] [tmp]"
        );
        assert_eq!(normalise(&once), once);
    }
}
