//! Local servers and helpers the egress tests share.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use forgehand_environment::egress::{
    AllowHosts, DeniedRanges, Egress, EgressHandle, Policy, Resolve,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Names mapped to addresses, in place of DNS.
pub struct MapResolver(HashMap<String, Vec<IpAddr>>);

impl MapResolver {
    pub fn new(entries: &[(&str, &[&str])]) -> Arc<Self> {
        Arc::new(MapResolver(
            entries
                .iter()
                .map(|(name, ips)| {
                    (
                        name.to_string(),
                        ips.iter().map(|ip| ip.parse().unwrap()).collect(),
                    )
                })
                .collect(),
        ))
    }
}

#[async_trait]
impl Resolve for MapResolver {
    async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        match self.0.get(host) {
            Some(ips) => Ok(ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect()),
            None => Err(io::Error::new(io::ErrorKind::NotFound, "no such name")),
        }
    }
}

/// A resolver that must not be asked (names go to the upstream proxy).
pub struct NoResolver;

#[async_trait]
impl Resolve for NoResolver {
    async fn resolve(&self, host: &str, _: u16) -> io::Result<Vec<SocketAddr>> {
        panic!("{host} was resolved locally");
    }
}

/// The default ranges without loopback, for servers on 127.0.0.1.
pub fn loopback_allowed() -> DeniedRanges {
    DeniedRanges::default().without(|r| r.net.contains(&IpAddr::from([127, 0, 0, 1])))
}

pub fn policy(allow: &[&str], ports: &[u16]) -> Policy {
    let mut policy = Policy::new(AllowHosts::parse(allow).unwrap());
    policy.allow_ports = ports.iter().copied().collect();
    policy.denied = loopback_allowed();
    policy
}

pub async fn start(policy: Policy, resolver: Arc<dyn Resolve>) -> (EgressHandle, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let handle = Egress::new(policy)
        .unwrap()
        .with_resolver(resolver)
        .spawn(listener);
    (handle, address)
}

/// An echo server; counts the connections it accepted.
pub async fn echo_server() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let (mut r, mut w) = stream.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    (address, accepted)
}

/// Reads up to and including the end of a response head.
pub async fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut byte))
            .await
            .expect("a response head in time")
            .unwrap();
        assert_ne!(
            n,
            0,
            "closed before a head: {}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}

/// Sends `request` and reads everything until the egress closes.
pub async fn exchange(proxy: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    stream.write_all(request).await.unwrap();
    read_to_close(&mut stream).await
}

pub async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut out))
        .await
        .expect("the egress closes in time")
        .unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

pub fn connect(authority: &str) -> Vec<u8> {
    format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n").into_bytes()
}

/// Whatever else arrives within a short while: nothing should, after a
/// forwarded request.
pub async fn anything_more(stream: &mut TcpStream) -> Option<String> {
    let mut extra = vec![0u8; 4096];
    match tokio::time::timeout(Duration::from_millis(300), stream.read(&mut extra)).await {
        Ok(Ok(n)) if n > 0 => Some(format!("MORE: {}", String::from_utf8_lossy(&extra[..n]))),
        _ => None,
    }
}

/// A one-request HTTP server: records the request head and body it got
/// (and anything sent after them), answers `body`, closes.
pub async fn origin_server(body: &'static str) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let head = read_head(&mut stream).await;
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .map_or(0, |n| n.trim().parse::<usize>().unwrap());
            let mut request_body = vec![0u8; length];
            stream.read_exact(&mut request_body).await.unwrap();
            record
                .lock()
                .unwrap()
                .push(format!("{head}{}", String::from_utf8_lossy(&request_body)));
            if let Some(more) = anything_more(&mut stream).await {
                record.lock().unwrap().push(more);
            }
            let answer = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(answer.as_bytes()).await.unwrap();
        }
    });
    (address, seen)
}

/// A tiny upstream proxy: records each request head, answers `status`,
/// then echoes (a tunnel) or closes (a forwarded request).
pub async fn upstream_proxy(status: &'static str) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let record = record.clone();
            tokio::spawn(async move {
                let head = read_head(&mut stream).await;
                let tunnel = head.starts_with("CONNECT ");
                record.lock().unwrap().push(head);
                if !tunnel {
                    if let Some(more) = anything_more(&mut stream).await {
                        record.lock().unwrap().push(more);
                    }
                }
                let answer = format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n");
                stream.write_all(answer.as_bytes()).await.unwrap();
                if !tunnel {
                    // A forwarded request: one answer, then close.
                    return;
                }
                let (mut r, mut w) = stream.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    (address, seen)
}

#[derive(Clone)]
pub struct LogWriter(pub Arc<Mutex<Vec<u8>>>);

impl io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Lifts this process's soft limit on open files to at least `wanted`
/// (within the hard limit), for tests holding many sockets; fails when
/// the hard limit is lower, saying so, rather than failing obscurely.
pub fn raise_open_files_limit(wanted: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the struct given.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        assert!(
            limit.rlim_max >= wanted,
            "this test needs {wanted} open files; the hard limit is {}",
            limit.rlim_max
        );
        if limit.rlim_cur < wanted {
            limit.rlim_cur = wanted;
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
        }
    }
}
