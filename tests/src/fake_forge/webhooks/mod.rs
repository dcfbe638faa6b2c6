//! Webhooks, sent as the real forges send them. Every change to the
//! fake's state that the real forge would announce (a test's label,
//! assignment, comment or review, or the bot's own comment, edit or pull
//! request through the API) becomes one signed delivery per registered
//! hook, its body built from a real example payload. One background task
//! posts them in order; each delivery and the answer it got are kept.

mod gitea;
mod github;
mod payload;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, Notify};

pub(super) use super::hooks::Change;
use super::hooks::{Delivery, Hook, HookScope, Webhooks};
use super::state::FakeIssue;
use super::{FakeForge, ForgeState, Kind};

impl ForgeState {
    /// Tells every hook about `change` in `repo`, made by `sender`. Only
    /// queues: the state's lock is held here, and posting waits.
    pub(super) fn notify(&mut self, kind: Kind, repo: &str, sender: &str, change: Change) {
        if self.webhooks.hooks.is_empty() {
            return;
        }
        let mut site = self.webhooks.site(kind, repo);
        site.installation = self.installations.get(repo).copied();
        site.review_requests = (self.review_requests.iter())
            .filter(|(r, _, _)| r == repo)
            .map(|(_, number, login)| (*number, login.clone()))
            .collect();
        let payload = match kind {
            Kind::GitHub => github::payload(self, &site, sender, &change),
            Kind::Gitea => gitea::payload(self, &site, sender, &change),
        };
        let Some(mut payload) = payload else { return };
        stamp_now(&mut payload.body, &change);
        // A ping or a test delivery goes to its one hook.
        let only = match &change {
            Change::Ping { hook } | Change::TestPush { hook } => Some(*hook),
            _ => None,
        };
        // GitHub sends compact JSON; Gitea indents it (`json.MarshalIndent`).
        let body = match kind {
            Kind::GitHub => serde_json::to_vec(&payload.body),
            Kind::Gitea => serde_json::to_vec_pretty(&payload.body),
        }
        .expect("a JSON value serializes");
        let installed = (self.installations.get(repo))
            .and_then(|installation| self.installation_apps.get(installation))
            .copied();
        let hooks = self.webhooks.hooks.clone().into_iter();
        for hook in hooks.filter(|h| only.map_or(h.hears(repo, installed), |id| h.id == id)) {
            let delivery_id = uuid::Uuid::new_v4().to_string();
            let headers = match kind {
                Kind::GitHub => {
                    github::headers(hook.id, &hook.secret, &payload, &delivery_id, &body)
                }
                Kind::Gitea => gitea::headers(&hook.secret, &payload, &delivery_id, &body),
            };
            let index = self.webhooks.deliveries.len();
            let queued = self
                .webhooks
                .outbox
                .as_ref()
                .is_some_and(|outbox| outbox.send(index).is_ok());
            self.webhooks.deliveries.push(Delivery {
                hook_id: hook.id,
                url: hook.url,
                event: payload.event.clone(),
                action: payload.action.clone(),
                delivery_id,
                headers,
                body: body.clone(),
                status: None,
                answer: None,
                error: (!queued).then(|| "the fake forge's delivery task is gone".into()),
            });
        }
    }
}

/// The change happens now, and the payload says so as the real forges'
/// do: the issue's or pull request's `updated_at`, and the new comment's
/// or review's own time. (The templates' times are years old, and
/// Forgehand refuses a body that old as a replay.)
fn stamp_now(body: &mut serde_json::Value, change: &Change) {
    let now = time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .expect("0 is a valid nanosecond")
        .format(&time::format_description::well_known::Rfc3339)
        .expect("a time formats as RFC 3339");
    let mut set = |object: &str, field: &str| {
        if let Some(v) = body.get_mut(object).and_then(|o| o.get_mut(field)) {
            *v = serde_json::Value::from(now.clone());
        }
    };
    set("issue", "updated_at");
    set("pull_request", "updated_at");
    match change {
        Change::Commented { .. } | Change::ReviewReply { .. } => {
            set("comment", "created_at");
            set("comment", "updated_at");
        }
        Change::CommentEdited { .. } => set("comment", "updated_at"),
        Change::Reviewed { .. } => set("review", "submitted_at"),
        _ => {}
    }
}

impl Webhooks {
    /// Registers `hook` under a new id; returns the id.
    pub(in crate::fake_forge) fn add(&mut self, mut hook: Hook) -> u64 {
        hook.id = 470_000_000 + self.hooks.len() as u64 + 1;
        let id = hook.id;
        self.hooks.push(hook);
        id
    }

