//! GitHub App installation events, as GitHub sent them (the payloads in
//! ../shared/testdata), are recorded: which accounts installed the App and
//! which repositories it can reach, shown by `GET /api/installations`.

use forgehand_tests::harness::TestServer;
use forgehand_tests::testdata;
use serde_json::{json, Value};

fn payload(path: &str) -> Vec<u8> {
    std::fs::read(testdata::root().join("github/webhook-examples").join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

async fn installations(server: &TestServer) -> Value {
    server.api_get("/api/installations").await["installations"].clone()
}

fn brief(rows: &Value) -> Vec<(i64, String, String, Vec<String>)> {
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["id"].as_i64().unwrap(),
                r["account"].as_str().unwrap().to_owned(),
                r["state"].as_str().unwrap().to_owned(),
                r["repositories"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_owned())
                    .collect(),
            )
        })
        .collect()
}

#[tokio::test]
async fn installation_events_record_what_the_app_can_reach() {
    let server = TestServer::start().await;
    let created = server
        .post_github(
            "installation",
            "inst-1",
            payload("installation/created.1.json"),
        )
        .await;
    assert_eq!(created.status, 202, "{}", created.body);
    assert_eq!(created.body["outcome"], "accepted");
    assert_eq!(created.body["jobs"], json!([]));
    assert_eq!(
        brief(&installations(&server).await),
        [(
            957387,
            "Codertocat".into(),
            "active".into(),
            vec!["Codertocat/Hello-World".into()]
        )]
    );

    let added = server
        .post_github(
            "installation_repositories",
            "inst-2",
            payload("installation_repositories/added.1.json"),
        )
        .await;
    assert_eq!(added.status, 202, "{}", added.body);
    assert_eq!(
        brief(&installations(&server).await)[0].3,
        ["Codertocat/Hello-World", "Codertocat/Space"]
    );

    // Another installation (octocat's, id 2): created by its deletion
    // event's record, then its repository removed.
    let deleted = server
        .post_github(
            "installation",
            "inst-3",
            payload("installation/deleted.1.json"),
        )
        .await;
    assert_eq!(deleted.status, 202, "{}", deleted.body);
    let removed = server
        .post_github(
            "installation_repositories",
            "inst-4",
            payload("installation_repositories/removed.1.json"),
        )
        .await;
    assert_eq!(removed.status, 202, "{}", removed.body);
    let rows = brief(&installations(&server).await);
    assert_eq!(rows.len(), 2, "{rows:?}");
    let octocat = rows.iter().find(|r| r.0 == 2).expect("installation 2");
    assert_eq!(octocat.1, "octocat");
    assert_eq!(octocat.2, "deleted");
    assert!(octocat.3.is_empty(), "{rows:?}");

    // A redelivery changes nothing and is answered 200.
    let again = server
        .post_github(
            "installation",
            "inst-1",
            payload("installation/created.1.json"),
        )
        .await;
    assert_eq!(again.status, 200);
    let rows = brief(&installations(&server).await);
    assert_eq!(
        rows.iter().find(|r| r.0 == 957387).unwrap().3,
        ["Codertocat/Hello-World", "Codertocat/Space"],
        "a redelivered creation does not reset the repositories added since"
    );
}
