//! One connection from the sandbox: read its request head, decide, reach
//! the host (or refuse, saying why), then splice until done.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use super::dial::{dial_direct, dial_upstream, upstream_connect};
use super::head::{parse_request, read_head, HeadError, RequestHead};
use super::policy::{Limits, Policy};
use super::record::{Finished, Load, LoadMeter, Log, Outcome, Refusal, RequestKind, Summary};
use super::resolve::Resolver;
use super::splice::{splice, Counters, End, Up};
use super::target::{parse_absolute_form, parse_connect_target, Host, Target, TargetError};

/// What every connection shares.
pub(crate) struct Shared {
    pub policy: Policy,
    pub resolver: Arc<Resolver>,
    pub log: Log,
    pub load: LoadMeter,
}

impl Shared {
    pub fn summary(&self) -> Summary {
        let mut summary = self.log.summary();
        let lookups = &self.resolver.counters;
        summary.load = Load {
            lookups: lookups.lookups.load(Ordering::Relaxed),
            lookups_shared: lookups.shared.load(Ordering::Relaxed),
            lookups_failed: lookups.failed.load(Ordering::Relaxed),
            ..self.load.load()
        };
        summary
    }
}

/// What a connection has got to, kept outside its future so that stopping
/// the egress mid-way still records the host and the bytes.
#[derive(Default)]
struct Progress {
    counters: Counters,
    request: Mutex<Option<(RequestKind, Target)>>,
    /// Set as soon as the verdict is known, before the refusal is written
    /// or the bytes spliced.
    decided: Mutex<Option<Outcome>>,
    end: Mutex<Option<End>>,
    /// Milliseconds from the connection's start to the host's answering
    /// (the head read, the name resolved, the connection made): where a
    /// slow setup's time goes, in the log.
    open_ms: AtomicU64,
}

impl Progress {
    fn request(&self) -> Option<(RequestKind, Target)> {
        self.request
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn decide(&self, outcome: Outcome) {
        *self.decided.lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome);
    }