    /// The hooks made through the API for `scope`.
    pub(in crate::fake_forge) fn of(&self, scope: &HookScope) -> Vec<&Hook> {
        (self.hooks.iter())
            .filter(|h| h.scope.as_ref() == Some(scope))
            .collect()
    }

    pub(in crate::fake_forge) fn get_mut(&mut self, id: u64) -> Option<&mut Hook> {
        self.hooks.iter_mut().find(|h| h.id == id)
    }

    /// Every hook made through the API: (scope, url, events, active).
    pub fn api_hooks(&self) -> Vec<(HookScope, String, Vec<String>, bool)> {
        (self.hooks.iter())
            .filter_map(|h| {
                let scope = h.scope.clone()?;
                Some((scope, h.url.clone(), h.events.clone(), h.active))
            })
            .collect()
    }

    /// The secret a hook signs with (a test compares it to Forgehand's).
    pub fn secret_of(&self, id: u64) -> Option<String> {
        self.hooks
            .iter()
            .find(|h| h.id == id)
            .map(|h| h.secret.clone())
    }

    fn site(&self, kind: Kind, repo: &str) -> payload::Site {
        let (owner, name) = repo.split_once('/').unwrap_or((repo, repo));
        let (web, api) = match kind {
            Kind::GitHub => (github::WEB.to_owned(), self.base_url.clone()),
            Kind::Gitea => (self.base_url.clone(), format!("{}/api/v1", self.base_url)),
        };
        let (clone_url, branch) = self.repos.get(repo).cloned().unwrap_or_default();
        payload::Site {
            full: repo.into(),
            owner: owner.into(),
            name: name.into(),
            clone_url: clone_url.unwrap_or_else(|| format!("{web}/{repo}.git")),
            default_branch: branch.unwrap_or_else(|| "main".into()),
            web,
            api,
            installation: None,
            review_requests: Vec::new(),
        }
    }
}

/// The task that posts deliveries; stopped with the fake.
pub(super) struct Deliverer(tokio::task::JoinHandle<()>);

impl Drop for Deliverer {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Starts posting what `state` queues; `answered` is told after each answer.
pub(super) fn start(
    state: Arc<Mutex<ForgeState>>,
    base_url: &str,
    answered: Arc<Notify>,
) -> Deliverer {
    let (outbox, inbox) = mpsc::unbounded_channel();
    {
        let mut s = state.lock().unwrap();
        s.webhooks.base_url = base_url.into();
        s.webhooks.outbox = Some(outbox);
    }
    Deliverer(tokio::spawn(deliver(state, inbox, answered)))
}

async fn deliver(
    state: Arc<Mutex<ForgeState>>,
    mut inbox: mpsc::UnboundedReceiver<usize>,
    answered: Arc<Notify>,
) {
    // GitHub gives up on a delivery after ten seconds.
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("an HTTP client");
    while let Some(index) = inbox.recv().await {
        let (url, headers, body) = {
            let s = state.lock().unwrap();
            let d = &s.webhooks.deliveries[index];
            (d.url.clone(), d.headers.clone(), d.body.clone())
        };
        let mut request = client.post(&url).body(body);
        for (name, value) in &headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let outcome = match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                Ok((status, response.text().await.unwrap_or_default()))
            }
            Err(e) => Err(format!("{e:#}")),
        };
        {
            let mut s = state.lock().unwrap();
            let d = &mut s.webhooks.deliveries[index];
            match outcome {
                Ok((status, text)) => {
                    d.status = Some(status);
                    d.answer = Some(text);
                }
                Err(e) => d.error = Some(e),
            }
        }
        answered.notify_waiters();
    }
}

impl FakeForge {
    // Panics below happen outside `with`: one inside would poison the
    // state's lock and fail every later request to the fake.

    /// Registers a hook, as a repository's or organization's webhook on
    /// the real forge: from now on every change is delivered to `url`,
    /// signed with `secret`. Returns the hook's id.
    pub fn add_webhook(&self, url: &str, secret: &str) -> u64 {
        self.with(|s| {
            s.webhooks.add(Hook {
                id: 0,
                url: url.into(),
                secret: secret.into(),
                scope: None,
                events: Vec::new(),
                active: true,
                content_type: "json".into(),
            })
        })
    }

    /// Installs the GitHub App `app` (made from a manifest) on `repo`, as
    /// its install page would; returns the installation's id. From now on
    /// the App's webhook hears `repo`.
    pub fn install_app(&self, app: u64, repo: &str) -> u64 {
        self.with(|s| {
            let installation = 1_000 + s.id();
            s.installations.insert(repo.into(), installation);
            s.installation_apps.insert(installation, app);
            installation
        })
    }

    /// The URL deliveries give as `repo`'s `clone_url` (by default one on
    /// the forge's own host).
    pub fn set_clone_url(&self, repo: &str, url: &str) {
        self.with(|s| s.webhooks.repos.entry(repo.into()).or_default().0 = Some(url.into()));
    }

