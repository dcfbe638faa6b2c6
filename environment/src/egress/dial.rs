//! Reaching an allowed host: resolve the name (a lookup shared with the
//! other connections to it: `resolve.rs`), check every address
//! against the denied ranges, connect only to checked addresses (never a
//! second resolution between check and connect, which a rebinding DNS
//! server would answer differently), or go through the upstream proxy.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::head::{parse_response_status, read_head};
use super::policy::{Policy, UpstreamProxy};
use super::record::Refusal;
use super::resolve::Resolver;
use super::target::{Host, Target};

/// Addresses tried at most, of however many a name resolves to (all are
/// checked).
const MAX_ADDRESSES_TRIED: usize = 8;

/// Connects to the target itself: the addresses it names or resolves to,
/// every one of them outside the denied ranges.
pub(crate) async fn dial_direct(
    target: &Target,
    policy: &Policy,
    resolver: &Arc<Resolver>,
) -> Result<TcpStream, Refusal> {
    let addresses = match &target.host {
        Host::Ip(ip) => vec![SocketAddr::new(*ip, target.port)],
        Host::Name(name) => {
            let resolved = tokio::time::timeout(
                policy.limits.connect_timeout,
                resolver.resolve(name, target.port),
            )
            .await
            .map_err(|_| Refusal::Unresolvable {
                problem: "resolution timed out".into(),
            })?
            .map_err(|e| Refusal::Unresolvable {
                problem: e.to_string(),
            })?;
            if resolved.is_empty() {
                return Err(Refusal::Unresolvable {
                    problem: "no address".into(),
                });
            }
            resolved
        }
    };
    // A name with one denied address among public ones is refused whole:
    // that mix is what a rebinding answer looks like.
    for address in &addresses {
        policy
            .denied
            .check(address.ip())
            .map_err(|denied| Refusal::DeniedAddress { denied })?;
    }
    let mut last_error = None;
    for address in addresses.iter().take(MAX_ADDRESSES_TRIED) {
        // The checked address, with the target's port: a resolver's port
        // is not trusted either.
        let address = SocketAddr::new(address.ip(), target.port);
        match tokio::time::timeout(policy.limits.connect_timeout, TcpStream::connect(address)).await
        {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(e)) => last_error = Some(format!("{address}: {e}")),
            Err(_) => last_error = Some(format!("{address}: timed out")),
        }
    }
    Err(Refusal::ConnectFailed {
        problem: last_error.unwrap_or_else(|| "no address".into()),
    })
}

/// Connects to the upstream proxy (the operator's; not held to the denied
/// ranges). A literal address in the request still is.
pub(crate) async fn dial_upstream(
    upstream: &UpstreamProxy,
    target: &Target,
    policy: &Policy,
) -> Result<TcpStream, Refusal> {
    if let Host::Ip(ip) = &target.host {
        policy
            .denied
            .check(*ip)
            .map_err(|denied| Refusal::DeniedAddress { denied })?;
    }
    let connect = TcpStream::connect((upstream.host.as_str(), upstream.port));
    match tokio::time::timeout(policy.limits.connect_timeout, connect).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(e)) => Err(Refusal::ConnectFailed {
            problem: format!("upstream proxy {}:{}: {e}", upstream.host, upstream.port),
        }),
        Err(_) => Err(Refusal::ConnectFailed {
            problem: format!(
                "upstream proxy {}:{}: timed out",
                upstream.host, upstream.port
            ),
        }),
    }
}

/// Opens a tunnel to the target through the upstream proxy; returns any
/// bytes the proxy sent after its answer (the tunnel's first bytes). No
/// header of the client's is passed on: its `Proxy-Authorization` was for
/// the egress, not for the operator's proxy.
pub(crate) async fn upstream_connect(
    stream: &mut TcpStream,
    target: &Target,
    policy: &Policy,
) -> Result<Vec<u8>, Refusal> {
    let authority = target.authority();
    let request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
    let failed = |e: &dyn std::fmt::Display| Refusal::ConnectFailed {
        problem: format!("upstream proxy: {e}"),
    };
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| failed(&e))?;
    let limits = &policy.limits;
    let head = read_head(stream, limits.max_head_bytes, limits.head_timeout)
        .await
        .map_err(|e| failed(&e))?;
    let status = parse_response_status(&head, limits.max_headers).map_err(|e| failed(&e))?;
    if !(200..300).contains(&status) {
        return Err(Refusal::UpstreamRefused { status });
    }
    Ok(head.rest().to_vec())
}
