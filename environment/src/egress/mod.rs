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
//! * Every wait and size is bounded ([`Limits`]); what happened is kept as
//!   a bounded [`Summary`] for the job's record and logged with `tracing`
//!   (host and verdict, never a header: a client's `Proxy-Authorization`
//!   is neither logged nor forwarded).

mod dial;
mod head;
mod policy;
mod ranges;
mod record;
mod session;
mod splice;
mod target;

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

pub use dial::{Resolve, SystemResolver};
pub use policy::{AllowHosts, HostPattern, Limits, Policy, PolicyError, UpstreamProxy};
pub use ranges::{
    own_addresses, DeniedAddress, DeniedRange, DeniedRanges, EmbeddedIpv4, OWN_ADDRESS,
};
pub use record::{Outcome, Record, Refusal, RequestKind, Summary};

use record::{Finished, Log};
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
        let max_connections = self.policy.limits.max_connections;
        let shared = Arc::new(Shared {
            log: Log::new(self.policy.limits.max_records),
            policy: self.policy,
            resolver: self.resolver,
        });
        let cancel = CancellationToken::new();
        let task = tokio::spawn(accept_loop(
            listener,
            shared.clone(),
            Slots {
                connections: Arc::new(Semaphore::new(max_connections)),
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
        self.shared.log.summary()
    }

    /// Stops accepting, closes every connection, and returns the summary
    /// with every connection's bytes counted.
    pub async fn shutdown(mut self) -> Summary {
        self.cancel.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        self.shared.log.summary()
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

/// Connections over the limit being told so at once; beyond these, they
/// are closed without a word (a flood gets no task per connection).
const BUSY_REFUSALS: usize = 16;

struct Slots {
    connections: Arc<Semaphore>,
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
                Ok((stream, _)) => match slots.connections.clone().try_acquire_owned() {
                    Ok(slot) => {
                        let shared = shared.clone();
                        let cancel = cancel.clone();
                        connections.spawn(async move {
                            serve(stream, shared, cancel).await;
                            drop(slot);
                        });
                    }
                    Err(_) => {
                        let response = refuse_busy(&shared);
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
                },
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

/// Over the connection limit: records the refusal, returns the 503.
fn refuse_busy(shared: &Shared) -> Vec<u8> {
    let refusal = Refusal::TooManyConnections {
        limit: shared.policy.limits.max_connections,
    };
    let response = refusal_response(
        refusal.status(),
        &format!("forgehand: {refusal}; retry later"),
    );
    tracing::warn!(%refusal, "egress: refused");
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
