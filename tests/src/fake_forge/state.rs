//! What a fake forge holds: repositories' collaborators, issues (pull
//! requests among them, as both forges model them), comments, reactions,
//! reviews, review comments, review requests and commit statuses.

use std::collections::{HashMap, VecDeque};

use super::hooks::Change;

/// The scopes a Gitea token made for the bot carries (what `forgehand
/// setup gitea` checks for).
pub const GITEA_SCOPES: [&str; 4] = [
    "write:repository",
    "write:issue",
    "read:user",
    "read:organization",
];

#[derive(Default)]
pub struct ForgeState {
    /// token → login
    pub tokens: HashMap<String, String>,
    /// GitHub Apps: (app id, public key PEM) whose JWTs are accepted.
    pub apps: Vec<(u64, String)>,
    /// `owner/name` → installation id; installation id → app id.
    pub installations: HashMap<String, u64>,
    /// Installation tokens handed out, by installation id.
    pub issued_tokens: Vec<u64>,
    /// How long installation tokens last (an hour when unset, as on GitHub).
    pub token_ttl_secs: Option<i64>,
    /// The installation token to hand out, instead of a new one each time
    /// (so a git server with one password takes it).
    pub installation_token: Option<String>,
    /// (owner/name, login) → none|read|write|admin|owner
    pub permissions: HashMap<(String, String), String>,
    pub issues: Vec<FakeIssue>,
    pub comments: Vec<FakeComment>,
    /// (repo, "issue:N" or "comment:ID", login, content)
    pub reactions: Vec<(String, String, String, String)>,
    pub reviews: Vec<FakeReview>,
    pub review_comments: Vec<FakeReviewComment>,
    /// (repo, pr, reviewer)
    pub review_requests: Vec<(String, u64, String)>,
    /// (repo, sha, state, context, description)
    pub statuses: Vec<(String, String, String, String, String)>,
    /// Requests refused because the real API would not take them.
    pub violations: Vec<String>,
    /// Requests the forge refuses for what they ask (no right, an
    /// unknown commit, branch or reviewer): `METHOD path: message`.
    pub refused: Vec<String>,
    /// Each repository's git directory (`owner/name` → a bare repository),
    /// where the fake reads which commits and branches exist.
    pub git_dirs: HashMap<String, std::path::PathBuf>,
    /// `METHOD template` of every request that got through.
    pub calls: Vec<String>,
    /// Answers to give the next requests instead of serving them:
    /// (status, Retry-After seconds).
    pub faults: VecDeque<(u16, Option<u64>)>,
    /// Faults for one kind of call (`POST /repos/{owner}/{repo}/pulls`),
    /// given in order to the next calls of that kind.
    pub call_faults: Vec<CallFault>,
    /// Calls never answered, once each: a stage boundary a test kills
    /// Forgehand at.
    pub holds: Vec<Hold>,
    /// The held calls (`METHOD template`) that came.
    pub held: Vec<String>,
    /// Every n-th API call fails (5xx and rate limits in turn).
    pub fault_every: Option<u64>,
    /// A share of API calls fails, drawn at random from a seed (5xx, rate
    /// limits with Retry-After, secondary rate limits), and of the writes
    /// among them half are made and their answer lost.
    pub fault_share: Option<FaultShare>,
    pub calls_seen: u64,
    pub faults_served: u64,
    /// The registered hooks and every delivery sent to them.
    pub webhooks: super::hooks::Webhooks,
    /// Installation id → the App it belongs to (for Apps made from a
    /// manifest, whose webhook hears only where they are installed).
    pub installation_apps: HashMap<u64, u64>,
    /// Labels made through the API, of repositories and organizations.
    pub labels: Vec<FakeLabel>,
    /// A token's scopes: Gitea's (`write:repository`…), enforced per call,
    /// or a classic GitHub token's, sent as `X-OAuth-Scopes`. A token not
    /// here may do everything.
    pub token_scopes: HashMap<String, Vec<String>>,
    /// GitHub Apps made from a manifest.
    pub manifest_apps: Vec<ManifestApp>,
    /// Who is signed in to the fake GitHub's web pages (owns an App made
    /// without an organization).
    pub web_user: String,
    /// Where the fake's web pages are (its own address).
    pub web_base: String,
    /// Headers the answer being made carries (set by a route).
    pub extra_headers: Vec<(String, String)>,
    next_id: u64,
}

/// A label made through the API.
#[derive(Debug, Clone)]
pub struct FakeLabel {
    pub id: u64,
    pub scope: super::hooks::HookScope,
    pub name: String,
    pub color: String,
    pub description: String,
}

