//! What both forges' payloads are made of: a real example delivery as
//! the template, moved to this fake's repository, with the fields that
//! describe the change overwritten. Whatever the fake does not model
//! stays as the example has it.

use forgehand_forge::ReviewState;
use serde_json::{json, Value};

use crate::fake_forge::state::{FakeComment, FakeIssue, FakeReview, FakeReviewComment, ForgeState};

/// A delivery's event header, action and body.
pub(super) struct Payload {
    pub event: String,
    pub action: Option<String>,
    pub body: Value,
}

/// The repository a change happened in, as hooks see it.
pub(super) struct Site {
    pub full: String,
    pub owner: String,
    pub name: String,
    pub clone_url: String,
    pub default_branch: String,
    /// Where the forge's web pages are.
    pub web: String,
    /// Where the forge's API is (the fake itself).
    pub api: String,
    /// The GitHub App installation the repository is in, if any: an App's
    /// hook names it in every delivery.
    pub installation: Option<u64>,
    /// (pull request, reviewer) for each review requested.
    pub review_requests: Vec<(u64, String)>,
}

/// Lookups in the state; `None` for what the fake does not hold, and
/// then nothing is sent.
impl Site {
    pub fn reviewers(&self, number: u64) -> Vec<&str> {
        let requested = self.review_requests.iter().filter(|(n, _)| *n == number);
        requested.map(|(_, login)| login.as_str()).collect()
    }

    pub fn issue<'s>(&self, s: &'s ForgeState, number: u64) -> Option<&'s FakeIssue> {
        s.issues
            .iter()
            .find(|i| i.repo == self.full && i.number == number)
    }

    pub fn comment<'s>(&self, s: &'s ForgeState, id: u64) -> Option<&'s FakeComment> {
        s.comments.iter().find(|c| c.id == id)
    }

    pub fn review<'s>(&self, s: &'s ForgeState, id: u64) -> Option<&'s FakeReview> {
        s.reviews.iter().find(|r| r.id == id)
    }

    pub fn review_comment<'s>(&self, s: &'s ForgeState, id: u64) -> Option<&'s FakeReviewComment> {
        s.review_comments.iter().find(|c| c.id == id)
    }

    /// The example at `rel` (under the test data folder), moved from the
    /// example's repository and hosts to this one, with issue or pull
    /// request `number` in place of the example's.
    pub fn load(&self, rel: &str, hosts: &[(&str, &str)], number: u64) -> Value {
        let mut body = crate::testdata::json(rel);
        let old_full = body["repository"]["full_name"]
            .as_str()
            .unwrap_or_else(|| panic!("{rel} has no repository.full_name"))
            .to_owned();
        let old_number = body["issue"]["number"]
            .as_u64()
            .or(body["pull_request"]["number"].as_u64())
            .or(body["number"].as_u64());
        rewrite(&mut body, &old_full, &self.full);
        for (from, to) in hosts {
            rewrite(&mut body, from, to);
        }
        if let Some(old) = old_number {
            renumber(&mut body, old, number);
        }
        body
    }

    /// The example's `repository` object, made this repository.
    pub fn repository(&self, template: &Value) -> Value {
        let mut r = template.clone();
        r["id"] = json!(stable_id(&self.full));
        r["name"] = json!(self.name);
        r["full_name"] = json!(self.full);
        r["owner"] = user(&template["owner"], &self.owner);
        r["html_url"] = json!(format!("{}/{}", self.web, self.full));
        r["clone_url"] = json!(self.clone_url);
        r["default_branch"] = json!(self.default_branch);
        r
    }
}

/// The example's user object made `login`'s (its URLs too).
pub(super) fn user(template: &Value, login: &str) -> Value {
    let mut u = template.clone();
    if let Some(old) = template["login"].as_str().filter(|o| !o.is_empty()) {
        rewrite(&mut u, old, login);
    }
    u["login"] = json!(login);
    u["id"] = json!(stable_id(login));
    if u.get("username").is_some() {
        u["username"] = json!(login);
    }
    if u.get("type").is_some() {
        // How GitHub marks an App's installation user.
        u["type"] = json!(if login.ends_with("[bot]") {
            "Bot"
        } else {
            "User"
        });
    }
    u
}

/// An id that stays the same for the same name across deliveries, as the
/// forge's ids do (FNV-1a, kept to nine digits).
pub(super) fn stable_id(name: &str) -> u64 {
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    100_000_000 + hash % 900_000_000
}

/// `null` for an empty text, as both forges send it.
pub(super) fn text_or_null(text: &str) -> Value {
    if text.is_empty() {
        Value::Null
    } else {
        json!(text)
    }
}

/// The review state a review stored in either forge's API spelling has;
/// `None` for one not submitted yet (pending), which sends nothing.
pub(super) fn review_state(api: &str) -> Option<ReviewState> {
    match api.to_ascii_uppercase().as_str() {
        "APPROVE" | "APPROVED" => Some(ReviewState::Approved),
        "REQUEST_CHANGES" | "CHANGES_REQUESTED" => Some(ReviewState::ChangesRequested),
        "COMMENT" | "COMMENTED" => Some(ReviewState::Commented),
        _ => None,
    }
}

/// Replaces `from` by `to` in every string in `v`.
pub(super) fn rewrite(v: &mut Value, from: &str, to: &str) {
    each_string(v, &mut |s| {
        if s.contains(from) {
            *s = s.replace(from, to);
        }
    });
}

/// Moves the example's issue URLs (`/issues/1`, `/pull/1`, `/pulls/1`)
/// to `new`, leaving longer numbers (`/issues/12`) alone.
fn renumber(v: &mut Value, old: u64, new: u64) {
    each_string(v, &mut |s| {
        for segment in ["/issues/", "/pull/", "/pulls/"] {
            let from = format!("{segment}{old}");
            let mut out = String::with_capacity(s.len());
            let mut rest = s.as_str();
            while let Some(at) = rest.find(&from) {
                let after = &rest[at + from.len()..];
                out.push_str(&rest[..at]);
                if after.starts_with(|c: char| c.is_ascii_digit()) {
                    out.push_str(&from);
                } else {
                    out.push_str(&format!("{segment}{new}"));
                }
                rest = after;
            }
            out.push_str(rest);
            *s = out;
        }
    });
}

fn each_string(v: &mut Value, f: &mut dyn FnMut(&mut String)) {
    match v {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter_mut().for_each(|x| each_string(x, f)),
        Value::Object(map) => map.values_mut().for_each(|x| each_string(x, f)),
        _ => {}
    }
}
