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
async fn connections_beyond_the_limit_wait_their_turn_and_beyond_the_queue_get_a_503() {
    let (echo, _) = echo_server().await;
    let resolver = MapResolver::new(&[("echo.test", &["127.0.0.1"])]);
    let mut policy = policy(&["echo.test"], &[echo.port()]);
    policy.limits.max_connections = 1;
    policy.limits.max_waiting = 1;
    let (egress, proxy) = start(policy, resolver).await;
    let request = connect(&format!("echo.test:{}", echo.port()));

    let mut held = TcpStream::connect(proxy).await.unwrap();
    held.write_all(&request).await.unwrap();
    assert!(read_head(&mut held).await.starts_with("HTTP/1.1 200 "));
    // The second waits: no answer while the first is served.
    let mut waiting = TcpStream::connect(proxy).await.unwrap();
    waiting.write_all(&request).await.unwrap();
    assert_eq!(anything_more(&mut waiting).await, None);
    // The third finds the slot and the queue full.
    let answer = exchange(proxy, &request).await;
    assert!(
        answer.starts_with(
            "HTTP/1.1 503 forgehand: more than 1 connections at once, and 1 waiting; retry later"
        ),
        "{answer}"
    );
    // The first ends: the second is served, its request as it sent it.
    drop(held);
    assert!(read_head(&mut waiting).await.starts_with("HTTP/1.1 200 "));
    waiting.write_all(b"12345").await.unwrap();
    let mut echoed = [0u8; 5];
    waiting.read_exact(&mut echoed).await.unwrap();
    assert_eq!(&echoed, b"12345");
    drop(waiting);
    let summary = egress.shutdown().await;
    assert!(summary
        .records
        .iter()
        .any(|r| r.outcome == Outcome::Refused(Refusal::TooManyConnections { limit: 1 })));
    assert_eq!(summary.load.peak_connections, 1, "{summary}");
    assert_eq!(summary.load.waited, 1, "{summary}");
    assert!(summary.load.longest_wait_ms >= 250, "{summary}");
}

#[tokio::test]
async fn a_connection_waiting_longer_than_the_wait_timeout_gets_a_503() {
    let (echo, accepted) = echo_server().await;
    let resolver = MapResolver::new(&[("echo.test", &["127.0.0.1"])]);
    let mut policy = policy(&["echo.test"], &[echo.port()]);
    policy.limits.max_connections = 1;
    policy.limits.wait_timeout = Duration::from_millis(300);
    let (egress, proxy) = start(policy, resolver).await;
    let request = connect(&format!("echo.test:{}", echo.port()));

    let mut held = TcpStream::connect(proxy).await.unwrap();
    held.write_all(&request).await.unwrap();
    read_head(&mut held).await;
    let started = Instant::now();
    let answer = exchange(proxy, &request).await;
    assert!(
        answer.starts_with(
            "HTTP/1.1 503 forgehand: more than 1 connections at once, none free within 300 ms"
        ),
        "{answer}"
    );
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
    drop(held);
    egress.shutdown().await;
}

/// A package manager's burst (npm 9 through a proxy opens a tunnel per
/// request, all of a tree's tarballs at once): with the default limits,
/// every one of many more connections than `max_connections` gets its
/// tunnel, those over the limit after a wait, none a 503.
#[tokio::test]
async fn a_burst_of_many_more_connects_than_the_limit_all_get_through() {
    const CLIENTS: usize = 600;
    // Each connection is two sockets here and two at the echo server.
    raise_open_files_limit(8 * CLIENTS as u64);
    let (echo, accepted) = echo_server().await;
    let resolver = MapResolver::new(&[("echo.test", &["127.0.0.1"])]);
    let policy = policy(&["echo.test"], &[echo.port()]);
    let limit = policy.limits.max_connections;
    assert!(limit < CLIENTS, "the burst must exceed the limit");
    let (egress, proxy) = start(policy, resolver).await;
    let request = connect(&format!("echo.test:{}", echo.port()));

    let mut clients = tokio::task::JoinSet::new();
    for i in 0..CLIENTS {
        let request = request.clone();
        clients.spawn(async move {
            let mut stream = TcpStream::connect(proxy).await.unwrap();
            stream.write_all(&request).await.unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                let n = tokio::time::timeout(Duration::from_secs(30), stream.read(&mut byte))
                    .await
                    .expect("an answer in time")
                    .unwrap();
                assert_ne!(n, 0, "closed: {}", String::from_utf8_lossy(&head));
                head.push(byte[0]);
            }
            let head = String::from_utf8(head).unwrap();
            assert!(head.starts_with("HTTP/1.1 200 "), "{i}: {head}");
            // A tarball's worth of time, so that the burst overlaps.
            tokio::time::sleep(Duration::from_millis(200)).await;
            let message = format!("{i:06}");
            stream.write_all(message.as_bytes()).await.unwrap();
            let mut echoed = [0u8; 6];
            stream.read_exact(&mut echoed).await.unwrap();
            assert_eq!(&echoed, message.as_bytes());
        });
    }
    while let Some(done) = clients.join_next().await {
        done.unwrap();
    }
    let summary = egress.shutdown().await;
    assert_eq!(accepted.load(Ordering::SeqCst), CLIENTS);
    assert_eq!(summary.refused().count(), 0, "{summary}");
    assert_eq!(summary.records[0].connections, CLIENTS as u64, "{summary}");
    assert_eq!(summary.load.peak_connections, limit as u64, "{summary}");
    assert!(summary.load.waited > 0, "{summary}");
    // One name, one lookup, however many connections asked for it.
    assert_eq!(summary.load.lookups, 1, "{summary}");
    assert_eq!(summary.load.lookups_shared, CLIENTS as u64 - 1, "{summary}");
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
    assert!(limits.max_waiting <= 4096);
    assert!(limits.wait_timeout <= Duration::from_secs(120));
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
