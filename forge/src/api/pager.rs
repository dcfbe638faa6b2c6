//! Lists read to their end, a page at a time, each forge its way:
//!
//! - GitHub answers at most 100 items a page and names the next page in
//!   its `Link` header (`<…>; rel="next"`); the list ends when there is
//!   none. The next page's URL must be under the API's own URL: the
//!   client's token goes with the request.
//! - Gitea answers `limit` items a page (at most its `MAX_RESPONSE_ITEMS`,
//!   50 by default, whatever was asked) of page `page`, and the whole
//!   list's length in `X-Total-Count`; the list ends when that many were
//!   read or a page comes back empty. Without the count, a page shorter
//!   than the first one is the last.
//!
//! No list is read past [`MAX_PAGES`] pages: a warning names the list
//! and the repository when that bound cuts one short.

use url::Url;

use super::{ForgeError, RepoRef};

/// The most pages of one list read in one call: 5,000 items on GitHub,
/// 2,500 on a Gitea with its default page size.
pub const MAX_PAGES: usize = 50;

/// The lists the clients read, named in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum List {
    IssueComments,
    Reviews,
    ReviewComments,
    OpenPullRequests,
}

impl List {
    pub fn as_str(self) -> &'static str {
        match self {
            List::IssueComments => "issue comments",
            List::Reviews => "pull request reviews",
            List::ReviewComments => "review comments",
            List::OpenPullRequests => "open pull requests",
        }
    }
}

/// Counts the pages of one list against [`MAX_PAGES`].
pub(crate) struct Bound {
    list: List,
    repo: String,
    number: Option<u64>,
    pages: usize,
}

impl Bound {
    /// `number`: the issue or pull request the list is of, if any.
    pub fn new(list: List, repo: &RepoRef, number: Option<u64>) -> Self {
        Bound {
            list,
            repo: repo.full_name(),
            number,
            pages: 0,
        }
    }

    /// Whether one more page may be read; when not, says so in the log.
    /// `read` is how many items the pages so far held.
    pub fn another(&mut self, read: usize) -> bool {
        if self.pages >= MAX_PAGES {
            tracing::warn!(
                list = self.list.as_str(),
                repo = %self.repo,
                number = self.number,
                pages = self.pages,
                read,
                "stopped reading a list at its page limit: what follows is not seen"
            );
            return false;
        }
        self.pages += 1;
        true
    }
}

/// Where Gitea's next page is, from what the pages so far held.
#[derive(Default)]
pub(crate) struct GiteaPages {
    /// The length of the first page: the server's page size, whatever
    /// was asked for.
    first: Option<usize>,
    read: usize,
}

impl GiteaPages {
    /// After page `page` held `got` items and the answer said the list
    /// has `total`: the page to read next, if any.
    pub fn after(&mut self, page: u32, got: usize, total: Option<usize>) -> Option<u32> {
        self.read += got;
        let first = *self.first.get_or_insert(got);
        if got == 0 {
            return None;
        }
        match total {
            Some(total) if self.read >= total => None,
            Some(_) => Some(page + 1),
            // No count: a page shorter than the first is the last (the
            // first may be short because the server pages by fewer).
            None if page > 1 && got < first => None,
            None => Some(page + 1),
        }
    }
}

/// The `rel="next"` target of a `Link` header, as the path and query to
/// ask the API for. `api` is the API's URL (`https://api.github.com`,
/// `https://host/api/v3`); a next page anywhere else (another host,
/// scheme or port, or outside the API's path) is refused, not followed.
pub(crate) fn next_link(call: &str, header: &str, api: &Url) -> Result<Option<String>, ForgeError> {
    let Some(target) = link_with_rel(header, "next") else {
        return Ok(None);
    };
    let refused =
        |why: &str| ForgeError::Malformed(format!("{call}: the next page {why}; not followed"));
    let url = api.join(target).map_err(|_| refused("is not a URL"))?;
    let same_origin = url.scheme() == api.scheme()
        && url.host_str() == api.host_str()
        && url.port_or_known_default() == api.port_or_known_default();
    if !same_origin {
        return Err(refused("is on another server"));
    }
    let base = api.path().trim_end_matches('/');
    let path = url.path();
    if !(base.is_empty() || path == base || path.starts_with(&format!("{base}/"))) {
        return Err(refused("is outside the API"));
    }
    Ok(Some(match url.query() {
        Some(query) => format!("{path}?{query}"),
        None => path.to_owned(),
    }))
}

