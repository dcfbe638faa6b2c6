//! The egress proxy's limits against local servers: slow and oversized
//! heads, too many connections, idle tunnels, stopping.

mod support;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use forgehand_environment::egress::{AllowHosts, DeniedRanges, Limits, Outcome, Policy, Refusal};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use support::*;

#[tokio::test]
async fn a_slow_client_is_cut_off_at_the_head_deadline_however_it_trickles() {
    let (echo, accepted) = echo_server().await;
    let resolver = MapResolver::new(&[("echo.test", &["127.0.0.1"])]);
    let mut policy = policy(&["echo.test"], &[echo.port()]);
    policy.limits.head_timeout = Duration::from_millis(400);
    let (egress, proxy) = start(policy, resolver).await;

    // A head that never ends, a byte every 20 ms: each read is prompt,
    // so only a deadline for the whole head cuts the client off; one per
    // read never would (the head would reach the size limit after five
    // minutes). The client trickles until the egress answers; a hang
    // detector bounds that, not a timing.
    let authority = format!("echo.test:{}", echo.port());
    let head = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\nX-Trickle: ");
    let mut bytes = head.into_bytes().into_iter().chain(std::iter::repeat(b'a'));
    // Before the connection: the egress's deadline starts after this.
    let started = Instant::now();
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    let (mut reader, mut writer) = stream.split();
    let mut answer = Vec::new();
    let mut buffer = [0u8; 1024];
    let mut writing = true;
    loop {
        tokio::select! {
            read = reader.read(&mut buffer) => match read {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    // Answered: nothing more is sent.
                    answer.extend_from_slice(&buffer[..n]);
                    writing = false;
                }
            },
            _ = tokio::time::sleep(Duration::from_millis(20)), if writing => {
                let byte = bytes.next().unwrap();
                if writer.write_all(&[byte]).await.is_err() {
                    writing = false;
                }
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "hung: the egress still read a head trickled for 60 s (the deadline of 400 ms is not for the whole head)"
        );
    }
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 408 forgehand: request head not complete within 400 ms"),
        "{answer}"
    );
    // Not before the deadline (a lower bound: a loaded machine only adds).
    assert!(started.elapsed() >= Duration::from_millis(400));
    assert_eq!(accepted.load(Ordering::SeqCst), 0);
    let summary = egress.shutdown().await;
    assert!(matches!(
        summary.records[0].outcome,
        Outcome::Refused(Refusal::HeadTimeout { .. })
    ));
}

#[tokio::test]
async fn a_header_bomb_is_refused_with_431_and_never_forwarded() {
    let (origin, seen) = origin_server("x").await;
    let resolver = MapResolver::new(&[("web.test", &["127.0.0.1"])]);
    let (egress, proxy) = start(policy(&["web.test"], &[origin.port()]), resolver).await;
    let base = format!("GET http://web.test:{}/ HTTP/1.1\r\n", origin.port());

    let big = format!("{base}X-Bomb: {}\r\n\r\n", "a".repeat(64 * 1024));
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    // The egress may close while this is still being written.
    let _ = stream.write_all(big.as_bytes()).await;
    let answer = read_to_close(&mut stream).await;
    assert!(
        answer.starts_with("HTTP/1.1 431 forgehand: request head larger than 16384 bytes"),
        "{answer}"
    );
    let many = format!("{base}{}\r\n", "X: y\r\n".repeat(200));
    let answer = exchange(proxy, many.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
    assert!(seen.lock().unwrap().is_empty());
    egress.shutdown().await;
}

#[tokio::test]
async fn connections_beyond_the_limit_get_a_503() {
    let (echo, _) = echo_server().await;
    let resolver = MapResolver::new(&[("echo.test", &["127.0.0.1"])]);
    let mut policy = policy(&["echo.test"], &[echo.port()]);
    policy.limits.max_connections = 1;
    let (egress, proxy) = start(policy, resolver).await;

    let mut held = TcpStream::connect(proxy).await.unwrap();
    held.write_all(&connect(&format!("echo.test:{}", echo.port())))
        .await
        .unwrap();
    assert!(read_head(&mut held).await.starts_with("HTTP/1.1 200 "));
    let answer = exchange(proxy, &connect(&format!("echo.test:{}", echo.port()))).await;
    assert!(
        answer.starts_with("HTTP/1.1 503 forgehand: more than 1 connections at once"),
        "{answer}"
    );
    drop(held);
    let summary = egress.shutdown().await;
    assert!(summary
        .records
        .iter()
        .any(|r| r.outcome == Outcome::Refused(Refusal::TooManyConnections { limit: 1 })));
}

#[tokio::test]
async fn an_idle_tunnel_is_closed_and_a_stopped_egress_records_live_tunnels() {
    let (echo, _) = echo_server().await;
    let resolver = MapResolver::new(&[("echo.test", &["127.0.0.1"])]);
    let mut policy = policy(&["echo.test"], &[echo.port()]);
    policy.limits.idle_timeout = Duration::from_millis(300);
    let (egress, proxy) = start(policy.clone(), resolver.clone()).await;

    let mut stream = TcpStream::connect(proxy).await.unwrap();
    stream
        .write_all(&connect(&format!("echo.test:{}", echo.port())))
        .await
        .unwrap();
    read_head(&mut stream).await;
    let started = Instant::now();
    assert_eq!(read_to_close(&mut stream).await, "");
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "{:?}",
        started.elapsed()
    );
    egress.shutdown().await;

    // A tunnel that would stay open an hour: a stop ends it, and does not
    // wait for it (a hang detector bounds the wait, not a timing).
    policy.limits.idle_timeout = Duration::from_secs(3600);
    let (egress, proxy) = start(policy, resolver).await;
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    stream
        .write_all(&connect(&format!("echo.test:{}", echo.port())))
        .await
        .unwrap();
    read_head(&mut stream).await;
    stream.write_all(b"12345").await.unwrap();
    let mut echoed = [0u8; 5];
    stream.read_exact(&mut echoed).await.unwrap();
    let summary = tokio::time::timeout(Duration::from_secs(60), egress.shutdown())
        .await
        .expect("hung: the stop waited for the live tunnel");
    assert_eq!(read_to_close(&mut stream).await, "");
    assert_eq!(summary.records[0].outcome, Outcome::Allowed);
    assert_eq!(
        (summary.records[0].bytes_up, summary.records[0].bytes_down),
        (5, 5)
    );
}

#[test]
fn the_default_limits_are_bounded() {
    let limits = Limits::default();
    assert_eq!(limits.max_head_bytes, 16 * 1024);
    assert!(limits.head_timeout <= Duration::from_secs(30));
    assert!(limits.idle_timeout <= Duration::from_secs(300));
    assert!(limits.max_connections <= 256);
    let policy = Policy::new(AllowHosts::default());
    assert_eq!(
        policy.allow_ports.iter().copied().collect::<Vec<_>>(),
        [80, 443]
    );
    assert_eq!(policy.denied, DeniedRanges::default());
    assert!(
        policy.deny_own_addresses,
        "the host's own addresses are denied too"
    );
    assert!(policy.upstream.is_none());
}
