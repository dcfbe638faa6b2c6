//! Reading a webhook delivery: which forge sent it, its headers, its
//! signature, and its payload turned into an [`Event`].

mod gitea;
mod github;
pub mod signature;

use crate::event::Event;

pub use forgehand_types::ForgeKind;

/// The headers of a delivery that Forgehand relies on, read without
/// trusting anything yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryHeaders {
    pub forge: ForgeKind,
    /// `None` when the header is missing: refused with 400, but only
    /// after the signature has been checked.
    pub event: Option<String>,
    pub delivery_id: Option<String>,
    /// The header carrying the signature, and its value.
    pub signature: Option<(&'static str, String)>,
}

impl DeliveryHeaders {
    /// Reads the headers of a delivery. Gitea and Forgejo also send
    /// GitHub's headers, so their own headers are looked for first: a
    /// delivery with any `X-Gitea-*`, `X-Forgejo-*` or `X-Gogs-*` event
    /// header is theirs.
    pub fn read<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Self {
        let owned = |name: &str| get(name).map(str::to_owned);
        if let Some(event) = owned("x-forgejo-event") {
            return DeliveryHeaders {
                forge: ForgeKind::Forgejo,
                event: Some(event),
                delivery_id: owned("x-forgejo-delivery").or_else(|| owned("x-gitea-delivery")),
                signature: first_signature(&get, &["x-forgejo-signature", "x-gitea-signature"]),
            };
        }
        if let Some(event) = owned("x-gitea-event").or_else(|| owned("x-gogs-event")) {
            return DeliveryHeaders {
                forge: ForgeKind::Gitea,
                event: Some(event),
                delivery_id: owned("x-gitea-delivery").or_else(|| owned("x-gogs-delivery")),
                signature: first_signature(&get, &["x-gitea-signature", "x-gogs-signature"]),
            };
        }
        DeliveryHeaders {
            forge: ForgeKind::Github,
            event: owned("x-github-event"),
            delivery_id: owned("x-github-delivery"),
            signature: first_signature(&get, &["x-hub-signature-256"]),
        }
    }

    /// Whether the signature header carries GitHub's `sha256=` prefix.
    pub fn signature_is_prefixed(&self) -> bool {
        matches!(self.signature, Some(("x-hub-signature-256", _)))
    }
}

fn first_signature<'a>(
    get: &impl Fn(&str) -> Option<&'a str>,
    names: &[&'static str],
) -> Option<(&'static str, String)> {
    names
        .iter()
        .find_map(|name| get(name).map(|v| (*name, v.to_owned())))
}

#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error("the body is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("the payload lacks `{0}`")]
    Missing(&'static str),
}

/// Reads a JSON body. A body that is valid UTF-8 is read as a `str`, so
/// that serde_json does not check every string in it again (a GitHub
/// payload has hundreds of keys: that check was half the cost of a parse).
fn from_json<'a, T: serde::Deserialize<'a>>(body: &'a [u8]) -> Result<T, serde_json::Error> {
    match std::str::from_utf8(body) {
        Ok(text) => serde_json::from_str(text),
        // serde_json then says where the bad byte is.
        Err(_) => serde_json::from_slice(body),
    }
}

/// Both forges name comment actions alike.
fn comment_action(action: &str) -> Option<crate::event::CommentAction> {
    use crate::event::CommentAction;
    Some(match action {
        "created" => CommentAction::Created,
        "edited" => CommentAction::Edited,
        "deleted" => CommentAction::Deleted,
        _ => return None,
    })
}

/// The `action` of a payload whose event cannot do without one.
fn required(action: Option<&str>) -> Result<&str, ParseError> {
    action.ok_or(ParseError::Missing("action"))
}

/// Turns a verified payload into an [`Event`]. `event` is the forge's
/// event header (`X-GitHub-Event`, `X-Gitea-Event`). Events and actions
/// Forgehand does not act on become [`Event::Other`]; a body that is not
/// JSON, or lacks what its event must carry, is an error.
pub fn parse_delivery(forge: ForgeKind, event: &str, body: &[u8]) -> Result<Event, ParseError> {
    match forge {
        ForgeKind::Github => github::parse(event, body),
        ForgeKind::Gitea | ForgeKind::Forgejo => gitea::parse(event, body),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_that_is_not_utf8_is_refused_with_where_it_broke() {
        let body = b"{\"action\":\"opened\",\"issue\":{\"title\":\"caf\xe9\"}}";
        let error = parse_delivery(ForgeKind::Github, "issues", body).unwrap_err();
        let ParseError::Json(json) = &error else {
            panic!("expected a JSON error, got {error:?}")
        };
        assert_eq!(json.column(), 41, "{error}");
        let error = parse_delivery(ForgeKind::Gitea, "issues", body).unwrap_err();
        assert!(matches!(error, ParseError::Json(_)), "{error:?}");
    }
}
