//! The egress proxy against local servers: what it lets through, what it
//! refuses and how it says so, chained through an upstream proxy.

mod support;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use forgehand_environment::egress::{DeniedRanges, Outcome, Refusal, RequestKind, UpstreamProxy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use support::*;

#[tokio::test]
async fn an_allowed_connect_is_spliced_both_ways_and_counted() {
    let (echo, _) = echo_server().await;
    let resolver = MapResolver::new(&[("echo.test", &["127.0.0.1"])]);
    let (egress, proxy) = start(policy(&["Echo.Test"], &[echo.port()]), resolver).await;

    let mut stream = TcpStream::connect(proxy).await.unwrap();
    // Bytes sent with the head (a client that does not wait for the 200)
    // are passed on too.
    let mut first = connect(&format!("echo.test:{}", echo.port()));
    first.extend_from_slice(b"early ");
    stream.write_all(&first).await.unwrap();
    let head = read_head(&mut stream).await;
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    stream.write_all(b"hello").await.unwrap();
    let mut echoed = [0u8; 11];
    stream.read_exact(&mut echoed).await.unwrap();
    assert_eq!(&echoed, b"early hello");
    stream.shutdown().await.unwrap();
    assert_eq!(read_to_close(&mut stream).await, "");

    let summary = egress.shutdown().await;
    assert_eq!(summary.records.len(), 1, "{summary}");
    let record = &summary.records[0];
    assert_eq!(record.host.as_deref(), Some("echo.test"));
    assert_eq!(record.port, Some(echo.port()));
    assert_eq!(record.kind, RequestKind::Connect);
    assert_eq!(record.outcome, Outcome::Allowed);
    assert_eq!((record.bytes_up, record.bytes_down), (11, 11));
}

#[tokio::test]
async fn a_host_not_allowed_is_refused_with_the_allow_list_and_never_contacted() {
    let (echo, accepted) = echo_server().await;
    let resolver = MapResolver::new(&[("other.test", &["127.0.0.1"])]);
    let (egress, proxy) = start(
        policy(&["echo.test", "*.cdn.test"], &[echo.port(), 80]),
        resolver,
    )
    .await;

    let answer = exchange(proxy, &connect(&format!("other.test:{}", echo.port()))).await;
    assert!(
        answer.starts_with("HTTP/1.1 403 forgehand: other.test is not in environment.allow_hosts"),
        "{answer}"
    );
    assert!(
        answer.ends_with("forgehand: other.test is not in environment.allow_hosts (allowed: echo.test, *.cdn.test)\n"),
        "{answer}"
    );
    let answer = exchange(
        proxy,
        b"GET http://other.test/simple/ HTTP/1.1\r\nHost: other.test\r\n\r\n",
    )
    .await;
    assert!(
        answer.starts_with("HTTP/1.1 403 forgehand: other.test is not in"),
        "{answer}"
    );
    // A suffix entry covers names below it, not a look-alike.
    let answer = exchange(proxy, &connect("evilcdn.test:80")).await;
    assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
    // A literal address is allowed only when listed, whatever it is.
    let answer = exchange(proxy, &connect(&echo.to_string())).await;
    assert!(
        answer.starts_with("HTTP/1.1 403 forgehand: 127.0.0.1 is not in"),
        "{answer}"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 0);

    let summary = egress.shutdown().await;
    assert_eq!(summary.refused().count(), 4, "{summary}");
    assert!(summary
        .records
        .iter()
        .all(|r| r.outcome == Outcome::Refused(Refusal::HostNotAllowed)));
}

#[tokio::test]
async fn a_listed_literal_address_is_reached() {
    let (echo, accepted) = echo_server().await;
    let (egress, proxy) = start(
        policy(&["127.0.0.1"], &[echo.port()]),
        MapResolver::new(&[]),
    )
    .await;
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    stream.write_all(&connect(&echo.to_string())).await.unwrap();
    assert!(read_head(&mut stream).await.starts_with("HTTP/1.1 200 "));
    drop(stream);
    egress.shutdown().await;
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn names_resolving_to_denied_addresses_are_refused_by_range_name() {
    let resolver = MapResolver::new(&[
        ("private.test", &["10.0.0.1"]),
        ("mapped.test", &["::ffff:127.0.0.1"]),
        ("metadata.test", &["169.254.169.254"]),
        // A rebinding-like mix: refused whole, the public address untried.
        ("mixed.test", &["203.0.113.80", "10.0.0.1"]),
    ]);
    let mut policy = policy(
        &["private.test", "mapped.test", "metadata.test", "mixed.test"],
        &[443],
    );
    policy.denied = DeniedRanges::default();
    let (egress, proxy) = start(policy, resolver).await;

    for (host, expected) in [
        ("private.test", "private.test resolves to 10.0.0.1, a private (RFC 1918) address"),
        (
            "mapped.test",
            "mapped.test resolves to ::ffff:127.0.0.1 (an IPv4-mapped form of 127.0.0.1), a loopback address",
        ),
        ("metadata.test", "resolves to 169.254.169.254, a cloud metadata address"),
        ("mixed.test", "mixed.test resolves to 10.0.0.1, a private (RFC 1918) address"),
    ] {
        let answer = exchange(proxy, &connect(&format!("{host}:443"))).await;
        assert!(answer.starts_with("HTTP/1.1 403 forgehand: "), "{answer}");
        assert!(answer.contains(expected), "{host}: {answer}");
    }
    let summary = egress.shutdown().await;
    assert!(
        summary
            .records
            .iter()
            .all(|r| matches!(r.outcome, Outcome::Refused(Refusal::DeniedAddress { .. }))),
        "{summary}"
    );
}

#[tokio::test]
async fn the_default_list_refuses_loopback_by_name_and_by_literal_address() {
    let (echo, accepted) = echo_server().await;
    let resolver = MapResolver::new(&[("echo.test", &["127.0.0.1"])]);
    let mut policy = policy(&["echo.test", "127.0.0.1", "::1"], &[echo.port()]);
    policy.denied = DeniedRanges::default();
    let (egress, proxy) = start(policy, resolver).await;

    let answer = exchange(proxy, &connect(&format!("echo.test:{}", echo.port()))).await;
    assert!(
        answer.contains("echo.test resolves to 127.0.0.1, a loopback address"),
        "{answer}"
    );
    let answer = exchange(proxy, &connect(&echo.to_string())).await;
    assert!(
        answer.contains("forgehand: 127.0.0.1, a loopback address"),
        "{answer}"
    );
    let answer = exchange(
        proxy,
        format!("GET http://[::1]:{}/ HTTP/1.1\r\n\r\n", echo.port()).as_bytes(),
    )
    .await;
    assert!(
        answer.contains("forgehand: ::1, a loopback address"),
        "{answer}"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 0);
    egress.shutdown().await;
}

#[tokio::test]
async fn a_port_not_allowed_is_refused() {
    let (echo, accepted) = echo_server().await;
    let resolver = MapResolver::new(&[("echo.test", &["127.0.0.1"])]);
    let (egress, proxy) = start(policy(&["echo.test"], &[443]), resolver).await;
    let answer = exchange(proxy, &connect(&format!("echo.test:{}", echo.port()))).await;
    let expected = format!(
        "HTTP/1.1 403 forgehand: port {} of echo.test is not allowed (allowed ports: 443)",
        echo.port()
    );
    assert!(answer.starts_with(&expected), "{answer}");
    assert_eq!(accepted.load(Ordering::SeqCst), 0);
    egress.shutdown().await;
}

#[tokio::test]
async fn a_plain_http_request_is_forwarded_in_origin_form_and_the_answer_streamed_back() {
    let (origin, seen) = origin_server("the Release file").await;
    let resolver = MapResolver::new(&[("web.test", &["127.0.0.1"])]);
    let (egress, proxy) = start(policy(&["web.test"], &[origin.port()]), resolver).await;

    let request = format!(
        "POST http://web.test:{}/debian/dists/x/Release?q=1 HTTP/1.1\r\nHost: web.test\r\n\
         Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n\
         User-Agent: apt\r\nContent-Length: 4\r\n\r\nbody",
        origin.port()
    );
    let answer = exchange(proxy, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.ends_with("\r\n\r\nthe Release file"), "{answer}");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [format!(
            "POST /debian/dists/x/Release?q=1 HTTP/1.1\r\nHost: web.test:{}\r\nUser-Agent: apt\r\n\
             Content-Length: 4\r\nConnection: close\r\n\r\nbody",
            origin.port()
        )]
    );
    let summary = egress.shutdown().await;
    let record = &summary.records[0];
    assert_eq!(
        (record.kind, &record.outcome),
        (RequestKind::Http, &Outcome::Allowed)
    );
    assert_eq!(record.bytes_up, 4);
    assert_eq!(record.bytes_down as usize, answer.len());
}

#[tokio::test]
async fn only_the_first_request_reaches_the_origin_not_what_is_pipelined_after_it() {
    let (origin, seen) = origin_server("first").await;
    let resolver = MapResolver::new(&[("web.test", &["127.0.0.1"])]);
    let (egress, proxy) = start(policy(&["web.test"], &[origin.port()]), resolver).await;
    let request = format!(
        "PUT http://web.test:{}/a HTTP/1.1\r\nContent-Length: 2\r\n\r\nokGET http://other.test/ HTTP/1.1\r\n\
         Proxy-Authorization: Basic c2VjcmV0\r\n\r\n",
        origin.port()
    );
    let answer = exchange(proxy, request.as_bytes()).await;
    assert!(answer.ends_with("\r\n\r\nfirst"), "{answer}");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].ends_with("\r\n\r\nok"), "{seen:?}");
    egress.shutdown().await;
}