    fn decided(&self) -> Option<Outcome> {
        self.decided
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// A refusal is a few hundred bytes: a client that reads none of them in
/// this long is dropped.
const REFUSAL_WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// After a refusal, the client's unread input is drained for this long and
/// up to this much (see [`refuse_and_close`]).
const LINGER_TIME: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 64 * 1024;

pub(crate) async fn serve(mut client: TcpStream, shared: Arc<Shared>, cancel: CancellationToken) {
    let progress = Progress::default();
    tokio::select! {
        () = handle(&mut client, &shared, &progress) => {}
        () = cancel.cancelled() => {}
    }
    let outcome = progress.decided().unwrap_or(Outcome::Unfinished);
    let request = progress.request();
    let (kind, host, port) = match &request {
        Some((kind, target)) => (*kind, Some(target.host.to_string()), Some(target.port)),
        None => (RequestKind::Unknown, None, None),
    };
    let bytes_up = progress.counters.up.load(Ordering::Relaxed);
    let bytes_down = progress.counters.down.load(Ordering::Relaxed);
    let shown = host.as_deref().unwrap_or("-");
    match &outcome {
        Outcome::Allowed => tracing::info!(
            host = shown,
            port,
            ?kind,
            bytes_up,
            bytes_down,
            open_ms = progress.open_ms.load(Ordering::Relaxed),
            end = ?*progress.end.lock().unwrap_or_else(|e| e.into_inner()),
            "egress: allowed"
        ),
        Outcome::Refused(refusal) => {
            tracing::warn!(host = shown, port, ?kind, %refusal, "egress: refused")
        }
        Outcome::Unfinished => tracing::debug!(host = shown, port, "egress: stopped"),
    }
    shared.log.add(Finished {
        host,
        port,
        kind,
        outcome,
        bytes_up,
        bytes_down,
    });
}

async fn handle(client: &mut TcpStream, shared: &Shared, progress: &Progress) {
    let started = tokio::time::Instant::now();
    match open(client, shared, progress).await {
        Ok(opened) => {
            let open_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            progress.open_ms.store(open_ms, Ordering::Relaxed);
            progress.decide(Outcome::Allowed);
            let end = relay(client, opened, shared.policy.limits.idle_timeout, progress).await;
            *progress.end.lock().unwrap_or_else(|e| e.into_inner()) = Some(end);
        }
        Err(refusal) => {
            let target = progress.request().map(|(_, target)| target);
            let message = explain(&refusal, target.as_ref(), &shared.policy);
            let response = refusal_response(refusal.status(), &message);
            progress.decide(Outcome::Refused(refusal));
            refuse_and_close(client, &response).await;
        }
    }
}

/// Writes a refusal, then drains what the client sent before closing:
/// closing a socket with unread input sends a reset, which can reach the
/// client before the refusal does and leave it with "connection reset"
/// instead of the reason (a header bomb's unread rest, a pipelined
/// request). Both steps bounded in time, the drain in bytes.
pub(crate) async fn refuse_and_close(client: &mut TcpStream, response: &[u8]) {
    let written = tokio::time::timeout(REFUSAL_WRITE_TIMEOUT, async {
        client.write_all(response).await?;
        client.shutdown().await
    })
    .await;
    if matches!(written, Ok(Ok(()))) {
        linger(client).await;
    }
}

/// Drains the client's unread input, bounded in time and bytes, once the
/// egress has said all it will (its write side shut).
async fn linger(client: &mut TcpStream) {
    let _ = tokio::time::timeout(LINGER_TIME, async {
        let mut sink = [0u8; 4096];
        let mut drained = 0;
        while drained < LINGER_BYTES {
            match client.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => drained += n,
            }
        }
    })
    .await;
}

/// A connection made, with what each side must be sent before splicing.
struct Opened {
    server: TcpStream,
    /// The forwarded request head (plain HTTP).
    head_to_server: Vec<u8>,
    /// Bytes the client sent after its head (a body's start, a tunnel's
    /// first bytes).
    early_to_server: Vec<u8>,
    /// What more the client may send on.
    up: Up,
    /// The tunnel's `200` (CONNECT).
    head_to_client: &'static [u8],
    /// Bytes the upstream proxy sent after its answer.
    early_to_client: Vec<u8>,
}

async fn open(
    client: &mut TcpStream,
    shared: &Shared,
    progress: &Progress,
) -> Result<Opened, Refusal> {
    let policy = &shared.policy;
    let limits = &policy.limits;
    let head = read_head(client, limits.max_head_bytes, limits.head_timeout)
        .await
        .map_err(|e| head_refusal(e, limits))?;
    let request = parse_request(&head, limits.max_headers).map_err(|e| head_refusal(e, limits))?;
    let bad_target = |e: TargetError| Refusal::BadRequest {
        problem: e.to_string(),
    };
    let (kind, target, path) = if request.method == "CONNECT" {
        let target = parse_connect_target(&request.target).map_err(bad_target)?;
        (RequestKind::Connect, target, None)
    } else {
        let (target, path) = parse_absolute_form(&request.target).map_err(bad_target)?;
        (RequestKind::Http, target, Some(path))
    };
    *progress.request.lock().unwrap_or_else(|e| e.into_inner()) = Some((kind, target.clone()));
    let body_length = match path {
        Some(_) => body_length(&request)?,
        None => 0,
    };

    if !policy.allow_hosts.allows(&target.host) {
        return Err(Refusal::HostNotAllowed);
    }
    if !policy.allow_ports.contains(&target.port) {
        return Err(Refusal::PortNotAllowed);
    }
    let mut server = match &policy.upstream {
        Some(upstream) => dial_upstream(upstream, &target, policy).await?,
        None => dial_direct(&target, policy, &shared.resolver).await?,
    };
    let early = head.rest();
    Ok(match path {
        None => {
            let early_to_client = match &policy.upstream {
                Some(_) => upstream_connect(&mut server, &target, policy).await?,
                None => Vec::new(),
            };
            Opened {
                server,
                head_to_server: Vec::new(),
                early_to_server: early.to_vec(),
                up: Up::Tunnel,
                head_to_client: b"HTTP/1.1 200 Connection established\r\n\r\n",
                early_to_client,
            }
        }
        Some(path) => {
            // The body's start; anything after it (a pipelined request)
            // is dropped.
            let start = early
                .len()
                .min(usize::try_from(body_length).unwrap_or(usize::MAX));
            Opened {
                server,
                head_to_server: forward_head(&request, &target, &path, policy.upstream.is_some()),
                early_to_server: early[..start].to_vec(),
                up: Up::Body(body_length - start as u64),
                head_to_client: b"",
                early_to_client: Vec::new(),
            }
        }
    })
}

/// Sends what is pending, then splices.
async fn relay(client: &mut TcpStream, opened: Opened, idle: Duration, progress: &Progress) -> End {
    let Opened {
        mut server,
        head_to_server,
        early_to_server,
        up,
        head_to_client,
        early_to_client,
    } = opened;
    let counters = &progress.counters;
    let sent = tokio::time::timeout(idle, async {
        server.write_all(&head_to_server).await?;
        server.write_all(&early_to_server).await?;
        counters
            .up
            .fetch_add(early_to_server.len() as u64, Ordering::Relaxed);
        client.write_all(head_to_client).await?;
        client.write_all(&early_to_client).await?;
        counters
            .down
            .fetch_add(early_to_client.len() as u64, Ordering::Relaxed);
        std::io::Result::Ok(())
    })
    .await;
    let end = match sent {
        Ok(Ok(())) => splice(client, &mut server, up, idle, counters).await,
        Ok(Err(_)) => End::Closed,
        Err(_) => End::Idle,
    };
    if matches!(up, Up::Body(_)) {
        // The answer is complete; the client may have sent more.
        let _ = client.shutdown().await;
        linger(client).await;
    }
    end
}

/// The length of a forwarded request's body. A chunked body is refused:
/// passing exactly one request on would mean parsing chunks, and package
/// managers send none over plain HTTP.
fn body_length(request: &RequestHead) -> Result<u64, Refusal> {
    if request
        .headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("transfer-encoding"))
    {
        return Err(Refusal::LengthRequired);
    }
    let mut length = None;
    for (name, value) in &request.headers {
        if !name.eq_ignore_ascii_case("content-length") {
            continue;
        }
        let value = std::str::from_utf8(value)
            .ok()
            .map(str::trim)
            .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| Refusal::BadRequest {
                problem: "an invalid Content-Length".into(),
            })?;
        if length.is_some_and(|l| l != value) {
            return Err(Refusal::BadRequest {
                problem: "conflicting Content-Length headers".into(),
            });
        }
        length = Some(value);
    }
    Ok(length.unwrap_or(0))
}

