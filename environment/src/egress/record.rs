//! What the egress did, for the job's record: one line per (host, port,
//! kind, outcome) with the number of connections and the bytes each way.
//!
//! Aggregated, and capped at [`Limits::max_records`] lines, because the
//! hosts in refusals are whatever the sandbox asked for: a setup script
//! trying a million names must not grow the host's memory.
//!
//! [`Limits::max_records`]: super::Limits::max_records

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;

use super::ranges::DeniedAddress;

/// How a connection asked to go out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    /// `CONNECT host:port`: a tunnel, the bytes spliced as they come.
    Connect,
    /// `GET http://host/path`: forwarded in origin-form.
    Http,
    /// The request never said (a bad or incomplete head, a refused
    /// connection).
    Unknown,
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Refusal {
    /// The head is not a request the egress serves.
    BadRequest {
        problem: String,
    },
    /// A plain-HTTP request with a chunked body (only `Content-Length`
    /// bodies are forwarded).
    LengthRequired,
    /// The head did not end within the size limit.
    HeadTooLarge {
        limit: usize,
    },
    /// The head did not end within the time limit.
    HeadTimeout {
        millis: u64,
    },
    HostNotAllowed,
    PortNotAllowed,
    /// The host resolves to (or is) an address in a denied range.
    DeniedAddress {
        denied: DeniedAddress,
    },
    /// The name did not resolve, or to no address.
    Unresolvable {
        problem: String,
    },
    /// No address (or the upstream proxy) accepted the connection.
    ConnectFailed {
        problem: String,
    },
    /// The upstream proxy answered a CONNECT with this status.
    UpstreamRefused {
        status: u16,
    },
    /// More connections than [`super::Limits::max_connections`] at once.
    TooManyConnections {
        limit: usize,
    },
}

impl Refusal {
    /// The status a refusal is answered with.
    pub fn status(&self) -> u16 {
        match self {
            Refusal::BadRequest { .. } => 400,
            Refusal::LengthRequired => 411,
            Refusal::HeadTooLarge { .. } => 431,
            Refusal::HeadTimeout { .. } => 408,
            Refusal::HostNotAllowed | Refusal::PortNotAllowed | Refusal::DeniedAddress { .. } => {
                403
            }
            Refusal::Unresolvable { .. }
            | Refusal::ConnectFailed { .. }
            | Refusal::UpstreamRefused { .. } => 502,
            Refusal::TooManyConnections { .. } => 503,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::BadRequest { problem } => write!(f, "bad request: {problem}"),
            Refusal::LengthRequired => {
                f.write_str("a chunked request body is not forwarded: send it with Content-Length")
            }
            Refusal::HeadTooLarge { limit } => {
                write!(f, "request head larger than {limit} bytes")
            }
            Refusal::HeadTimeout { millis } => match millis % 1000 {
                0 => write!(f, "request head not complete within {} s", millis / 1000),
                _ => write!(f, "request head not complete within {millis} ms"),
            },
            Refusal::HostNotAllowed => f.write_str("not in environment.allow_hosts"),
            Refusal::PortNotAllowed => f.write_str("port not allowed"),
            Refusal::DeniedAddress { denied } => write!(f, "resolves to {denied}"),
            Refusal::Unresolvable { problem } => write!(f, "does not resolve: {problem}"),
            Refusal::ConnectFailed { problem } => write!(f, "connection failed: {problem}"),
            Refusal::UpstreamRefused { status } => {
                write!(f, "the upstream proxy answered {status}")
            }
            Refusal::TooManyConnections { limit } => {
                write!(f, "more than {limit} connections at once")
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Connected to the host and spliced.
    Allowed,
    Refused(Refusal),
    /// The egress was stopped before it decided.
    Unfinished,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Allowed => f.write_str("allowed"),
            Outcome::Refused(refusal) => write!(f, "refused: {refusal}"),
            Outcome::Unfinished => f.write_str("unfinished (the egress was stopped)"),
        }
    }
}

/// One line of the summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Record {
    /// The host as asked for (a normalized name or an address); `None`
    /// when the request never named one.
    pub host: Option<String>,
    pub port: Option<u16>,
    pub kind: RequestKind,
    pub outcome: Outcome,
    pub connections: u64,
    /// Bytes from the sandbox to the host (after the request head).
    pub bytes_up: u64,
    /// Bytes from the host to the sandbox.
    pub bytes_down: u64,
}

impl fmt::Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = self.host.as_deref().unwrap_or("-");
        match self.port {
            Some(port) => write!(f, "{host}:{port}")?,
            None => write!(f, "{host}")?,
        }
        write!(
            f,
            " ({:?}) {}: {} connection(s), {} bytes up, {} bytes down",
            self.kind, self.outcome, self.connections, self.bytes_up, self.bytes_down
        )
    }
}

/// How busy the egress was: what shows whether its limits or its
/// lookups slowed a setup down.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Load {
    /// Connections served at once, at most.
    pub peak_connections: u64,
    /// Connections that waited for a turn (over `max_connections`).
    pub waited: u64,
    /// The longest such wait, in milliseconds.
    pub longest_wait_ms: u64,
    /// Names looked up (the rest were answered by a lookup already made
    /// or under way).
    pub lookups: u64,
    /// Requests answered without a lookup of their own.
    pub lookups_shared: u64,
    pub lookups_failed: u64,
}

impl Load {
    fn merge(&mut self, other: &Load) {
        self.peak_connections = self.peak_connections.max(other.peak_connections);
        self.waited += other.waited;
        self.longest_wait_ms = self.longest_wait_ms.max(other.longest_wait_ms);
        self.lookups += other.lookups;
        self.lookups_shared += other.lookups_shared;
        self.lookups_failed += other.lookups_failed;
    }
}

