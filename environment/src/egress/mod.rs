//! The setup phase's only way out: a host-side forward proxy that reaches
//! the package registries the operator allows, and nothing else.
//!
//! An environment's setup (`npm ci`, `pip install`, `apt-get download`)
//! runs a repository's own commands in a sandbox with no network. The
//! sandbox's tools are pointed at this proxy (`HTTPS_PROXY` and friends)
//! through a listener the caller creates inside the sandbox's network
//! namespace and hands to [`Egress::spawn`]; the proxy runs host-side, so
//! what it may reach is decided here, not by anything in the sandbox.
//!
//! * HTTPS goes through `CONNECT host:port`: the bytes are spliced both
//!   ways, never decrypted (no certificate of ours for the guest to trust,
//!   and nothing to inspect that TLS does not already protect).
//! * Plain HTTP (Debian's archive) goes as absolute-form requests
//!   (`GET http://host/path`), forwarded in origin-form with
//!   `Connection: close`, the answer streamed back as it comes.
//! * Only hosts in `environment.allow_hosts` ([`AllowHosts`]) on the
//!   allowed ports (443 and 80 by default) are reached; everything else is
//!   refused with a status whose reason phrase and body say why, since
//!   that is what a developer reads in pip's or npm's output.
//! * Whatever a name resolves to, an address in a denied range
//!   ([`DeniedRanges`]: loopback, private, link-local, metadata…), or
//!   one of the host's own addresses, is never connected to; the checked
//!   addresses are the ones connected to.
//! * Connections beyond [`Limits::max_connections`] wait their turn, in
//!   order (up to [`Limits::max_waiting`] of them, each for at most
//!   [`Limits::wait_timeout`]), rather than being refused: package
//!   managers open hundreds at once, and retry a refusal only after
//!   seconds of back-off. A name is looked up once for all the
//!   connections that want it (see `resolve.rs`).
//! * Every wait and size is bounded ([`Limits`]); what happened is kept as
//!   a bounded [`Summary`] for the job's record and logged with `tracing`
//!   (host and verdict, never a header: a client's `Proxy-Authorization`
//!   is neither logged nor forwarded).

mod dial;
mod head;
mod policy;
mod ranges;
mod record;
mod resolve;
mod session;
mod splice;
mod target;

use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use policy::{AllowHosts, HostPattern, Limits, Policy, PolicyError, UpstreamProxy};
pub use ranges::{
    own_addresses, DeniedAddress, DeniedRange, DeniedRanges, EmbeddedIpv4, OWN_ADDRESS,
};
pub use record::{Load, Outcome, Record, Refusal, RequestKind, Summary};
pub use resolve::{Resolve, SystemResolver, ANSWER_TTL, MAX_LOOKUPS};

use record::{Finished, LoadMeter, Log};
use resolve::Resolver;
use session::{refusal_response, refuse_and_close, serve, Shared};

/// The egress proxy, built from a [`Policy`].
pub struct Egress {
    policy: Policy,
    resolver: Arc<dyn Resolve>,
}

impl Egress {
    /// Fails when the policy cannot work (no port allowed), or when the
    /// host's own addresses it denies cannot be read.
    pub fn new(mut policy: Policy) -> Result<Self, PolicyError> {
        policy.validate()?;
        if policy.deny_own_addresses {
            let own = ranges::own_addresses()
                .map_err(|error| PolicyError::OwnAddresses(error.to_string()))?;
            policy.denied = policy.denied.with_own_addresses(own);
        }
        Ok(Egress {
            policy,
            resolver: Arc::new(SystemResolver),
        })
    }

    /// Resolves names with `resolver` instead of the host's resolver.
    pub fn with_resolver(mut self, resolver: Arc<dyn Resolve>) -> Self {
        self.resolver = resolver;
        self
    }

    /// Serves `listener` until the handle is shut down or dropped.
    pub fn spawn(self, listener: TcpListener) -> EgressHandle {
        let limits = &self.policy.limits;
        let (max_connections, max_waiting) = (limits.max_connections, limits.max_waiting);
        let shared = Arc::new(Shared {
            log: Log::new(limits.max_records),
            load: LoadMeter::default(),
            policy: self.policy,
            resolver: Resolver::new(self.resolver),
        });
        let cancel = CancellationToken::new();
        let task = tokio::spawn(accept_loop(
            listener,
            shared.clone(),
            Slots {
                connections: Arc::new(Semaphore::new(max_connections)),
                waiting: Arc::new(Semaphore::new(max_waiting)),
                refusals: Arc::new(Semaphore::new(BUSY_REFUSALS)),
            },
            cancel.clone(),
        ));
        EgressHandle {
            shared,
            cancel,
            task: Some(task),
        }
    }
}

