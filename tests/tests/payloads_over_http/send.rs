//! Making the deliveries: each planned case POSTed as its forge sends it.

use forgehand_tests::harness::TestServer;

use super::expect::Expect;
use super::report::{check_answer, Report, Sent};

/// A fresh delivery id that says which case it is (ASCII, as header
/// values must be).
fn unique_id(ctx: &str) -> String {
    let readable: String = ctx
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("{readable}-{}", uuid::Uuid::new_v4().simple())
}

#[derive(Clone, Copy)]
pub(crate) enum Via {
    Github,
    Gitea,
    Forgejo,
}

/// A delivery to make: how, what, and what it must become.
pub(crate) struct Planned {
    pub(crate) ctx: String,
    pub(crate) via: Via,
    pub(crate) body: Vec<u8>,
    pub(crate) expect: Expect,
}

/// Sends every planned delivery in turn, each with its own delivery id,
/// and checks each answer.
pub(crate) async fn send_all(
    server: &TestServer,
    planned: Vec<Planned>,
    report: &mut Report,
) -> Vec<Sent> {
    let mut sent = Vec::with_capacity(planned.len());
    for p in planned {
        let delivery_id = unique_id(&p.ctx);
        let event = p.expect.event.clone();
        let answer = match p.via {
            Via::Github => server.post_github(&event, &delivery_id, p.body).await,
            Via::Gitea => server.post_gitea(&event, &delivery_id, p.body).await,
            Via::Forgejo => server.post_forgejo(&event, &delivery_id, p.body).await,
        };
        let s = Sent {
            ctx: p.ctx,
            delivery_id,
            expect: p.expect,
            answer,
        };
        check_answer(report, &s);
        sent.push(s);
    }
    sent
}
