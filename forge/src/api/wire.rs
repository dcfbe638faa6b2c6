//! Reading the forges' JSON answers: both forges name these fields alike,
//! and answers are read field by field so that extra or missing fields of
//! other server versions do not fail a job.

use serde_json::Value;

use super::{Comment, PullRequest};

pub(crate) fn login(user: &Value) -> String {
    user["login"].as_str().unwrap_or_default().to_owned()
}

pub(crate) fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

pub(crate) fn comment(v: &Value) -> Comment {
    Comment {
        id: v["id"].as_u64().unwrap_or_default(),
        author: login(&v["user"]),
        body: text(&v["body"]),
    }
}

pub(crate) fn pull(v: &Value) -> PullRequest {
    PullRequest {
        number: v["number"].as_u64().unwrap_or_default(),
        url: text(&v["html_url"]),
        head: text(&v["head"]["ref"]),
        base: text(&v["base"]["ref"]),
        title: text(&v["title"]),
        body: text(&v["body"]),
    }
}

/// The innermost cause: reqwest's and octocrab's outer errors name the
/// URL, which stays out of messages.
pub(crate) fn root_cause(error: &dyn std::error::Error) -> String {
    let mut source = error;
    while let Some(next) = source.source() {
        source = next;
    }
    source.to_string()
}