#[tokio::test]
async fn a_chunked_request_body_is_refused_before_connecting() {
    let (origin, seen) = origin_server("x").await;
    let resolver = MapResolver::new(&[("web.test", &["127.0.0.1"])]);
    let (egress, proxy) = start(policy(&["web.test"], &[origin.port()]), resolver).await;
    let request = format!(
        "POST http://web.test:{}/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        origin.port()
    );
    let answer = exchange(proxy, request.as_bytes()).await;
    assert!(
        answer.starts_with("HTTP/1.1 411 forgehand: a chunked request body is not forwarded"),
        "{answer}"
    );
    let answer = exchange(
        proxy,
        format!(
            "POST http://web.test:{}/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            origin.port()
        )
        .as_bytes(),
    )
    .await;
    assert!(answer.contains("conflicting Content-Length"), "{answer}");
    assert!(seen.lock().unwrap().is_empty());
    egress.shutdown().await;
}

#[tokio::test]
async fn requests_that_are_not_proxy_requests_get_a_clear_400() {
    let (egress, proxy) = start(policy(&["web.test"], &[80]), MapResolver::new(&[])).await;
    for (request, expected) in [
        (
            &b"GET /simple/ HTTP/1.1\r\nHost: web.test\r\n\r\n"[..],
            "this is a forward proxy",
        ),
        (
            b"GET https://web.test/ HTTP/1.1\r\n\r\n",
            "for HTTPS use CONNECT",
        ),
        (b"CONNECT web.test HTTP/1.1\r\n\r\n", "not a valid port"),
        (b"CONNECT me@web.test:80 HTTP/1.1\r\n\r\n", "user-info"),
        (b"NOT HTTP AT ALL\r\n\r\n", "malformed head"),
    ] {
        let answer = exchange(proxy, request).await;
        assert!(
            answer.starts_with("HTTP/1.1 400 forgehand: bad request"),
            "{answer}"
        );
        assert!(answer.contains(expected), "{answer}");
    }
    egress.shutdown().await;
}

