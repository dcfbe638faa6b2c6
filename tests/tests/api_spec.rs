//! The API-description checker the fake forges use: it must accept what
//! the real APIs accept and refuse what they refuse, on both descriptions.

use forgehand_tests::api_spec::ApiSpec;
use forgehand_tests::testdata;
use serde_json::json;

fn gitea() -> ApiSpec {
    ApiSpec::load(
        &testdata::root().join("gitea/gitea-swagger-v1.22.json"),
        "/api/v1",
    )
    .unwrap()
}

fn github() -> ApiSpec {
    ApiSpec::load(&testdata::root().join("github/github-rest-subset.json"), "").unwrap()
}

#[test]
fn gitea_requests_are_matched_and_checked() {
    let spec = gitea();
    let ok = spec
        .check(
            "POST",
            "/api/v1/repos/acme/demo/issues/3/comments",
            None,
            Some(&json!({"body": "hi"})),
        )
        .unwrap();
    assert_eq!(ok.template, "/repos/{owner}/{repo}/issues/{index}/comments");
    let comments = spec
        .check("GET", "/api/v1/repos/acme/demo/issues/comments", None, None)
        .unwrap();
    assert_eq!(
        comments.template, "/repos/{owner}/{repo}/issues/comments",
        "the literal path wins"
    );
    for (method, path, body, expected) in [
        (
            "POST",
            "/api/v1/repos/acme/demo/issues/x/comments",
            Some(json!({"body": "hi"})),
            "must be an integer",
        ),
        (
            "POST",
            "/api/v1/repos/acme/demo/issues/3/comments",
            Some(json!({"body": 5})),
            "does not match",
        ),
        (
            "POST",
            "/api/v1/repos/acme/demo/issues/3/comments",
            Some(json!({"text": "hi"})),
            "does not match",
        ),
        (
            "PUT",
            "/api/v1/repos/acme/demo/issues/3/comments",
            None,
            "allows only",
        ),
        (
            "GET",
            "/api/v1/repos/acme/demo/nonsense",
            None,
            "no such path",
        ),
    ] {
        let error = spec.check(method, path, None, body.as_ref()).unwrap_err();
        assert!(error.contains(expected), "{method} {path}: {error}");
    }
}

#[test]
fn github_requests_are_matched_and_checked() {
    let spec = github();
    spec.check(
        "POST",
        "/repos/acme/demo/pulls",
        None,
        Some(&json!({"title": "Fix", "head": "forgehand/1-fix", "base": "main", "body": "Closes #1"})),
    )
    .unwrap();
    spec.check(
        "POST",
        "/repos/acme/demo/issues/1/reactions",
        None,
        Some(&json!({"content": "eyes"})),
    )
    .unwrap();
    let error = spec
        .check(
            "POST",
            "/repos/acme/demo/issues/1/reactions",
            None,
            Some(&json!({"content": "eyeballs"})),
        )
        .unwrap_err();
    assert!(error.contains("does not match"), "{error}");
    let error = spec
        .check(
            "POST",
            "/repos/acme/demo/pulls",
            None,
            Some(&json!({"title": "Fix", "base": "main"})),
        )
        .unwrap_err();
    assert!(
        error.contains("head"),
        "a required field is missing: {error}"
    );
    spec.check(
        "GET",
        "/repos/acme/demo/pulls",
        Some("state=open&head=acme:forgehand/1-fix"),
        None,
    )
    .unwrap();
    let error = spec
        .check("GET", "/repos/acme/demo/pulls", Some("colour=red"), None)
        .unwrap_err();
    assert!(error.contains("unknown query parameter colour"), "{error}");
}
