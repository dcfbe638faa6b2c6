//! The HTTP face's limits, over real TCP against `forgehand serve`'s own
//! server: a connection that stalls is closed, a request that cannot be
//! genuine is answered before its body is sent, bodies in flight share a
//! budget, and connections past the limit are refused. Every test proves
//! what the server did (answered, closed) while the client still held
//! back; the time limits in here only keep a broken server from hanging
//! the test.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use forgehand_bot::config::Config;
use forgehand_forge::webhook::signature::sign_hex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// Long enough for any answer on a loaded machine; a server that keeps a
/// connection open past it has not closed it.
const PATIENCE: Duration = Duration::from_secs(30);

struct Served {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
    _dir: tempfile::TempDir,
}

async fn serve(adjust: impl FnOnce(&mut Config)) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::config_for(dir.path());
    config.queue.workers = 0;
    adjust(&mut config);
    config.validate().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(forgehand_bot::service::serve_on(
        listener,
        config,
        forgehand_bot::service::Runner::logging(),
        async move {
            let _ = stopped.await;
        },
    ));
    let served = Served {
        addr,
        stop: Some(stop),
        task,
        _dir: dir,
    };
    let (status, _) = served.get("/healthz").await;
    assert_eq!(status, 200);
    served
}

impl Served {
    async fn connect(&self) -> TcpStream {
        TcpStream::connect(self.addr).await.unwrap()
    }

    /// One request on a connection of its own; the status and the body.
    async fn get(&self, path: &str) -> (u16, String) {
        let mut stream = self.connect().await;
        let request = format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let answer = until_closed(&mut stream).await;
        (status(&answer), body(&answer))
    }

    async fn stop(mut self) {
        self.stop.take().unwrap().send(()).unwrap();
        tokio::time::timeout(PATIENCE, self.task)
            .await
            .expect("the server stops")
            .unwrap()
            .unwrap();
    }
}

/// Everything the server sends until it closes the connection; panics
/// when it keeps it open.
async fn until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let read = tokio::time::timeout(PATIENCE, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "the server kept the connection open for {PATIENCE:?}; it sent {:?}",
        String::from_utf8_lossy(&got)
    );
    got
}

/// Reads one answer's head (the connection stays open).
async fn head(stream: &mut TcpStream) -> String {
    let mut got = Vec::new();
    tokio::time::timeout(PATIENCE, async {
        let mut byte = [0u8; 1];
        while !got.ends_with(b"\r\n\r\n") {
            match stream.read(&mut byte).await {
                Ok(0) | Err(_) => break,
                Ok(_) => got.push(byte[0]),
            }
        }
    })
    .await
    .expect("an answer");
    String::from_utf8_lossy(&got).into_owned()
}

fn status(answer: &[u8]) -> u16 {
    let text = String::from_utf8_lossy(answer);
    text.strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {text:?}"))
}

fn body(answer: &[u8]) -> String {
    let text = String::from_utf8_lossy(answer);
    text.split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default()
}

/// The head of a GitHub delivery of `length` bytes signed as `body`.
fn signed_head(length: &str, body: &[u8]) -> String {
    format!(
        "POST /webhooks/github HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: application/json\r\n\
         x-github-event: issues\r\nx-github-delivery: d-1\r\n\
         x-hub-signature-256: sha256={}\r\n{length}\r\n",
        sign_hex(common::GITHUB_SECRET.as_bytes(), body)
    )
}

#[tokio::test]
async fn a_connection_that_stalls_in_its_headers_is_closed() {
    let server = serve(|c| c.server.header_read_timeout_ms = 300).await;
    let mut stalled = server.connect().await;
    stalled
        .write_all(b"POST /webhooks/github HTTP/1.1\r\nhost: x\r\nx-github-event: iss")
        .await
        .unwrap();
    until_closed(&mut stalled).await;

    // Nothing at all, too.
    let mut silent = server.connect().await;
    until_closed(&mut silent).await;

    // And a kept-alive connection that goes idle after an answer.
    let mut idle = server.connect().await;
    idle.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    assert!(head(&mut idle).await.starts_with("HTTP/1.1 200"));
    until_closed(&mut idle).await;

    assert_eq!(server.get("/healthz").await.0, 200);
    server.stop().await;
}