#[tokio::test]
async fn an_upstream_proxy_is_chained_without_the_clients_credentials_or_local_resolution() {
    let (upstream, seen) = upstream_proxy("200 Connection established").await;
    // The default ranges: the operator's upstream on loopback is reached
    // all the same; the origin's name goes to it unresolved.
    let mut policy = policy(&["far.test"], &[443, 80]);
    policy.denied = DeniedRanges::default();
    policy.upstream = Some(UpstreamProxy::parse(&format!("http://{upstream}")).unwrap());
    let (egress, proxy) = start(policy, Arc::new(NoResolver)).await;

    // Logs are captured: the client's credentials must not be in them.
    let logs = Arc::new(Mutex::new(Vec::<u8>::new()));
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(move || LogWriter(writer.clone()))
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let mut stream = TcpStream::connect(proxy).await.unwrap();
    stream
        .write_all(b"CONNECT far.test:443 HTTP/1.1\r\nProxy-Authorization: Basic c2VjcmV0\r\n\r\n")
        .await
        .unwrap();
    assert!(read_head(&mut stream).await.starts_with("HTTP/1.1 200 "));
    stream.write_all(b"tunnel").await.unwrap();
    let mut echoed = [0u8; 6];
    stream.read_exact(&mut echoed).await.unwrap();
    assert_eq!(&echoed, b"tunnel");
    drop(stream);

    // A request pipelined after it must not reach the upstream, which
    // would serve it whatever its host.
    let answer = exchange(
        proxy,
        b"GET http://far.test/pool/x.deb HTTP/1.1\r\nProxy-Authorization: Basic c2VjcmV0\r\n\r\n\
          GET http://elsewhere.test/ HTTP/1.1\r\n\r\n",
    )
    .await;
    assert!(
        answer.starts_with("HTTP/1.1 200 Connection established"),
        "{answer}"
    );
    // A literal private address is refused here, not left to the upstream.
    let answer = exchange(proxy, &connect("10.0.0.1:443")).await;
    assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(
        seen[0],
        "CONNECT far.test:443 HTTP/1.1\r\nHost: far.test:443\r\n\r\n"
    );
    assert_eq!(
        seen[1],
        "GET http://far.test/pool/x.deb HTTP/1.1\r\nHost: far.test\r\nConnection: close\r\n\r\n"
    );
    let summary = egress.shutdown().await;
    drop(_guard);
    let logs = String::from_utf8(logs.lock().unwrap().clone()).unwrap();
    assert!(logs.contains("egress: allowed"), "{logs}");
    assert!(logs.contains("far.test"), "{logs}");
    assert!(
        !logs.contains("c2VjcmV0") && !logs.contains("Proxy-Authorization"),
        "{logs}"
    );
    assert_eq!(summary.records[0].outcome, Outcome::Allowed);
    assert_eq!(
        (summary.records[0].bytes_up, summary.records[0].bytes_down),
        (6, 6)
    );
}

