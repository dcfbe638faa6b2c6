//! Replays of captured signed bodies. A body seen before is recognised by
//! its digest (kept `database.digest_retention_days`, see the store); a
//! body older than that window is recognised by its own timestamps, which
//! the signature covers: the comment's creation, the issue's or pull
//! request's last update, the review's submission, whichever it carries.
//! Acting on any of these bumps the issue's or pull request's
//! `updated_at` on both GitHub and Gitea, so a genuine delivery is never
//! older than the moment it was sent.

use serde::{Deserialize, Deserializer};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// The parts of a payload that carry its timestamps; everything else is
/// skipped unread.
#[derive(Deserialize, Default)]
struct Stamps {
    comment: Option<Stamped>,
    issue: Option<Stamped>,
    pull_request: Option<Stamped>,
    review: Option<Stamped>,
}

#[derive(Deserialize, Default)]
struct Stamped {
    #[serde(default, deserialize_with = "stamp")]
    created_at: Option<i64>,
    #[serde(default, deserialize_with = "stamp")]
    updated_at: Option<i64>,
    #[serde(default, deserialize_with = "stamp")]
    submitted_at: Option<i64>,
}

/// A timestamp as Unix ms: RFC 3339 text (GitHub, Gitea with an offset)
/// or Unix seconds. Anything else counts as absent.
fn stamp<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Text(String),
        Seconds(i64),
        Other(serde::de::IgnoredAny),
    }
    Ok(match Raw::deserialize(d)? {
        Raw::Text(text) => OffsetDateTime::parse(&text, &Rfc3339)
            .ok()
            .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64),
        Raw::Seconds(seconds) => seconds.checked_mul(1000),
        Raw::Other(_) => None,
    })
}

/// The newest of the payload's own timestamps (Unix ms), when it has any.
/// A body whose shape differs from what is expected here has none: it
/// was verified and parsed already, and its digest still guards it.
pub fn newest_timestamp(body: &[u8]) -> Option<i64> {
    let stamps: Stamps = serde_json::from_slice(body).ok()?;
    [
        stamps.comment,
        stamps.issue,
        stamps.pull_request,
        stamps.review,
    ]
    .into_iter()
    .flatten()
    .flat_map(|s| [s.created_at, s.updated_at, s.submitted_at])
    .flatten()
    .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_of_the_event_timestamps_counts() {
        let body = br#"{"action":"created","issue":{"created_at":"2019-05-15T15:20:18Z","updated_at":"2019-05-15T15:20:21Z"},
            "comment":{"created_at":"2019-05-15T15:20:21Z","updated_at":"2019-05-15T15:20:22Z"},"sender":{"login":"x"}}"#;
        assert_eq!(newest_timestamp(body), Some(1_557_933_622_000));
    }

    #[test]
    fn offsets_seconds_and_review_submissions_are_read() {
        let gitea = br#"{"issue":{"updated_at":"2017-03-13T13:52:11-04:00"}}"#;
        assert_eq!(newest_timestamp(gitea), Some(1_489_427_531_000));
        let review = br#"{"review":{"submitted_at":"2019-05-15T15:20:38Z"},"pull_request":{"updated_at":null}}"#;
        assert_eq!(newest_timestamp(review), Some(1_557_933_638_000));
        let seconds = br#"{"pull_request":{"updated_at":1525109899}}"#;
        assert_eq!(newest_timestamp(seconds), Some(1_525_109_899_000));
    }

    #[test]
    fn a_body_without_timestamps_has_none() {
        assert_eq!(newest_timestamp(br#"{"ref":"refs/heads/main"}"#), None);
        assert_eq!(
            newest_timestamp(br#"{"issue":{"updated_at":"yesterday"}}"#),
            None
        );
        assert_eq!(newest_timestamp(br#"{"issue":"not an object"}"#), None);
        assert_eq!(newest_timestamp(b"not json"), None);
    }
}