fn head_refusal(error: HeadError, limits: &Limits) -> Refusal {
    match error {
        HeadError::TooLarge(limit) => Refusal::HeadTooLarge { limit },
        HeadError::TooManyHeaders => Refusal::HeadTooLarge {
            limit: limits.max_head_bytes,
        },
        HeadError::Timeout => Refusal::HeadTimeout {
            millis: limits
                .head_timeout
                .as_millis()
                .try_into()
                .unwrap_or(u64::MAX),
        },
        other => Refusal::BadRequest {
            problem: other.to_string(),
        },
    }
}

/// Headers that concern one hop only, never forwarded: the client's
/// proxy credentials above all.
const HOP_BY_HOP: &[&str] = &[
    "host",
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
];

/// The request as the origin (or the upstream proxy) gets it: origin-form
/// (absolute-form through an upstream), the client's end-to-end headers,
/// its own `Host`, and `Connection: close` (one request per connection,
/// so no response framing has to be parsed here).
fn forward_head(request: &RequestHead, target: &Target, path: &str, via_upstream: bool) -> Vec<u8> {
    let host_header = match target.port {
        80 => target.host.to_string(),
        _ => target.authority(),
    };
    let named_by_connection: Vec<String> = request
        .headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, value)| {
            String::from_utf8_lossy(value)
                .split(',')
                .map(|token| token.trim().to_ascii_lowercase())
                .collect::<Vec<_>>()
        })
        // A body's framing stays whatever the client's `Connection` says.
        .filter(|token| token != "content-length" && token != "transfer-encoding")
        .collect();
    let mut out = Vec::with_capacity(1024);
    let request_target = match via_upstream {
        true => format!("http://{host_header}{path}"),
        false => path.to_owned(),
    };
    out.extend_from_slice(format!("{} {request_target} HTTP/1.1\r\n", request.method).as_bytes());
    out.extend_from_slice(format!("Host: {host_header}\r\n").as_bytes());
    for (name, value) in &request.headers {
        let lower = name.to_ascii_lowercase();
        if HOP_BY_HOP.contains(&lower.as_str()) || named_by_connection.contains(&lower) {
            continue;
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    out
}

/// The sentence a developer reads in pip's or npm's output.
fn explain(refusal: &Refusal, target: Option<&Target>, policy: &Policy) -> String {
    let host = target.map(|t| t.host.to_string()).unwrap_or_default();
    let port = target.map(|t| t.port).unwrap_or_default();
    let text = match refusal {
        Refusal::HostNotAllowed => format!(
            "{host} is not in environment.allow_hosts (allowed: {})",
            policy.allow_hosts
        ),
        Refusal::PortNotAllowed => {
            let ports: Vec<String> = policy.allow_ports.iter().map(u16::to_string).collect();
            format!(
                "port {port} of {host} is not allowed (allowed ports: {})",
                ports.join(", ")
            )
        }
        Refusal::DeniedAddress { denied } => match target.map(|t| &t.host) {
            Some(Host::Ip(_)) => format!("{denied}, is never reached from an environment's setup"),
            _ => format!("{host} resolves to {denied}, which an environment's setup never reaches"),
        },
        Refusal::Unresolvable { problem } => format!("{host} does not resolve: {problem}"),
        Refusal::ConnectFailed { problem } => {
            format!("cannot connect to {host}:{port}: {problem}")
        }
        Refusal::UpstreamRefused { status } => {
            format!("the upstream proxy answered {status} for {host}:{port}")
        }
        Refusal::BadRequest { .. }
        | Refusal::LengthRequired
        | Refusal::HeadTooLarge { .. }
        | Refusal::HeadTimeout { .. }
        | Refusal::TooManyConnections { .. } => refusal.to_string(),
    };
    format!("forgehand: {text}")
}

/// A refusal as an HTTP response. The message is also the reason phrase:
/// for a refused CONNECT, pip and npm show the status line and nothing of
/// the body.
pub(crate) fn refusal_response(status: u16, message: &str) -> Vec<u8> {
    const REASON_MAX: usize = 300;
    let printable: String = message
        .chars()
        .map(|c| if (' '..='~').contains(&c) { c } else { '?' })
        .collect();
    let reason: String = printable.chars().take(REASON_MAX).collect();
    let body = format!("{printable}\n");
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::head::RawHead;

    fn request(text: &str) -> RequestHead {
        let bytes = text.as_bytes().to_vec();
        let len = bytes.len();
        parse_request(&RawHead { bytes, len }, 32).unwrap()
    }

    #[test]
    fn a_forwarded_head_is_origin_form_without_hop_by_hop_headers_or_credentials() {
        let request = request(
            "GET http://mirror.example.org/debian/x HTTP/1.1\r\nHost: other.invalid\r\n\
             Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n\
             Connection: keep-alive, X-Drop, Content-Length\r\nX-Drop: 1\r\n\
             Accept: */*\r\nContent-Length: 0\r\n\r\n",
        );
        let target = Target {
            host: Host::Name("mirror.example.org".into()),
            port: 80,
        };
        let head = String::from_utf8(forward_head(&request, &target, "/debian/x", false)).unwrap();
        assert_eq!(
            head,
            "GET /debian/x HTTP/1.1\r\nHost: mirror.example.org\r\nAccept: */*\r\n\
             Content-Length: 0\r\nConnection: close\r\n\r\n"
        );
        let head = String::from_utf8(forward_head(
            &request,
            &Target {
                port: 8080,
                ..target
            },
            "/debian/x",
            true,
        ))
        .unwrap();
        assert!(
            head.starts_with(
                "GET http://mirror.example.org:8080/debian/x HTTP/1.1\r\nHost: mirror.example.org:8080\r\n"
            ),
            "{head}"
        );
    }

    #[test]
    fn a_refusal_carries_its_message_in_the_status_line_and_the_body() {
        let response = String::from_utf8(refusal_response(403, "forgehand: x\u{7}y")).unwrap();
        assert!(
            response.starts_with("HTTP/1.1 403 forgehand: x?y\r\n"),
            "{response}"
        );
        assert!(response.ends_with("\r\n\r\nforgehand: x?y\n"), "{response}");
    }
}