/// A GitHub App made from a manifest on the fake's web page.
#[derive(Debug, Clone)]
pub struct ManifestApp {
    pub id: u64,
    pub slug: String,
    pub name: String,
    pub owner: String,
    pub url: String,
    /// What the browser brings back; good for one conversion.
    pub code: String,
    pub converted: bool,
    pub webhook_secret: String,
    pub pem: String,
    pub permissions: serde_json::Map<String, serde_json::Value>,
    pub events: serde_json::Value,
    /// The manifest as posted.
    pub manifest: serde_json::Value,
}

/// Random faults: `per_mille` of calls fail.
#[derive(Debug, Clone, Copy)]
pub struct FaultShare {
    pub per_mille: u32,
    /// The generator's state (xorshift64), from a seed.
    pub state: u64,
}

impl FaultShare {
    pub fn new(per_mille: u32, seed: u64) -> Self {
        FaultShare {
            per_mille,
            state: seed.max(1),
        }
    }

    /// The next draw, 0 to 999.
    pub fn draw(&mut self) -> u32 {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        (x % 1000) as u32
    }
}

/// A failure the fake gives one kind of call.
#[derive(Debug, Clone)]
pub struct CallFault {
    /// `METHOD template`, as [`ForgeState::calls`] lists calls.
    pub call: String,
    pub status: u16,
    pub retry_after: Option<u64>,
    /// Serve the call, then answer with the fault anyway: the change is
    /// made but the client is not told (a proxy timing out, say).
    pub after_serving: bool,
}

/// A call the fake never answers, once: where a test kills Forgehand.
#[derive(Debug, Clone)]
pub struct Hold {
    /// `METHOD template`, as [`ForgeState::calls`] lists calls.
    pub call: String,
    /// Only a call whose JSON `body` field contains this (the final edit
    /// of the status comment, not the edits before it).
    pub body_contains: Option<String>,
    /// Serve the call first: the change is made, its answer never comes.
    pub after_serving: bool,
}

impl Hold {
    /// `call` held before it is served.
    pub fn before(call: &str) -> Self {
        Hold {
            call: call.into(),
            body_contains: None,
            after_serving: false,
        }
    }

    /// `call` served, its answer held.
    pub fn after_serving(call: &str) -> Self {
        Hold {
            after_serving: true,
            ..Hold::before(call)
        }
    }

    /// Only a call whose `body` contains `text`.
    pub fn with_body(mut self, text: &str) -> Self {
        self.body_contains = Some(text.into());
        self
    }
}

#[derive(Debug, Clone)]
pub struct FakeIssue {
    pub repo: String,
    pub number: u64,
    pub title: String,
    pub body: String,
    pub user: String,
    pub open: bool,
    pub labels: Vec<String>,
    pub assignees: Vec<String>,
    /// Pull requests are issues too, as in Gitea: (head branch, base
    /// branch).
    pub pull: Option<(String, String)>,
    /// The repository (`owner/name`) a pull request's head branch is in
    /// when it is not this one: a fork's.
    pub head_repo: Option<String>,
}

impl FakeIssue {
    /// Where the pull request's head branch lives.
    pub fn head_repo(&self) -> &str {
        self.head_repo.as_deref().unwrap_or(&self.repo)
    }
}

#[derive(Debug, Clone)]
pub struct FakeComment {
    pub repo: String,
    pub issue: u64,
    pub id: u64,
    pub user: String,
    pub body: String,
    /// Every body the comment had, oldest first, the current one last:
    /// what a reader saw it say on the way.
    pub history: Vec<String>,
}

/// Why a comment was not edited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditRefused {
    NoSuchComment,
    NotTheAuthors,
}

#[derive(Debug, Clone)]
pub struct FakeReview {
    pub repo: String,
    pub pr: u64,
    pub id: u64,
    pub user: String,
    pub state: String,
    pub body: String,
}

#[derive(Debug, Clone)]
pub struct FakeReviewComment {
    pub review_id: u64,
    pub id: u64,
    pub user: String,
    pub path: String,
    pub position: u64,
    pub body: String,
    pub commit_id: String,
    pub in_reply_to: Option<u64>,
}

impl ForgeState {
    pub fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// `user` reacts with `content` on `target` (`issue:N`, `comment:ID`);
    /// false when that reaction was there already: both forges keep one
    /// reaction of a kind per user and answer a repeat with it.
    pub fn react(&mut self, repo: &str, target: String, user: &str, content: &str) -> bool {
        let reaction = (repo.to_owned(), target, user.to_owned(), content.to_owned());
        if self.reactions.contains(&reaction) {
            return false;
        }
        self.reactions.push(reaction);
        true
    }