#[tokio::test]
async fn an_upstream_refusal_reaches_the_client_as_a_502() {
    let (upstream, _) = upstream_proxy("403 Forbidden").await;
    let mut policy = policy(&["far.test"], &[443]);
    policy.upstream = Some(UpstreamProxy::parse(&format!("http://{upstream}")).unwrap());
    let (egress, proxy) = start(policy, Arc::new(NoResolver)).await;
    let answer = exchange(proxy, &connect("far.test:443")).await;
    assert!(
        answer.starts_with(
            "HTTP/1.1 502 forgehand: the upstream proxy answered 403 for far.test:443"
        ),
        "{answer}"
    );
    egress.shutdown().await;
}

/// A non-loopback address of this machine, from `hostname -I` (an IPv4
/// one when there is one).
fn own_non_loopback_address() -> std::net::IpAddr {
    let out = std::process::Command::new("hostname")
        .arg("-I")
        .output()
        .expect("`hostname` is needed for this test (Debian: apt-get install hostname)");
    assert!(out.status.success(), "`hostname -I` failed");
    let addresses: Vec<std::net::IpAddr> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|a| a.parse().ok())
        .filter(|a: &std::net::IpAddr| !a.is_loopback())
        .collect();
    addresses
        .iter()
        .find(|a| a.is_ipv4())
        .or(addresses.first())
        .copied()
        .expect("this test needs a non-loopback address on this machine; `hostname -I` shows none")
}