#[tokio::test]
async fn a_body_that_stalls_is_answered_408_and_closed() {
    let server = serve(|c| c.server.body_read_timeout_ms = 300).await;
    let body = br#"{"action":"labeled"}"#;
    let mut stalled = server.connect().await;
    stalled
        .write_all(signed_head("content-length: 1000\r\n", body).as_bytes())
        .await
        .unwrap();
    stalled.write_all(&body[..10]).await.unwrap();
    let answer = until_closed(&mut stalled).await;
    assert_eq!(status(&answer), 408, "{}", String::from_utf8_lossy(&answer));
    server.stop().await;
}

#[tokio::test]
async fn a_request_without_a_signature_is_refused_before_its_body_is_sent() {
    let server = serve(|_| {}).await;
    for (path, headers) in [
        ("/webhooks/github", "x-github-event: issues\r\n"),
        (
            "/webhooks/github",
            "x-github-event: issues\r\nx-hub-signature-256: sha256=not-hex\r\n",
        ),
        ("/webhooks/gitea", "x-gitea-event: issues\r\n"),
    ] {
        let mut stream = server.connect().await;
        let head =
            format!("POST {path} HTTP/1.1\r\nhost: x\r\n{headers}content-length: 10000000\r\n\r\n");
        stream.write_all(head.as_bytes()).await.unwrap();
        // Not a byte of the ten megabytes is sent.
        let answer = until_closed(&mut stream).await;
        assert_eq!(
            status(&answer),
            401,
            "{headers}: {}",
            String::from_utf8_lossy(&answer)
        );
    }
    server.stop().await;
}

#[tokio::test]
async fn an_oversized_body_is_refused_before_it_is_all_sent() {
    let server = serve(|c| c.server.max_body_bytes = 4096).await;
    // Said by its length: answered before a byte of it.
    let mut declared = server.connect().await;
    declared
        .write_all(signed_head("content-length: 4097\r\n", b"{}").as_bytes())
        .await
        .unwrap();
    let answer = until_closed(&mut declared).await;
    assert_eq!(status(&answer), 413);

    // Streamed: answered once past the limit, while the client still has
    // more to send (the last chunk never goes).
    let mut streamed = server.connect().await;
    streamed
        .write_all(signed_head("transfer-encoding: chunked\r\n", b"{}").as_bytes())
        .await
        .unwrap();
    let chunk = format!("bb8\r\n{}\r\n", " ".repeat(3000));
    streamed.write_all(chunk.as_bytes()).await.unwrap();
    streamed.write_all(chunk.as_bytes()).await.unwrap();
    let answer = until_closed(&mut streamed).await;
    assert_eq!(status(&answer), 413, "{}", String::from_utf8_lossy(&answer));
    server.stop().await;
}