/// The target of the first link whose `rel` names `rel` (RFC 8288: the
/// value may be quoted and hold several space-separated relations).
fn link_with_rel<'h>(header: &'h str, rel: &str) -> Option<&'h str> {
    let mut rest = header;
    while let Some(open) = rest.find('<') {
        let after = &rest[open + 1..];
        let close = after.find('>')?;
        let target = &after[..close];
        let params = &after[close + 1..];
        // This link's parameters end where the next link begins.
        let end = params.find('<').unwrap_or(params.len());
        let named = params[..end].split([';', ',']).any(|param| {
            let Some((name, value)) = param.split_once('=') else {
                return false;
            };
            name.trim().eq_ignore_ascii_case("rel")
                && value
                    .trim()
                    .trim_matches('"')
                    .split_whitespace()
                    .any(|r| r.eq_ignore_ascii_case(rel))
        });
        if named {
            return Some(target);
        }
        rest = &params[end..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first answer of the recorded real exchange
    /// (`octokit-fixtures/paginate-issues.json`): GitHub's next page is
    /// under `/repositories/{id}`, not the path that was asked.
    const RECORDED: &str = "<https://api.github.com/repositories/1000/issues?per_page=3&page=2>; rel=\"next\", <https://api.github.com/repositories/1000/issues?per_page=3&page=5>; rel=\"last\"";
    const CALL: &str = "GET /repos/o/r/issues";

    fn api(url: &str) -> Url {
        Url::parse(url).unwrap()
    }

    #[test]
    fn the_next_page_is_read_from_githubs_link_header() {
        let github = api("https://api.github.com");
        assert_eq!(
            next_link(CALL, RECORDED, &github).unwrap().as_deref(),
            Some("/repositories/1000/issues?per_page=3&page=2")
        );
        let middle = "<https://api.github.com/r?page=1>; rel=\"prev\", <https://api.github.com/r?page=3>; rel=\"next\", <https://api.github.com/r?page=5>; rel=\"last\", <https://api.github.com/r?page=1>; rel=\"first\"";
        assert_eq!(
            next_link(CALL, middle, &github).unwrap().as_deref(),
            Some("/r?page=3")
        );
        let last = "<https://api.github.com/r?page=4>; rel=\"prev\", <https://api.github.com/r?page=1>; rel=\"first\"";
        assert_eq!(next_link(CALL, last, &github).unwrap(), None);
        // Unquoted, several relations, a comma in the URL.
        let odd = "<https://api.github.com/r?labels=a,b&page=2>; rel=next last";
        assert_eq!(
            next_link(CALL, odd, &github).unwrap().as_deref(),
            Some("/r?labels=a,b&page=2")
        );
        // An Enterprise server's API lives under a path.
        let enterprise = api("https://ghe.example.com/api/v3");
        let link = "<https://ghe.example.com/api/v3/repositories/7/issues/1/comments?page=2>; rel=\"next\"";
        assert_eq!(
            next_link(CALL, link, &enterprise).unwrap().as_deref(),
            Some("/api/v3/repositories/7/issues/1/comments?page=2")
        );
    }

    #[test]
    fn a_next_page_anywhere_but_the_api_is_refused() {
        let github = api("https://api.github.com");
        for link in [
            "<https://evil.example/steal?page=2>; rel=\"next\"",
            "<http://api.github.com/r?page=2>; rel=\"next\"",
            "<https://api.github.com:8443/r?page=2>; rel=\"next\"",
            "<https://api.github.com.evil.example/r?page=2>; rel=\"next\"",
        ] {
            let error = next_link(CALL, link, &github).unwrap_err();
            assert!(
                matches!(error, ForgeError::Malformed(_)),
                "{link}: {error:?}"
            );
            assert!(error.to_string().contains("not followed"), "{error}");
        }
        let enterprise = api("https://ghe.example.com/api/v3");
        for link in [
            "<https://ghe.example.com/login?page=2>; rel=\"next\"",
            "<https://ghe.example.com/api/v3x/r?page=2>; rel=\"next\"",
        ] {
            assert!(next_link(CALL, link, &enterprise).is_err(), "{link}");
        }
    }

    #[test]
    fn gitea_pages_end_at_the_total_at_an_empty_page_or_at_a_short_one() {
        let mut pages = GiteaPages::default();
        assert_eq!(pages.after(1, 50, Some(61)), Some(2));
        assert_eq!(pages.after(2, 11, Some(61)), None);
        // A server that pages by 20 although 50 were asked, with a count.
        let mut pages = GiteaPages::default();
        assert_eq!(pages.after(1, 20, Some(45)), Some(2));
        assert_eq!(pages.after(2, 20, Some(45)), Some(3));
        assert_eq!(pages.after(3, 5, Some(45)), None);
        // Without a count: a short first page may be the server's page
        // size; a shorter page after it, or an empty one, ends the list.
        let mut pages = GiteaPages::default();
        assert_eq!(pages.after(1, 20, None), Some(2));
        assert_eq!(pages.after(2, 20, None), Some(3));
        assert_eq!(pages.after(3, 7, None), None);
        let mut pages = GiteaPages::default();
        assert_eq!(pages.after(1, 20, None), Some(2));
        assert_eq!(pages.after(2, 0, None), None);
        // A count that never comes true ends at an empty page.
        let mut pages = GiteaPages::default();
        assert_eq!(pages.after(1, 0, Some(10)), None);
    }

    #[test]
    fn the_page_bound_stops_a_list_and_says_which() {
        let logs = capture(|| {
            let mut bound = Bound::new(List::IssueComments, &RepoRef::new("acme", "demo"), Some(7));
            for _ in 0..MAX_PAGES {
                assert!(bound.another(0));
            }
            assert!(!bound.another(5000));
        });
        assert!(
            logs.contains("page limit")
                && logs.contains("issue comments")
                && logs.contains("acme/demo")
                && logs.contains("read=5000"),
            "{logs}"
        );
    }

    /// What `f` logged.
    fn capture(f: impl FnOnce()) -> String {
        use std::sync::{Arc, Mutex};
        #[derive(Clone, Default)]
        struct Buffer(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buffer {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        let bytes = buffer.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }
}