/// Red-team F8: a service the host binds on all its addresses was
/// reached through an allowed name (or literal) standing for one of the
/// host's own addresses, in none of the named ranges. The egress refuses
/// every address of the host's interfaces, by that name, by literal, by
/// name, in CONNECT and in plain HTTP, and never connects.
#[tokio::test]
async fn the_hosts_own_addresses_are_refused_even_when_allowed() {
    use forgehand_environment::egress::{AllowHosts, Policy};
    let own = own_non_loopback_address();
    let listener = tokio::net::TcpListener::bind((own, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    // Who connected, in the order the listener took them.
    let accepted = Arc::new(std::sync::Mutex::new(Vec::new()));
    let peers = accepted.clone();
    tokio::spawn(async move {
        while let Ok((stream, peer)) = listener.accept().await {
            peers.lock().unwrap().push(peer);
            drop(stream);
        }
    });
    let literal = match own {
        std::net::IpAddr::V4(v4) => v4.to_string(),
        std::net::IpAddr::V6(v6) => format!("[{v6}]"),
    };
    let mut allowed = vec![own.to_string(), "own.test".to_owned()];
    let mut authorities = vec![format!("{literal}:{port}"), format!("own.test:{port}")];
    if let std::net::IpAddr::V4(v4) = own {
        let mapped = v4.to_ipv6_mapped();
        allowed.push(mapped.to_string());
        authorities.push(format!("[{mapped}]:{port}"));
    }
    // The production policy, but for the named ranges holding the address
    // (a machine whose only address is a private one): what refuses it is
    // its being the host's.
    let mut policy = Policy::new(AllowHosts::parse(&allowed).unwrap());
    policy.allow_ports = [port].into();
    policy.denied = DeniedRanges::default().without(|range| range.net.contains(&own));
    let own_text = own.to_string();
    let resolver = MapResolver::new(&[("own.test", &[own_text.as_str()])]);
    let (egress, proxy) = start(policy, resolver).await;

    for authority in &authorities {
        for request in [
            connect(authority),
            format!("GET http://{authority}/ HTTP/1.1\r\nHost: {authority}\r\n\r\n").into_bytes(),
        ] {
            let answer = exchange(proxy, &request).await;
            assert!(answer.starts_with("HTTP/1.1 403 "), "{authority}: {answer}");
            assert!(
                answer.contains("one of this host's own addresses"),
                "{authority}: {answer}"
            );
        }
    }
    let summary = egress.shutdown().await;
    assert!(
        summary
            .records
            .iter()
            .all(|r| matches!(r.outcome, Outcome::Refused(Refusal::DeniedAddress { .. }))),
        "{summary}"
    );
    // Nothing reached the service: a connection of the test's own, made
    // now, is the first the listener takes (it takes them in order, and
    // one the egress made would have been made before the egress
    // answered). Waited for, not slept on; a hang detector bounds it.
    let marker = tokio::net::TcpStream::connect((own, port)).await.unwrap();
    let mine = marker.local_addr().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !accepted.lock().unwrap().contains(&mine) {
        assert!(
            std::time::Instant::now() < deadline,
            "hung: the service never took the test's own connection"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(
        *accepted.lock().unwrap(),
        [mine],
        "the host's service was reached"
    );
}