    pub fn next_number(&self, repo: &str) -> u64 {
        self.issues.iter().filter(|i| i.repo == repo).count() as u64 + 1
    }

    pub fn add_issue(&mut self, repo: &str, user: &str, title: &str, body: &str) -> u64 {
        let number = self.next_number(repo);
        self.issues.push(FakeIssue {
            repo: repo.into(),
            number,
            title: title.into(),
            body: body.into(),
            user: user.into(),
            open: true,
            labels: vec![],
            assignees: vec![],
            pull: None,
            head_repo: None,
        });
        number
    }

    /// The bot's token as a real installation has it: `token` acts as
    /// `login`, who may write to `repo`; on Gitea the token carries the
    /// scopes `forgehand setup gitea` asks for.
    pub fn bot_token(&mut self, kind: super::Kind, repo: &str, token: &str, login: &str) {
        self.tokens.insert(token.into(), login.into());
        self.permissions
            .insert((repo.into(), login.into()), "write".into());
        if kind == super::Kind::Gitea {
            self.token_scopes.insert(
                token.into(),
                GITEA_SCOPES.iter().map(|s| (*s).to_owned()).collect(),
            );
        }
    }

    pub fn add_comment(&mut self, repo: &str, issue: u64, user: &str, body: &str) -> u64 {
        let id = self.id();
        self.comments.push(FakeComment {
            repo: repo.into(),
            issue,
            id,
            user: user.into(),
            body: body.into(),
            history: vec![body.into()],
        });
        id
    }

    /// `user` sets comment `id`'s body to `text`: the comment, and the
    /// body it had. Only its author may (both forges refuse anyone else
    /// but an admin, and the bot is none).
    pub fn edit_comment(
        &mut self,
        repo: &str,
        id: u64,
        user: &str,
        text: &str,
    ) -> Result<(&FakeComment, String), EditRefused> {
        let c = self
            .comments
            .iter_mut()
            .find(|c| c.repo == repo && c.id == id)
            .ok_or(EditRefused::NoSuchComment)?;
        if c.user != user {
            return Err(EditRefused::NotTheAuthors);
        }
        let from = std::mem::replace(&mut c.body, text.into());
        c.history.push(text.into());
        Ok((c, from))
    }

    pub fn add_review(
        &mut self,
        repo: &str,
        pr: u64,
        user: &str,
        state: &str,
        body: &str,
        comments: &[(&str, u64, &str)],
    ) -> u64 {
        let id = self.id();
        self.reviews.push(FakeReview {
            repo: repo.into(),
            pr,
            id,
            user: user.into(),
            state: state.into(),
            body: body.into(),
        });
        for (path, position, text) in comments {
            let cid = self.id();
            self.review_comments.push(FakeReviewComment {
                review_id: id,
                id: cid,
                user: user.into(),
                path: (*path).into(),
                position: *position,
                body: (*text).into(),
                commit_id: "0123456789abcdef0123456789abcdef01234567".into(),
                in_reply_to: None,
            });
        }
        id
    }

    /// A new pull request from `body`'s title, body, head and base; `None`
    /// when one is already open from that head (both forges refuse it).
    pub fn open_pull(
        &mut self,
        repo: &str,
        user: &str,
        body: &serde_json::Value,
    ) -> Option<&FakeIssue> {
        let field = |k: &str| body[k].as_str().unwrap_or_default().to_owned();
        let (head, base) = (field("head"), field("base"));
        let taken = self.issues.iter().any(|i| {
            i.repo == repo
                && i.open
                && i.head_repo.is_none()
                && i.pull.as_ref().is_some_and(|p| p.0 == head)
        });
        if taken {
            return None;
        }
        self.add_pull(repo, user, &field("title"), &head, &base);
        let pr = self.issues.last_mut()?;
        pr.body = field("body");
        Some(pr)
    }

    /// An open pull request from `head` to `base`, in this repository,
    /// announced to no one (a test's setting of the scene).
    pub fn add_pull(&mut self, repo: &str, user: &str, title: &str, head: &str, base: &str) -> u64 {
        let number = self.next_number(repo);
        self.issues.push(FakeIssue {
            repo: repo.into(),
            number,
            title: title.into(),
            body: String::new(),
            user: user.into(),
            open: true,
            labels: vec![],
            assignees: vec![],
            pull: Some((head.into(), base.into())),
            head_repo: None,
        });
        number
    }