    /// The branch deliveries give as `repo`'s `default_branch` (`main`
    /// unless set).
    pub fn set_default_branch(&self, repo: &str, branch: &str) {
        self.with(|s| s.webhooks.repos.entry(repo.into()).or_default().1 = Some(branch.into()));
    }

    /// Every delivery so far, oldest first.
    pub fn deliveries(&self) -> Vec<Delivery> {
        self.with(|s| s.webhooks.deliveries.clone())
    }

    /// Waits until every delivery queued so far, and any queued while
    /// waiting, has been answered (or has failed). Panics after a minute.
    pub async fn settle(&self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            // Registered before looking, so an answer in between is not missed.
            let answered = self.answered.notified();
            tokio::pin!(answered);
            answered.as_mut().enable();
            let pending: Vec<String> = self.with(|s| {
                let waiting = s.webhooks.deliveries.iter().filter(|d| !d.answered());
                waiting
                    .map(|d| format!("{} {}", d.event, d.delivery_id))
                    .collect()
            });
            if pending.is_empty() {
                return;
            }
            if tokio::time::timeout_at(deadline, answered).await.is_err() {
                panic!("deliveries still unanswered after a minute: {pending:?}");
            }
        }
    }

    /// `by` adds `label` to issue (or pull request) `number`.
    pub fn label_issue(&self, repo: &str, number: u64, label: &str, by: &str) {
        self.change(repo, number, by, |issue| {
            if !issue.labels.iter().any(|l| l == label) {
                issue.labels.push(label.into());
            }
            Change::Labeled {
                number,
                label: label.into(),
            }
        });
    }

    /// `by` assigns `assignee` to issue (or pull request) `number`.
    pub fn assign_issue(&self, repo: &str, number: u64, assignee: &str, by: &str) {
        self.change(repo, number, by, |issue| {
            if !issue.assignees.iter().any(|a| a == assignee) {
                issue.assignees.push(assignee.into());
            }
            Change::Assigned {
                number,
                assignee: assignee.into(),
            }
        });
    }

    /// `by` comments `body` on issue (or pull request) `number`; returns
    /// the comment's id.
    pub fn comment(&self, repo: &str, number: u64, by: &str, body: &str) -> u64 {
        let kind = self.kind;
        self.with(|s| {
            s.issues
                .iter()
                .any(|i| i.repo == repo && i.number == number)
                .then(|| {
                    let id = s.add_comment(repo, number, by, body);
                    s.notify(kind, repo, by, Change::Commented { comment: id });
                    id
                })
        })
        .unwrap_or_else(|| panic!("the fake forge has no {repo}#{number}"))
    }

    /// `by` submits a review of pull request `pr` in `state` (either
    /// forge's API spelling: `APPROVED`, `REQUEST_CHANGES`,
    /// `CHANGES_REQUESTED`, `COMMENT`…) with line comments
    /// `(path, line, text)`; returns the review's id.
    pub fn submit_review(
        &self,
        repo: &str,
        pr: u64,
        by: &str,
        state: &str,
        body: &str,
        comments: &[(&str, u64, &str)],
    ) -> u64 {
        let kind = self.kind;
        self.with(|s| {
            s.issues
                .iter()
                .any(|i| i.repo == repo && i.number == pr && i.pull.is_some())
                .then(|| {
                    let id = s.add_review(repo, pr, by, state, body, comments);
                    s.notify(kind, repo, by, Change::Reviewed { review: id });
                    id
                })
        })
        .unwrap_or_else(|| panic!("the fake forge has no pull request {repo}#{pr}"))
    }

    /// Applies `edit` to issue `number` and announces the change it names.
    fn change(
        &self,
        repo: &str,
        number: u64,
        by: &str,
        edit: impl FnOnce(&mut FakeIssue) -> Change,
    ) {
        let kind = self.kind;
        let found = self.with(|s| {
            let issue = (s.issues.iter_mut()).find(|i| i.repo == repo && i.number == number)?;
            let change = edit(issue);
            s.notify(kind, repo, by, change);
            Some(())
        });
        found.unwrap_or_else(|| panic!("the fake forge has no {repo}#{number}"));
    }
}

/// An edit's `changes`, as both forges send it: what the title and the
/// body were before, each only when it changed.
fn changes(title_from: &Option<String>, body_from: &Option<String>) -> serde_json::Value {
    let mut changes = serde_json::json!({});
    if let Some(from) = title_from {
        changes["title"] = serde_json::json!({"from": from});
    }
    if let Some(from) = body_from {
        changes["body"] = serde_json::json!({"from": from});
    }
    changes
}