/// A running egress. Dropping it stops it (connections are closed).
pub struct EgressHandle {
    shared: Arc<Shared>,
    cancel: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl EgressHandle {
    /// What the egress has done so far.
    pub fn summary(&self) -> Summary {
        self.shared.summary()
    }

    /// Stops accepting, closes every connection, and returns the summary
    /// with every connection's bytes counted.
    pub async fn shutdown(mut self) -> Summary {
        self.cancel.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        self.shared.summary()
    }
}

impl Drop for EgressHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// How long a stopped egress waits for its connections to record
/// themselves before abandoning them.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Connections over the limit and the queue being told so at once;
/// beyond these, they are closed without a word (a flood gets no task per
/// connection).
const BUSY_REFUSALS: usize = 16;

struct Slots {
    /// One per connection served.
    connections: Arc<Semaphore>,
    /// One per connection waiting for a turn.
    waiting: Arc<Semaphore>,
    refusals: Arc<Semaphore>,
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    slots: Slots,
    cancel: CancellationToken,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let turn = match slots.connections.clone().try_acquire_owned() {
                        Ok(slot) => Turn::Now(slot),
                        Err(_) => match slots.waiting.clone().try_acquire_owned() {
                            Ok(place) => Turn::Wait(place),
                            Err(_) => Turn::Busy,
                        },
                    };
                    match turn {
                        Turn::Now(slot) => {
                            connections.spawn(serve_in(slot, stream, shared.clone(), cancel.clone()));
                        }
                        Turn::Wait(place) => {
                            let shared = shared.clone();
                            let cancel = cancel.clone();
                            let free = slots.connections.clone();
                            connections.spawn(wait_then_serve(stream, shared, free, place, cancel));
                        }
                        Turn::Busy => refuse_now(stream, &shared, &slots, &cancel, &mut connections),
                    }
                }
                Err(e) => {
                    // Out of descriptors and the like: wait rather than spin.
                    tracing::warn!(error = %e, "egress: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        }
    }
    drop(listener);
    let drained = tokio::time::timeout(STOP_GRACE, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        connections.abort_all();
    }
}

/// Serves a connection in its slot, counted as served meanwhile.
async fn serve_in(
    slot: OwnedSemaphorePermit,
    stream: TcpStream,
    shared: Arc<Shared>,
    cancel: CancellationToken,
) {
    let active = shared.load.start();
    serve(stream, shared.clone(), cancel).await;
    drop(active);
    drop(slot);
}

/// What an accepted connection gets.
enum Turn {
    /// A slot: served at once.
    Now(OwnedSemaphorePermit),
    /// A place in the queue: served when a slot frees.
    Wait(OwnedSemaphorePermit),
    /// Neither: a 503.
    Busy,
}

/// Waits (in order: tokio's semaphore is fair) for a slot, at most
/// `limits.wait_timeout`, then serves; or answers 503. Nothing is read
/// from the connection meanwhile: it costs its socket and this task.
async fn wait_then_serve(
    mut stream: TcpStream,
    shared: Arc<Shared>,
    free: Arc<Semaphore>,
    place: OwnedSemaphorePermit,
    cancel: CancellationToken,
) {
    let started = Instant::now();
    let slot = tokio::select! {
        slot = tokio::time::timeout(shared.policy.limits.wait_timeout, free.acquire_owned()) => slot,
        () = cancel.cancelled() => {
            // Counted like a connection stopped before its verdict.
            shared.log.add(Finished {
                host: None,
                port: None,
                kind: RequestKind::Unknown,
                outcome: Outcome::Unfinished,
                bytes_up: 0,
                bytes_down: 0,
            });
            return;
        }
    };
    drop(place);
    shared.load.waited(started.elapsed());
    match slot {
        Ok(Ok(slot)) => serve_in(slot, stream, shared, cancel).await,
        // Timed out (or the semaphore closed, which it never is).
        _ => {
            let response = refuse_busy(&shared, true);
            tokio::select! {
                () = refuse_and_close(&mut stream, &response) => {}
                () = cancel.cancelled() => {}
            }
        }
    }
}

/// Over the limit and the queue: a 503 at once, while few are being told
/// so; otherwise the connection is closed.
fn refuse_now(
    stream: TcpStream,
    shared: &Shared,
    slots: &Slots,
    cancel: &CancellationToken,
    connections: &mut JoinSet<()>,
) {
    let response = refuse_busy(shared, false);
    if let Ok(slot) = slots.refusals.clone().try_acquire_owned() {
        let cancel = cancel.clone();
        connections.spawn(async move {
            let mut stream = stream;
            tokio::select! {
                () = refuse_and_close(&mut stream, &response) => {}
                () = cancel.cancelled() => {}
            }
            drop(slot);
        });
    }
}

/// Over the connection limit: records the refusal, returns the 503.
fn refuse_busy(shared: &Shared, waited: bool) -> Vec<u8> {
    let limits = &shared.policy.limits;
    let refusal = Refusal::TooManyConnections {
        limit: limits.max_connections,
    };
    let why = match waited {
        true => {
            let wait = limits.wait_timeout.as_millis();
            match wait % 1000 {
                0 => format!("{refusal}, none free within {} s", wait / 1000),
                _ => format!("{refusal}, none free within {wait} ms"),
            }
        }
        false => format!("{refusal}, and {} waiting", limits.max_waiting),
    };
    let response = refusal_response(refusal.status(), &format!("forgehand: {why}; retry later"));
    tracing::warn!(%refusal, waited, "egress: refused");
    shared.log.add(Finished {
        host: None,
        port: None,
        kind: RequestKind::Unknown,
        outcome: Outcome::Refused(refusal),
        bytes_up: 0,
        bytes_down: 0,
    });
    response
}
