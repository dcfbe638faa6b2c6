//! Whether Forgehand answered the forge's test delivery: read back from
//! Forgehand's own record of deliveries (the operator API at
//! `server.public_url`), which says what it answered and why.

use std::time::Duration;

use secrecy::ExposeSecret;
use serde::Deserialize;

use crate::config::Config;

use super::Stop;

/// How long the forge may take to deliver.
const WAIT: Duration = Duration::from_secs(30);

#[derive(Deserialize)]
struct Deliveries {
    deliveries: Vec<Seen>,
}

#[derive(Deserialize)]
struct Seen {
    forge: String,
    event: Option<String>,
    outcome: String,
    reason: Option<String>,
    repo: Option<String>,
    received_at: i64,
}

/// What a test delivery is known by.
pub struct Expected<'a> {
    /// `github`, or `gitea` (which Forgejo's count as).
    pub family: &'a str,
    /// The event header's value: `ping` (GitHub), `push` (Gitea's test).
    pub event: &'a str,
    /// The repository, when the forge's payload names it.
    pub repo: Option<&'a str>,
    /// Unix ms before the delivery was asked for.
    pub since: i64,
}

/// Waits until Forgehand has recorded the delivery; `Ok` with what it
/// answered when accepted or ignored (both are 202), `Err` when it
/// refused it or nothing came.
pub async fn answered(config: &Config, expected: &Expected<'_>) -> Result<String, Stop> {
    let base = config
        .server
        .public_url()
        .ok_or_else(|| Stop("server.public_url is not set".into()))?;
    let token = config.api.token.as_ref().ok_or_else(|| {
        Stop("the test delivery was sent, but whether Forgehand answered it cannot be read: set api.token (the operator API) so that setup can check".into())
    })?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| Stop(e.to_string()))?;
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut last_problem = None;
    loop {
        match http
            .get(format!("{base}/api/deliveries?limit=100"))
            .bearer_auth(token.expose_secret())
            .send()
            .await
        {
            Ok(r) if r.status().is_success() => match r.json::<Deliveries>().await {
                Ok(list) => {
                    if let Some(seen) = list.deliveries.iter().find(|d| matches(d, expected)) {
                        return match seen.outcome.as_str() {
                            "rejected" => Err(Stop(format!(
                                "Forgehand refused the test delivery: {} (is the webhook's secret one of {}.webhook_secret?)",
                                seen.reason.as_deref().unwrap_or("no reason recorded"),
                                expected.family
                            ))),
                            outcome => Ok(outcome.to_owned()),
                        };
                    }
                }
                Err(e) => last_problem = Some(format!("the operator API's answer: {e}")),
            },
            Ok(r) => last_problem = Some(format!("the operator API answered {}", r.status())),
            Err(e) => last_problem = Some(format!("the operator API at {base}: {e}")),
        }
        if tokio::time::Instant::now() > deadline {
            return Err(Stop(format!(
                "Forgehand has no record of the test delivery after {} s{}: is the webhook's URL reachable from the forge?",
                WAIT.as_secs(),
                last_problem.map(|p| format!(" ({p})")).unwrap_or_default()
            )));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn matches(seen: &Seen, expected: &Expected<'_>) -> bool {
    let family = match seen.forge.as_str() {
        "gitea" | "forgejo" => "gitea",
        other => other,
    };
    family == expected.family
        && seen.event.as_deref() == Some(expected.event)
        // A second's slack: the two clocks are one host's, or close.
        && seen.received_at >= expected.since - 1000
        && expected
            .repo
            .is_none_or(|repo| seen.repo.as_deref().is_none_or(|r| r.eq_ignore_ascii_case(repo)))
}
