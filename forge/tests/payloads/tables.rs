//! The field-by-field tables: one row per example file, values read off
//! the JSON by hand.

pub(crate) type Strs = &'static [&'static str];

/// What is checked beyond name, repository, number and sender.
#[rustfmt::skip]
#[derive(Debug, Clone, Copy)]
pub(crate) enum More {
    /// `Event::Other`.
    No,
    Ping { hook_id: Option<u64> },
    Issue { is_pr: bool, label: Option<&'static str>, assignee: Option<&'static str> },
    /// `body` is a prefix of the comment's body.
    Comment { is_pr: bool, body: &'static str },
    Review { id: Option<u64>, body: &'static str },
    Line { body: &'static str, path: &'static str, line: Option<u64>, reply: Option<u64> },
    Pr { head: &'static str, base: &'static str, merged: bool },
    Install { id: u64, account: &'static str, repos: Strs },
    InstallRepos { id: u64, account: &'static str, added: Strs, removed: Strs },
}
pub(crate) use More::*;

pub(crate) struct Case {
    /// The event header.
    pub(crate) event: &'static str,
    pub(crate) file: &'static str,
    /// `Event::name()`: variant and action, or review state.
    pub(crate) name: &'static str,
    /// Repository full name, `""` when the event has none.
    pub(crate) repo: &'static str,
    /// Issue or pull request number, 0 when none.
    pub(crate) number: u64,
    /// Sender login, `""` when none.
    pub(crate) sender: &'static str,
    pub(crate) more: More,
}

pub(crate) type S = &'static str;

/// A GitHub row: the header is the file's directory.
pub(crate) fn c(file: S, name: S, repo: S, number: u64, sender: S, more: More) -> Case {
    let event = file.split_once('/').unwrap().0;
    g(event, file, name, repo, number, sender, more)
}
pub(crate) fn o(file: S, name: S) -> Case {
    c(file, name, "", 0, "", No)
}
pub(crate) fn g(event: S, file: S, name: S, repo: S, number: u64, sender: S, more: More) -> Case {
    Case {
        event,
        file,
        name,
        repo,
        number,
        sender,
        more,
    }
}
pub(crate) fn og(event: S, file: S, name: S) -> Case {
    g(event, file, name, "", 0, "", No)
}

#[rustfmt::skip]
pub(crate) fn github_cases() -> Vec<Case> {
    vec![
        c("installation/created.1.json", "installation.created", "", 0, "Codertocat", Install { id: 957387, account: "Codertocat", repos: &["Codertocat/Hello-World"] }),
        c("installation/created.2.json", "installation.created", "", 0, "Codertocat", Install { id: 957387, account: "Codertocat", repos: &["Codertocat/Hello-World"] }),
        c("installation/deleted.1.json", "installation.deleted", "", 0, "octocat", Install { id: 2, account: "octocat", repos: &["octocat/Hello-World"] }),
        c("installation/deleted.2.json", "installation.deleted", "", 0, "octocat", Install { id: 2, account: "octocat", repos: &["octocat/Hello-World"] }),
        c("installation/new_permissions_accepted.1.json", "installation.new_permissions_accepted", "", 0, "Codertocat", Install { id: 957387, account: "Codertocat", repos: &["Codertocat/Hello-World"] }),
        c("installation/suspend.1.json", "installation.suspended", "", 0, "Codertocat", Install { id: 16598467, account: "Codertocat", repos: &[] }),
        c("installation/unsuspend.1.json", "installation.unsuspended", "", 0, "Codertocat", Install { id: 16598467, account: "Codertocat", repos: &[] }),
        c("installation_repositories/added.1.json", "installation_repositories.added", "", 0, "Codertocat", InstallRepos { id: 957387, account: "Codertocat", added: &["Codertocat/Space"], removed: &[] }),
        c("installation_repositories/added.2.json", "installation_repositories.added", "", 0, "Codertocat", InstallRepos { id: 957387, account: "Codertocat", added: &["Codertocat/Space"], removed: &[] }),
        c("installation_repositories/removed.1.json", "installation_repositories.removed", "", 0, "octocat", InstallRepos { id: 2, account: "octocat", added: &[], removed: &["octocat/Hello-World"] }),
        c("issue_comment/created.1.json", "issue_comment.created", "Codertocat/Hello-World", 1, "Codertocat", Comment { is_pr: false, body: "You are totally right! I" }),
        c("issue_comment/created.2.json", "issue_comment.created", "Codertocat/Hello-World", 1, "Codertocat", Comment { is_pr: false, body: "You are totally right! I" }),
        c("issue_comment/created.3.json", "issue_comment.created", "Codertocat/Hello-World", 1, "Codertocat", Comment { is_pr: false, body: "You are totally right! I" }),
        c("issue_comment/created.4.json", "issue_comment.created", "Codertocat/Hello-World", 1, "Codertocat", Comment { is_pr: false, body: "You are totally right! I" }),
        c("issue_comment/created.5.json", "issue_comment.created", "Codertocat/Hello-World", 1, "Codertocat", Comment { is_pr: false, body: "You are totally right! I" }),
        c("issue_comment/deleted.1.json", "issue_comment.deleted", "Codertocat/Hello-World", 1, "Codertocat", Comment { is_pr: false, body: "You are totally right! I" }),
        c("issue_comment/deleted.2.json", "issue_comment.deleted", "Codertocat/Hello-World", 1, "Codertocat", Comment { is_pr: false, body: "You are totally right! I" }),
        c("issue_comment/edited.1.json", "issue_comment.edited", "Codertocat/Hello-World", 1, "Codertocat", Comment { is_pr: false, body: "You are totally right! I" }),
        c("issue_comment/edited.2.json", "issue_comment.edited", "Codertocat/Hello-World", 1, "Codertocat", Comment { is_pr: false, body: "You are totally right! I" }),
        c("issues/assigned.1.json", "issues.assigned", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: Some("Codertocat") }),
        c("issues/assigned.2.json", "issues.assigned", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: Some("Codertocat") }),
        c("issues/assigned.3.json", "issues.assigned", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: Some("Codertocat") }),
        o("issues/deleted.1.json", "issues.deleted"),
        o("issues/demilestoned.1.json", "issues.demilestoned"),
        o("issues/demilestoned.2.json", "issues.demilestoned"),
        c("issues/edited.1.json", "issues.edited", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: None }),
        c("issues/edited.2.json", "issues.edited", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: None }),
        c("issues/edited.3.json", "issues.edited", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: None }),
        c("issues/labeled.1.json", "issues.labeled", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: Some("bug"), assignee: None }),
        c("issues/labeled.2.json", "issues.labeled", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: Some("bug"), assignee: None }),
        o("issues/locked.1.json", "issues.locked"),
        o("issues/locked.2.json", "issues.locked"),
        o("issues/milestoned.1.json", "issues.milestoned"),
        o("issues/milestoned.2.json", "issues.milestoned"),
        c("issues/opened.1.json", "issues.opened", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: None }),
        c("issues/opened.2.json", "issues.opened", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: None }),
        c("issues/opened.3.json", "issues.opened", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: None }),
        c("issues/opened.4.json", "issues.opened", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: None }),
        o("issues/pinned.1.json", "issues.pinned"),
        c("issues/reopened.1.json", "issues.reopened", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: None }),
        o("issues/transferred.1.json", "issues.transferred"),
        c("issues/unassigned.1.json", "issues.unassigned", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: Some("Codertocat") }),
        c("issues/unassigned.2.json", "issues.unassigned", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: Some("Codertocat") }),
        c("issues/unlabeled.1.json", "issues.unlabeled", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: Some("bug"), assignee: None }),
        c("issues/unlabeled.2.json", "issues.unlabeled", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: Some("bug"), assignee: None }),
        o("issues/unlocked.1.json", "issues.unlocked"),
        o("issues/unlocked.2.json", "issues.unlocked"),
        o("issues/unpinned.1.json", "issues.unpinned"),
        c("ping/none.1.json", "ping", "Octocoders/Hello-World", 0, "Codertocat", Ping { hook_id: Some(109948940) }),
        c("ping/none.2.json", "ping", "Octocoders/Hello-World", 0, "Codertocat", Ping { hook_id: Some(109948940) }),
        c("ping/none.3.json", "ping", "Octocoders/Hello-World", 0, "Codertocat", Ping { hook_id: Some(109948940) }),
        c("ping/none.4.json", "ping", "", 0, "Codertocat", Ping { hook_id: Some(109948940) }),
        c("pull_request/assigned.1.json", "pull_request.assigned", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/assigned.2.json", "pull_request.assigned", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/closed.1.json", "pull_request.closed", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/closed.2.json", "pull_request.closed", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        o("pull_request/converted_to_draft.1.json", "pull_request.converted_to_draft"),
        o("pull_request/converted_to_draft.2.json", "pull_request.converted_to_draft"),
        o("pull_request/converted_to_draft.3.json", "pull_request.converted_to_draft"),
        c("pull_request/labeled.1.json", "pull_request.labeled", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/labeled.2.json", "pull_request.labeled", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        o("pull_request/locked.1.json", "pull_request.locked"),
        o("pull_request/locked.2.json", "pull_request.locked"),
        c("pull_request/opened.1.json", "pull_request.opened", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/opened.2.json", "pull_request.opened", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/opened.3.json", "pull_request.opened", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/opened.4.json", "pull_request.opened", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        o("pull_request/ready_for_review.1.json", "pull_request.ready_for_review"),
        o("pull_request/ready_for_review.2.json", "pull_request.ready_for_review"),
        o("pull_request/ready_for_review.3.json", "pull_request.ready_for_review"),
        c("pull_request/reopened.1.json", "pull_request.reopened", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/reopened.2.json", "pull_request.reopened", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        o("pull_request/review_request_removed.1.json", "pull_request.review_request_removed"),
        c("pull_request/review_requested.1.json", "pull_request.review_requested", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/synchronize.1.json", "pull_request.synchronize", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/unassigned.1.json", "pull_request.unassigned", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/unassigned.2.json", "pull_request.unassigned", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/unlabeled.1.json", "pull_request.unlabeled", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/unlabeled.2.json", "pull_request.unlabeled", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        o("pull_request/unlocked.1.json", "pull_request.unlocked"),
        o("pull_request/unlocked.2.json", "pull_request.unlocked"),
        o("pull_request_review/dismissed.1.json", "pull_request_review.dismissed"),
        c("pull_request_review/submitted.1.json", "review.commented", "Codertocat/Hello-World", 2, "Codertocat", Review { id: Some(237895671), body: "" }),
        c("pull_request_review/submitted.2.json", "review.commented", "Codertocat/Hello-World", 2, "Codertocat", Review { id: Some(237895671), body: "" }),
        c("pull_request_review/submitted.3.json", "review.commented", "Codertocat/Hello-World", 2, "Codertocat", Review { id: Some(237895671), body: "" }),
        c("pull_request_review_comment/created.1.json", "review_comment.created", "Codertocat/Hello-World", 2, "Codertocat", Line { body: "Maybe you should use mor", path: "README.md", line: Some(1), reply: None }),
        c("pull_request_review_comment/created.2.json", "review_comment.created", "Codertocat/Hello-World", 2, "Codertocat", Line { body: "Maybe you should use mor", path: "README.md", line: Some(265), reply: None }),
        c("pull_request_review_comment/created.3.json", "review_comment.created", "Codertocat/Hello-World", 2, "Codertocat", Line { body: "Maybe you should use mor", path: "README.md", line: Some(265), reply: None }),
        c("pull_request_review_comment/deleted.1.json", "review_comment.deleted", "Codertocat/Hello-World", 2, "Codertocat", Line { body: "Maybe you should use mor", path: "README.md", line: Some(265), reply: None }),
        c("pull_request_review_comment/edited.1.json", "review_comment.edited", "Codertocat/Hello-World", 2, "Codertocat", Line { body: "Maybe you should use mor", path: "README.md", line: Some(265), reply: None }),
        o("push/none.1.json", "push"),
        o("push/none.2.json", "push"),
        o("push/none.3.json", "push"),
        o("push/none.4.json", "push"),
        o("push/none.5.json", "push"),
        o("push/none.6.json", "push"),
        o("push/none.7.json", "push"),
    ]
}

#[rustfmt::skip]
pub(crate) fn gitea_cases() -> Vec<Case> {
    vec![
        og("create", "drone-go-scm/branch_create.json", "create"),
        og("delete", "drone-go-scm/branch_delete.json", "delete"),
        g("issue_comment", "drone-go-scm/issue_comment_created.json", "issue_comment.created", "gogits/hello-world", 1, "unknwon", Comment { is_pr: false, body: "Got it" }),
        g("issue_comment", "drone-go-scm/issue_comment_deleted.json", "issue_comment.deleted", "gogits/hello-world", 1, "unknwon", Comment { is_pr: false, body: "Got it, chief" }),
        g("issue_comment", "drone-go-scm/issue_comment_edited.json", "issue_comment.edited", "gogits/hello-world", 1, "unknwon", Comment { is_pr: false, body: "Got it, chief" }),
        g("issues", "drone-go-scm/issues_closed.json", "issues.closed", "gogits/hello-world", 1, "unknwon", Issue { is_pr: false, label: None, assignee: None }),
        g("issues", "drone-go-scm/issues_opened.json", "issues.opened", "gogits/hello-world", 1, "unknwon", Issue { is_pr: false, label: None, assignee: None }),
        g("pull_request", "drone-go-scm/pull_request_closed.json", "pull_request.closed", "jcitizen/my-repo", 1, "jcitizen", Pr { head: "feature", base: "master", merged: false }),
        g("issue_comment", "drone-go-scm/pull_request_comment_created.json", "issue_comment.created", "gogits/hello-world", 2, "unknwon", Comment { is_pr: true, body: "run gofmt" }),
        g("issue_comment", "drone-go-scm/pull_request_comment_deleted.json", "issue_comment.deleted", "gogits/hello-world", 2, "unknwon", Comment { is_pr: true, body: "lgtm" }),
        g("issue_comment", "drone-go-scm/pull_request_comment_edited.json", "issue_comment.edited", "gogits/hello-world", 2, "unknwon", Comment { is_pr: true, body: "lgtm" }),
        g("pull_request", "drone-go-scm/pull_request_edited.json", "pull_request.edited", "jcitizen/my-repo", 1, "jcitizen", Pr { head: "feature", base: "master", merged: false }),
        g("pull_request", "drone-go-scm/pull_request_merged.json", "pull_request.merged", "jcitizen/my-repo", 1, "jcitizen", Pr { head: "feature", base: "master", merged: true }),
        g("pull_request", "drone-go-scm/pull_request_opened.json", "pull_request.opened", "jcitizen/my-repo", 1, "jcitizen", Pr { head: "feature", base: "master", merged: false }),
        g("pull_request", "drone-go-scm/pull_request_reopened.json", "pull_request.reopened", "jcitizen/my-repo", 1, "jcitizen", Pr { head: "feature", base: "master", merged: false }),
        g("pull_request", "drone-go-scm/pull_request_synchronized.json", "pull_request.synchronize", "jcitizen/my-repo", 1, "jcitizen", Pr { head: "feature", base: "master", merged: false }),
        og("push", "drone-go-scm/push.json", "push"),
        og("create", "drone-go-scm/tag_create.json", "create"),
        og("delete", "drone-go-scm/tag_delete.json", "delete"),
        g("pull_request", "woodpecker-forgejo/HookPullRequest.json", "pull_request.opened", "gordon/hello-world", 1, "gordon", Pr { head: "feature/changes", base: "main", merged: false }),
        g("pull_request", "woodpecker-forgejo/HookPullRequestAssigneeCleared.json", "pull_request.unassigned", "test_it/test_ci_thing", 1, "6543", Pr { head: "6543-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-forgejo/HookPullRequestAssigneesAdded.json", "pull_request.assigned", "test_it/test_ci_thing", 1, "6543", Pr { head: "6543-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-forgejo/HookPullRequestClosed.json", "pull_request.closed", "anbraten/test-repo", 1, "anbraten", Pr { head: "anbraten-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-forgejo/HookPullRequestEdited.json", "pull_request.edited", "anbraten/test-repo", 1, "anbraten", Pr { head: "anbraten-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-forgejo/HookPullRequestLabelAdded.json", "pull_request.labeled", "test_it/test_ci_thing", 1, "6543", Pr { head: "6543-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-forgejo/HookPullRequestLabelsCleared.json", "pull_request.unlabeled", "test_it/test_ci_thing", 1, "6543", Pr { head: "6543-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-forgejo/HookPullRequestLabelsUpdated.json", "pull_request.labeled", "test_it/test_ci_thing", 1, "6543", Pr { head: "6543-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-forgejo/HookPullRequestMerged.json", "pull_request.merged", "anbraten/test-repo", 1, "anbraten", Pr { head: "anbraten-patch-1", base: "main", merged: true }),
        og("pull_request", "woodpecker-forgejo/HookPullRequestMilestoneAdded.json", "pull_request.milestoned"),
        og("pull_request", "woodpecker-forgejo/HookPullRequestMilestoneChanged.json", "pull_request.milestoned"),
        og("pull_request", "woodpecker-forgejo/HookPullRequestMilestoneCleared.json", "pull_request.demilestoned"),
        g("pull_request", "woodpecker-forgejo/HookPullRequestReopened.json", "pull_request.reopened", "test_it/test_ci_thing", 1, "6543", Pr { head: "6543-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-forgejo/HookPullRequestUpdated.json", "pull_request.synchronize", "Test-CI/multi-line-secrets", 2, "test", Pr { head: "test-patch-1", base: "main", merged: false }),
        og("push", "woodpecker-forgejo/HookPush.json", "push"),
        og("push", "woodpecker-forgejo/HookPushBranch.json", "push"),
        og("push", "woodpecker-forgejo/HookPushMulti.json", "push"),
        og("release", "woodpecker-forgejo/HookRelease.json", "release.published"),
        og("create", "woodpecker-forgejo/HookTag.json", "create"),
        g("pull_request", "woodpecker-gitea/HookPullRequest.json", "pull_request.opened", "gordon/hello-world", 1, "gordon", Pr { head: "feature/changes", base: "main", merged: false }),
        g("pull_request", "woodpecker-gitea/HookPullRequestAddLabel.json", "pull_request.labeled", "a_nice_user/hello_world_ci", 7, "a_nice_user", Pr { head: "jony-patch-1", base: "main", merged: false }),
        og("pull_request", "woodpecker-gitea/HookPullRequestAddMile.json", "pull_request.milestoned"),
        g("pull_request", "woodpecker-gitea/HookPullRequestAddReviewRequest.json", "pull_request.review_requested", "a_nice_user/hello_world_ci", 7, "a_nice_user", Pr { head: "jony-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-gitea/HookPullRequestAssigneesAdded.json", "pull_request.assigned", "a_nice_user/hello_world_ci", 7, "a_nice_user", Pr { head: "jony-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-gitea/HookPullRequestAssigneesRemoved.json", "pull_request.unassigned", "a_nice_user/hello_world_ci", 7, "a_nice_user", Pr { head: "jony-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-gitea/HookPullRequestChangeBody.json", "pull_request.edited", "a_nice_user/hello_world_ci", 7, "a_nice_user", Pr { head: "jony-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-gitea/HookPullRequestChangeLabel.json", "pull_request.labeled", "a_nice_user/hello_world_ci", 7, "a_nice_user", Pr { head: "jony-patch-1", base: "main", merged: false }),
        og("pull_request", "woodpecker-gitea/HookPullRequestChangeMile.json", "pull_request.milestoned"),
        g("pull_request", "woodpecker-gitea/HookPullRequestChangeTitle.json", "pull_request.edited", "a_nice_user/hello_world_ci", 7, "a_nice_user", Pr { head: "jony-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-gitea/HookPullRequestClosed.json", "pull_request.closed", "anbraten/test-repo", 1, "anbraten", Pr { head: "anbraten-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-gitea/HookPullRequestMerged.json", "pull_request.merged", "anbraten/test-repo", 1, "anbraten", Pr { head: "anbraten-patch-1", base: "main", merged: true }),
        g("pull_request", "woodpecker-gitea/HookPullRequestRemoveLabel.json", "pull_request.unlabeled", "a_nice_user/hello_world_ci", 7, "a_nice_user", Pr { head: "jony-patch-1", base: "main", merged: false }),
        og("pull_request", "woodpecker-gitea/HookPullRequestRemoveMile.json", "pull_request.demilestoned"),
        g("pull_request", "woodpecker-gitea/HookPullRequestReopened.json", "pull_request.reopened", "test_it/test_ci_thing", 1, "6543", Pr { head: "6543-patch-1", base: "main", merged: false }),
        g("pull_request_approved", "woodpecker-gitea/HookPullRequestReviewAck.json", "review.approved", "a_nice_user/hello_world_ci", 7, "a_nice_user", Review { id: None, body: "juhu thats a great idea" }),
        g("pull_request_comment", "woodpecker-gitea/HookPullRequestReviewComment.json", "review.commented", "a_nice_user/hello_world_ci", 7, "a_nice_user", Review { id: None, body: "and somethimes you have " }),
        g("pull_request_rejected", "woodpecker-gitea/HookPullRequestReviewDeny.json", "review.changes_requested", "a_nice_user/hello_world_ci", 7, "a_nice_user", Review { id: None, body: "I decided otherwhies :O" }),
        g("pull_request", "woodpecker-gitea/HookPullRequestUpdated.json", "pull_request.synchronize", "Test-CI/multi-line-secrets", 2, "test", Pr { head: "test-patch-1", base: "main", merged: false }),
        og("push", "woodpecker-gitea/HookPush.json", "push"),
        og("push", "woodpecker-gitea/HookPushBranch.json", "push"),
        og("push", "woodpecker-gitea/HookPushMulti.json", "push"),
        og("release", "woodpecker-gitea/HookRelease.json", "release.published"),
        og("create", "woodpecker-gitea/HookTag.json", "create"),
    ]
}
