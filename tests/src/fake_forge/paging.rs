//! Lists served in pages, as the real forges serve them. Which lists are
//! paged is the API description's word: an operation that declares
//! `per_page` (GitHub) or `limit` (Gitea) gets one page of the list its
//! route answered with, and the headers that say where the others are.
//!
//! - GitHub: `per_page` is 30 unless given and at most 100, `page` counts
//!   from 1, and `Link` names the `prev`, `next`, `last` and `first` pages
//!   when there is more than one, as in the recorded real exchange
//!   `octokit-fixtures/paginate-issues.json`.
//! - Gitea: `limit` is 30 unless given and at most 50 (the defaults of
//!   `[api] DEFAULT_PAGING_NUM` and `MAX_RESPONSE_ITEMS`), `page` counts
//!   from 1 (0 is the first page too), `X-Total-Count` is the length of
//!   the whole list and `Link` is what Gitea's `SetLinkHeader` writes.

use serde_json::Value;

/// One page of a list and the headers that go with it.
pub(super) struct Page {
    pub items: Vec<Value>,
    pub headers: Vec<(&'static str, String)>,
}

/// Where the list was asked for: the absolute URL the `Link` header's
/// pages are built from.
pub(super) struct Asked<'a> {
    /// `http://127.0.0.1:<port>`, from the request's `Host`.
    pub origin: &'a str,
    pub path: &'a str,
    /// The query, decoded, in order.
    pub query: &'a [(String, String)],
}

impl Asked<'_> {
    fn param(&self, name: &str) -> Option<i64> {
        self.query
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.parse().ok())
    }

    /// This URL with `page` set to `page`.
    fn url_of(&self, page: usize) -> String {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        let mut set = false;
        for (name, value) in self.query {
            if name == "page" {
                query.append_pair("page", &page.to_string());
                set = true;
            } else {
                query.append_pair(name, value);
            }
        }
        if !set {
            query.append_pair("page", &page.to_string());
        }
        format!("{}{}?{}", self.origin, self.path, query.finish())
    }
}

const GITHUB_DEFAULT: usize = 30;
const GITHUB_MAX: usize = 100;
const GITEA_DEFAULT: usize = 30;
const GITEA_MAX: usize = 50;

/// The page `asked` names of `items`, GitHub's way.
pub(super) fn github(items: Vec<Value>, asked: &Asked<'_>) -> Page {
    let size = match asked.param("per_page") {
        Some(n) if n >= 1 => (n as usize).min(GITHUB_MAX),
        _ => GITHUB_DEFAULT,
    };
    let page = asked.param("page").filter(|&p| p >= 1).unwrap_or(1) as usize;
    let last = items.len().div_ceil(size).max(1);
    let mut links = Vec::new();
    if page > 1 {
        links.push((page.min(last + 1) - 1, "prev"));
    }
    if page < last {
        links.push((page + 1, "next"));
        links.push((last, "last"));
    }
    if page > 1 {
        links.push((1, "first"));
    }
    let mut headers = Vec::new();
    if !links.is_empty() {
        headers.push(("link", link_header(asked, &links, ", ")));
    }
    Page {
        items: slice(items, page, size),
        headers,
    }
}

/// The page `asked` names of `items`, Gitea's way.
pub(super) fn gitea(items: Vec<Value>, asked: &Asked<'_>) -> Page {
    let size = match asked.param("limit") {
        Some(n) if n >= 1 => (n as usize).min(GITEA_MAX),
        _ => GITEA_DEFAULT,
    };
    let page = asked.param("page").filter(|&p| p >= 1).unwrap_or(1) as usize;
    let total = items.len();
    let last = total.div_ceil(size).max(1);
    let mut links = Vec::new();
    if page < last {
        links.push((page + 1, "next"));
        links.push((last, "last"));
    }
    if page > 1 {
        links.push((1, "first"));
        links.push((page.min(last + 1) - 1, "prev"));
    }
    let mut headers = vec![("x-total-count", total.to_string())];
    if !links.is_empty() {
        headers.push(("link", link_header(asked, &links, ",")));
    }
    headers.push((
        "access-control-expose-headers",
        "X-Total-Count, Link".to_owned(),
    ));
    Page {
        items: slice(items, page, size),
        headers,
    }
}