impl fmt::Display for Load {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "at most {} connection(s) at once, {} waited for a turn (longest {} ms); \
             {} name lookup(s), {} request(s) answered by one, {} failed",
            self.peak_connections,
            self.waited,
            self.longest_wait_ms,
            self.lookups,
            self.lookups_shared,
            self.lookups_failed
        )
    }
}

/// Counts connections as they start and end, and waits, for [`Load`].
#[derive(Debug, Default)]
pub(crate) struct LoadMeter {
    now: AtomicU64,
    peak: AtomicU64,
    waited: AtomicU64,
    longest_wait_ms: AtomicU64,
}

/// A connection being served: counted until dropped.
pub(crate) struct Active<'a>(&'a LoadMeter);

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::Relaxed);
    }
}

impl LoadMeter {
    pub fn start(&self) -> Active<'_> {
        let now = self.now.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(now, Ordering::Relaxed);
        Active(self)
    }

    pub fn waited(&self, wait: Duration) {
        self.waited.fetch_add(1, Ordering::Relaxed);
        let millis = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        self.longest_wait_ms.fetch_max(millis, Ordering::Relaxed);
    }

    pub fn load(&self) -> Load {
        Load {
            peak_connections: self.peak.load(Ordering::Relaxed),
            waited: self.waited.load(Ordering::Relaxed),
            longest_wait_ms: self.longest_wait_ms.load(Ordering::Relaxed),
            ..Load::default()
        }
    }
}

/// Everything the egress did, in the order first seen.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub records: Vec<Record>,
    /// Connections beyond the record cap: counted, not described.
    pub unrecorded_connections: u64,
    pub load: Load,
}

impl Summary {
    /// Adds what another egress did (a later step of the same setup).
    pub fn merge(&mut self, other: Summary) {
        self.records.extend(other.records);
        self.unrecorded_connections += other.unrecorded_connections;
        self.load.merge(&other.load);
    }

    /// The records refusing anything.
    pub fn refused(&self) -> impl Iterator<Item = &Record> {
        self.records
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Refused(_)))
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for record in &self.records {
            writeln!(f, "{record}")?;
        }
        if self.unrecorded_connections > 0 {
            writeln!(
                f,
                "{} further connection(s) not recorded (record limit)",
                self.unrecorded_connections
            )?;
        }
        if self.load != Load::default() {
            writeln!(f, "{}", self.load)?;
        }
        Ok(())
    }
}

type Key = (Option<String>, Option<u16>, RequestKind, Outcome);

/// The shared, bounded log the summary is read from.
#[derive(Debug)]
pub(crate) struct Log {
    max_records: usize,
    inner: Mutex<(Summary, HashMap<Key, usize>)>,
}

/// One finished connection, as the log takes it.
pub(crate) struct Finished {
    pub host: Option<String>,
    pub port: Option<u16>,
    pub kind: RequestKind,
    pub outcome: Outcome,
    pub bytes_up: u64,
    pub bytes_down: u64,
}

impl Log {
    pub fn new(max_records: usize) -> Self {
        Log {
            max_records,
            inner: Mutex::new((Summary::default(), HashMap::new())),
        }
    }

    pub fn add(&self, done: Finished) {
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (summary, index) = &mut *guard;
        let key = (done.host, done.port, done.kind, done.outcome);
        let at = match index.get(&key) {
            Some(&at) => at,
            None if summary.records.len() < self.max_records => {
                summary.records.push(Record {
                    host: key.0.clone(),
                    port: key.1,
                    kind: key.2,
                    outcome: key.3.clone(),
                    connections: 0,
                    bytes_up: 0,
                    bytes_down: 0,
                });
                index.insert(key, summary.records.len() - 1);
                summary.records.len() - 1
            }
            None => {
                summary.unrecorded_connections += 1;
                return;
            }
        };
        let record = &mut summary.records[at];
        record.connections += 1;
        record.bytes_up += done.bytes_up;
        record.bytes_down += done.bytes_down;
    }

    pub fn summary(&self) -> Summary {
        let guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        guard.0.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(host: &str, outcome: Outcome, up: u64) -> Finished {
        Finished {
            host: Some(host.into()),
            port: Some(443),
            kind: RequestKind::Connect,
            outcome,
            bytes_up: up,
            bytes_down: 2 * up,
        }
    }

    #[test]
    fn connections_aggregate_by_host_and_outcome_and_the_log_is_capped() {
        let log = Log::new(2);
        log.add(done("a.invalid", Outcome::Allowed, 10));
        log.add(done("a.invalid", Outcome::Allowed, 5));
        log.add(done(
            "b.invalid",
            Outcome::Refused(Refusal::HostNotAllowed),
            0,
        ));
        log.add(done(
            "c.invalid",
            Outcome::Refused(Refusal::HostNotAllowed),
            0,
        ));
        log.add(done(
            "d.invalid",
            Outcome::Refused(Refusal::HostNotAllowed),
            0,
        ));
        let summary = log.summary();
        assert_eq!(summary.records.len(), 2);
        assert_eq!(summary.records[0].connections, 2);
        assert_eq!(summary.records[0].bytes_up, 15);
        assert_eq!(summary.records[0].bytes_down, 30);
        assert_eq!(summary.unrecorded_connections, 2);
        assert_eq!(summary.refused().count(), 1);
        let json = serde_json::to_value(&summary).unwrap();
        assert_eq!(json["records"][1]["outcome"]["outcome"], "refused");
        assert_eq!(json["records"][1]["outcome"]["reason"], "host_not_allowed");
    }
}
