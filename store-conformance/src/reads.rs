//! What the operator API reads: listings, filters, pages.

use forgehand_store::{DeliveryQuery, JobQuery, JobState, Outcome};
use forgehand_types::ForgeKind;

use crate::fixtures::*;
use crate::Backend;

pub async fn deliveries_are_listed_newest_first_and_filtered(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let mut gitea = delivery("g", Outcome::Ignored, 0);
    gitea.forge = ForgeKind::Gitea;
    store
        .record_deliveries(&[
            delivery("a", Outcome::Accepted, 1),
            delivery("r", Outcome::Rejected, 0),
            gitea,
            delivery("b", Outcome::Accepted, 0),
        ])
        .await
        .unwrap();
    let ids = |rows: Vec<forgehand_store::DeliveryRow>| {
        rows.into_iter()
            .map(|r| r.delivery_id.unwrap())
            .collect::<Vec<_>>()
    };
    let query = |forge: Option<&str>, outcome, before, limit| DeliveryQuery {
        forge: forge.map(Into::into),
        outcome,
        before,
        limit,
    };
    let all = store
        .list_deliveries(&query(None, None, None, 10))
        .await
        .unwrap();
    let first_row = all[3].id;
    let a = &all[3];
    assert_eq!(
        (
            a.forge.as_str(),
            a.event.as_deref(),
            a.event_name.as_deref()
        ),
        ("github", Some("issues"), Some("issues.labeled"))
    );
    assert_eq!(
        (a.repo.as_deref(), a.target, a.sender.as_deref()),
        (Some("acme/widgets"), Some(1), Some("maintainer"))
    );
    assert_eq!(ids(all), ["b", "g", "r", "a"]);
    let got = store
        .list_deliveries(&query(Some("gitea"), None, None, 10))
        .await
        .unwrap();
    assert_eq!(ids(got), ["g"]);
    let got = store
        .list_deliveries(&query(None, Some(Outcome::Accepted), None, 10))
        .await
        .unwrap();
    assert_eq!(ids(got), ["b", "a"]);
    let page = store
        .list_deliveries(&query(None, None, None, 2))
        .await
        .unwrap();
    let before = page.last().unwrap().id;
    assert_eq!(ids(page), ["b", "g"]);
    let next = store
        .list_deliveries(&query(None, None, Some(before), 2))
        .await
        .unwrap();
    assert_eq!(ids(next), ["r", "a"]);
    let none = store
        .list_deliveries(&query(None, None, Some(first_row), 2))
        .await
        .unwrap();
    assert!(none.is_empty());
}

pub async fn jobs_are_listed_by_state_and_paged(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let ids = enqueue_labeled(&*store, &[1, 2, 3]).await;
    let running = claim(&*store).await.unwrap();
    let query = |state, before, limit| JobQuery {
        state,
        before,
        limit,
    };
    let listed = |rows: Vec<forgehand_store::JobRow>| rows.iter().map(|j| j.id).collect::<Vec<_>>();
    let all = store.list_jobs(&query(None, None, 10)).await.unwrap();
    assert_eq!(listed(all.clone()), [ids[2], ids[1], ids[0]]);
    let row = &all[2];
    assert_eq!(row.kind, forgehand_store::job::JobKind::Labeled);
    assert_eq!(row.target_key.as_str(), "github:acme/widgets#1");
    assert_eq!(row.payload, serde_json::to_value(labeled(1)).unwrap());
    assert_eq!((row.attempts, row.max_attempts), (1, 5));
    assert!(row.delivery.is_some() && row.created_at > 0 && row.updated_at >= row.created_at);
    let queued = store
        .list_jobs(&query(Some(JobState::Queued), None, 10))
        .await
        .unwrap();
    assert_eq!(listed(queued), [ids[2], ids[1]]);
    let running_rows = store
        .list_jobs(&query(Some(JobState::Running), None, 10))
        .await
        .unwrap();
    assert_eq!(listed(running_rows), [running.id]);
    let paged = store
        .list_jobs(&query(None, Some(ids[2]), 1))
        .await
        .unwrap();
    assert_eq!(listed(paged), [ids[1]]);
}

pub async fn what_is_not_there_reads_as_none(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    store.ping().await.unwrap();
    assert!(store.job(JobId(999)).await.unwrap().is_none());
    assert!(store.delivery_payload(999).await.unwrap().is_none());
    assert!(store.stop_requested(JobId(999)).await.unwrap().is_none());
    assert!(store.installations().await.unwrap().is_empty());
    assert!(store
        .target_history(&target_7(), 10)
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .supersede_waiting(&target_7(), JobId(5))
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .request_stop(&target_7(), JobId(5), "stopped")
        .await
        .unwrap()
        .is_empty());
    let nothing = store.recover_expired_leases().await.unwrap();
    assert_eq!((nothing.requeued, nothing.dead.len()), (0, 0));
}