/// A Gitea list its API does not page (an issue's comments): all of it,
/// with its length in `X-Total-Count`, as Gitea's `ListIssueComments`
/// answers.
pub(super) fn gitea_whole(items: Vec<Value>) -> Page {
    let total = items.len().to_string();
    Page {
        items,
        headers: vec![
            ("x-total-count", total),
            ("access-control-expose-headers", "X-Total-Count".to_owned()),
        ],
    }
}

fn slice(items: Vec<Value>, page: usize, size: usize) -> Vec<Value> {
    items
        .into_iter()
        .skip((page - 1).saturating_mul(size))
        .take(size)
        .collect()
}

fn link_header(asked: &Asked<'_>, links: &[(usize, &str)], separator: &str) -> String {
    links
        .iter()
        .map(|(page, rel)| format!("<{}>; rel=\"{rel}\"", asked.url_of(*page)))
        .collect::<Vec<_>>()
        .join(separator)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn numbers(n: usize) -> Vec<Value> {
        (1..=n).map(|i| json!(i)).collect()
    }

    fn asked(query: &[(&str, &str)]) -> Vec<(String, String)> {
        query
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// Every answer of the recorded real exchange
    /// (`octokit-fixtures/paginate-issues.json`: 13 issues, 3 a page):
    /// the same items per page and the same `Link` header.
    #[test]
    fn github_pages_as_the_recorded_exchange_does() {
        let recorded = crate::testdata::json("github/octokit-fixtures/paginate-issues.json");
        let exchanges = recorded.as_array().unwrap();
        let total: usize = exchanges
            .iter()
            .map(|e| e["response"].as_array().unwrap().len())
            .sum();
        assert_eq!(total, 13);
        for exchange in exchanges {
            let path = exchange["path"].as_str().unwrap();
            let (_, query) = path.split_once('?').unwrap();
            let query: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
                .into_owned()
                .collect();
            // GitHub's links name the repository by id; so do these.
            let page = github(
                numbers(total),
                &Asked {
                    origin: "https://api.github.com",
                    path: "/repositories/1000/issues",
                    query: &query,
                },
            );
            assert_eq!(
                page.items.len(),
                exchange["response"].as_array().unwrap().len(),
                "{path}"
            );
            assert_eq!(
                page.headers,
                [(
                    "link",
                    exchange["headers"]["link"].as_str().unwrap().to_owned()
                )],
                "{path}"
            );
        }
    }

    #[test]
    fn github_caps_per_page_at_100_and_sends_no_link_for_one_page() {
        let query = asked(&[("per_page", "500")]);
        let at = Asked {
            origin: "http://x",
            path: "/l",
            query: &query,
        };
        let page = github(numbers(150), &at);
        assert_eq!(page.items.len(), 100);
        assert!(page.headers[0].1.contains("page=2>; rel=\"next\""));
        let one = github(numbers(20), &at);
        assert_eq!((one.items.len(), one.headers.len()), (20, 0));
        let default = github(numbers(150), &Asked { query: &[], ..at });
        assert_eq!(default.items.len(), 30);
    }

    #[test]
    fn gitea_caps_limit_at_50_and_counts_the_whole_list() {
        let query = asked(&[("state", "open"), ("limit", "100")]);
        let at = Asked {
            origin: "http://x",
            path: "/api/v1/repos/a/b/pulls",
            query: &query,
        };
        let first = gitea(numbers(61), &at);
        assert_eq!(first.items.len(), 50, "Gitea's MAX_RESPONSE_ITEMS");
        assert_eq!(first.headers[0], ("x-total-count", "61".to_owned()));
        assert_eq!(
            first.headers[1].1,
            "<http://x/api/v1/repos/a/b/pulls?state=open&limit=100&page=2>; rel=\"next\",<http://x/api/v1/repos/a/b/pulls?state=open&limit=100&page=2>; rel=\"last\""
        );
        let query = asked(&[("state", "open"), ("limit", "50"), ("page", "2")]);
        let second = gitea(
            numbers(61),
            &Asked {
                query: &query,
                ..at
            },
        );
        assert_eq!(second.items, numbers(61)[50..].to_vec());
        let past = asked(&[("page", "9")]);
        assert!(gitea(numbers(61), &Asked { query: &past, ..at })
            .items
            .is_empty());
    }
}
