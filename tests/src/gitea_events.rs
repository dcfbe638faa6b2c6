//! Which `X-Gitea-Event` header each Gitea/Forgejo example in
//! `shared/testdata/gitea/webhook-examples` goes with. Plain Rust with no
//! dependencies, so that both the forge crate's payload tests (through
//! `#[path]`) and the end-to-end suite use this one mapping.

/// The `X-Gitea-Event` header each example goes with. The woodpecker
/// `hooks.go.txt` files only name the payloads; the header follows from
/// the name (reviews are `pull_request_approved`/`_rejected`/`_comment`,
/// tags are `create`), and comments on pull requests are `issue_comment`.
pub fn gitea_event(rel: &str) -> &'static str {
    let (dir, file) = rel.split_once('/').expect("<source>/<file>.json");
    let stem = file.trim_end_matches(".json");
    if dir == "drone-go-scm" {
        return match stem {
            "push" => "push",
            s if s.ends_with("_create") => "create",
            s if s.ends_with("_delete") => "delete",
            s if s.starts_with("issue_comment_") || s.starts_with("pull_request_comment_") => {
                "issue_comment"
            }
            s if s.starts_with("issues_") => "issues",
            s if s.starts_with("pull_request_") => "pull_request",
            _ => panic!("no event header known for {rel}"),
        };
    }
    match stem {
        "HookPullRequestReviewAck" => "pull_request_approved",
        "HookPullRequestReviewDeny" => "pull_request_rejected",
        "HookPullRequestReviewComment" => "pull_request_comment",
        "HookTag" => "create",
        "HookRelease" => "release",
        s if s.starts_with("HookPush") => "push",
        s if s.starts_with("HookPullRequest") => "pull_request",
        _ => panic!("no event header known for {rel}"),
    }
}