    /// An open pull request from the branch `head` of the fork `fork`.
    pub fn add_fork_pull(
        &mut self,
        repo: &str,
        fork: &str,
        user: &str,
        head: &str,
        base: &str,
    ) -> u64 {
        let number = self.add_pull(repo, user, "From a fork", head, base);
        if let Some(pr) = self.issues.last_mut() {
            pr.head_repo = Some(fork.into());
        }
        number
    }

    /// Sets the title and body `body` names on pull request `number`.
    pub fn edit_pull(
        &mut self,
        repo: &str,
        number: u64,
        body: &serde_json::Value,
    ) -> Option<&FakeIssue> {
        let pr = self
            .issues
            .iter_mut()
            .find(|i| i.repo == repo && i.number == number && i.pull.is_some())?;
        if let Some(title) = body["title"].as_str() {
            pr.title = title.into();
        }
        if let Some(text) = body["body"].as_str() {
            pr.body = text.into();
        }
        Some(pr)
    }
}

/// What both forges' routes do alike: the change made, then announced to
/// the hooks as the forge of `kind` announces it.
impl ForgeState {
    /// Issue (or pull request) `number` of `repo`.
    pub fn issue(&self, repo: &str, number: u64) -> Option<&FakeIssue> {
        self.issues
            .iter()
            .find(|i| i.repo == repo && i.number == number)
    }

    /// The comments on issue or pull request `number` of `repo`, oldest
    /// first.
    pub fn comments_on<'a>(
        &'a self,
        repo: &'a str,
        number: u64,
    ) -> impl Iterator<Item = &'a FakeComment> + 'a {
        self.comments
            .iter()
            .filter(move |c| c.repo == repo && c.issue == number)
    }

    /// Pull request `number` of `repo`.
    pub fn pull(&self, repo: &str, number: u64) -> Option<&FakeIssue> {
        self.issues
            .iter()
            .find(|i| i.repo == repo && i.number == number && i.pull.is_some())
    }

    /// `user` comments `text` on issue or pull request `number`; `None`
    /// when there is none.
    pub(super) fn comment_announced(
        &mut self,
        kind: super::Kind,
        repo: &str,
        number: u64,
        user: &str,
        text: &str,
    ) -> Option<&FakeComment> {
        if !self
            .issues
            .iter()
            .any(|i| i.repo == repo && i.number == number)
        {
            return None;
        }
        let comment = self.add_comment(repo, number, user, text);
        self.notify(kind, repo, user, Change::Commented { comment });
        self.comments.iter().find(|c| c.id == comment)
    }

    /// [`ForgeState::edit_comment`], announced.
    pub(super) fn edit_comment_announced(
        &mut self,
        kind: super::Kind,
        repo: &str,
        id: u64,
        user: &str,
        text: &str,
    ) -> Result<FakeComment, EditRefused> {
        let (comment, from) = self.edit_comment(repo, id, user, text)?;
        let comment = comment.clone();
        self.notify(
            kind,
            repo,
            user,
            Change::CommentEdited {
                comment: comment.id,
                from,
            },
        );
        Ok(comment)
    }

    /// [`ForgeState::open_pull`], announced.
    pub(super) fn open_pull_announced(
        &mut self,
        kind: super::Kind,
        repo: &str,
        user: &str,
        body: &serde_json::Value,
    ) -> Option<FakeIssue> {
        let pr = self.open_pull(repo, user, body)?.clone();
        self.notify(kind, repo, user, Change::PullOpened { number: pr.number });
        Some(pr)
    }

    /// [`ForgeState::edit_pull`], announced when the title or body changed.
    pub(super) fn edit_pull_announced(
        &mut self,
        kind: super::Kind,
        repo: &str,
        user: &str,
        number: u64,
        body: &serde_json::Value,
    ) -> Option<FakeIssue> {
        let before = self
            .issues
            .iter()
            .find(|i| i.repo == repo && i.number == number)
            .cloned();
        let pr = self.edit_pull(repo, number, body)?.clone();
        if let Some(change) = before.and_then(|b| edited(&b, self)) {
            self.notify(kind, repo, user, change);
        }
        Some(pr)
    }
}

/// What an edit of pull request `before` changed, as the forge announces
/// it; `None` when it changed nothing (and the forge says nothing).
fn edited(before: &FakeIssue, s: &ForgeState) -> Option<Change> {
    let now = s
        .issues
        .iter()
        .find(|i| i.repo == before.repo && i.number == before.number)?;
    let title_from = (now.title != before.title).then(|| before.title.clone());
    let body_from = (now.body != before.body).then(|| before.body.clone());
    (title_from.is_some() || body_from.is_some()).then_some(Change::PullEdited {
        number: before.number,
        title_from,
        body_from,
    })
}