#[tokio::test]
async fn bodies_past_the_buffer_budget_are_answered_503_not_buffered() {
    let server = serve(|c| {
        c.server.max_body_bytes = 16 * 1024;
        c.server.body_buffer_bytes = 16 * 1024;
    })
    .await;
    // One slow client holds nearly the whole budget with what it sent
    // (a declared length alone holds nothing)...
    let mut slow = server.connect().await;
    slow.write_all(signed_head("content-length: 16384\r\n", b"{}").as_bytes())
        .await
        .unwrap();
    slow.write_all(&[b' '; 15 * 1024]).await.unwrap();

    // ...so the next body is not read: 503, try again later.
    let body = common::labeled_issue("forgehand", 1);
    let send = |body: Vec<u8>| {
        let addr = server.addr;
        async move {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            let head = signed_head(&format!("content-length: {}\r\n", body.len()), &body);
            stream.write_all(head.as_bytes()).await.unwrap();
            stream.write_all(&body).await.unwrap();
            until_closed(&mut stream).await
        }
    };
    // The slow client's request may not have reached its handler yet:
    // asked again until it has (a loaded machine may take a while).
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let answer = loop {
        let answer = send(body.clone()).await;
        if status(&answer) == 503 || tokio::time::Instant::now() >= deadline {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(status(&answer), 503, "{}", String::from_utf8_lossy(&answer));
    assert!(
        String::from_utf8_lossy(&answer).contains("retry-after: 5"),
        "{}",
        String::from_utf8_lossy(&answer)
    );

    // Once it goes, its share comes back.
    drop(slow);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let answer = send(body.clone()).await;
        if status(&answer) != 503 {
            assert_eq!(status(&answer), 202, "{}", String::from_utf8_lossy(&answer));
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the budget never came back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.stop().await;
}

#[tokio::test]
async fn connections_past_the_limit_wait_briefly_then_are_refused() {
    let server = serve(|c| {
        c.server.max_connections = 2;
        c.server.connection_wait_ms = 200;
    })
    .await;
    // Two connections hold both slots (accepted in order: these first).
    let mut holders = Vec::new();
    for _ in 0..2 {
        let mut holder = server.connect().await;
        holder.write_all(b"GET /heal").await.unwrap();
        holders.push(holder);
    }
    let mut third = server.connect().await;
    third
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let answer = until_closed(&mut third).await;
    assert_eq!(status(&answer), 503, "{}", String::from_utf8_lossy(&answer));

    drop(holders);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let metrics = loop {
        let (status, body) = server.get("/metrics").await;
        if status == 200 {
            break body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the slots never came back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        metrics
            .lines()
            .any(|l| l == "forgehand_http_connections_refused_total 1"),
        "{metrics}"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_waiting_connection_is_served_when_a_slot_frees() {
    let server = serve(|c| {
        c.server.max_connections = 1;
        c.server.connection_wait_ms = 20_000;
    })
    .await;
    let mut holder = server.connect().await;
    holder.write_all(b"GET /heal").await.unwrap();
    let mut waiting = server.connect().await;
    waiting
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    drop(holder);
    let answer = until_closed(&mut waiting).await;
    assert_eq!(status(&answer), 200);
    server.stop().await;
}

#[tokio::test]
async fn too_many_or_too_large_headers_are_431() {
    let server = serve(|_| {}).await;
    let many: String = (0..70).map(|n| format!("x-h{n}: v\r\n")).collect();
    let large = format!("x-large: {}\r\n", "v".repeat(20 * 1024));
    for headers in [many, large] {
        let mut stream = server.connect().await;
        let request = format!("GET /healthz HTTP/1.1\r\nhost: x\r\n{headers}\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let answer = until_closed(&mut stream).await;
        assert_eq!(status(&answer), 431);
    }
    server.stop().await;
}

/// A client that sends requests and never reads the answers: once the
/// server's writes have been blocked for `server.write_timeout_ms`, the
/// connection is closed.
#[tokio::test]
async fn a_client_that_does_not_read_its_answers_is_closed() {
    let server = serve(|c| {
        c.server.write_timeout_ms = 300;
        c.server.header_read_timeout_ms = 60_000;
    })
    .await;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let stream = socket.connect(server.addr).await.unwrap();
    let (reader, mut writer) = stream.into_split();
    // Pipelined requests whose answers fill every buffer on the way.
    let request = b"GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n";
    let writing = tokio::spawn(async move {
        for _ in 0..200_000 {
            if writer.write_all(request).await.is_err() {
                return true;
            }
        }
        false
    });
    let closed = tokio::time::timeout(PATIENCE, writing).await;
    assert!(
        matches!(closed, Ok(Ok(true))),
        "the server kept reading requests from a client that reads nothing"
    );
    drop(reader);
    server.stop().await;
}
