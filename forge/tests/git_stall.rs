//! A git server that accepts the connection and never answers: the call
//! times out as a passing fault (and is tried again), instead of holding
//! the worker for ever as libgit2's default (no timeout) did. Its own test
//! binary: the timeouts are the process's.

use std::io::Read;
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

use forgehand_forge::api::RetryPolicy;
use forgehand_forge::git::transport::{self, Credentials};
use forgehand_forge::git::MirrorCache;
use secrecy::SecretString;

#[test]
fn a_server_that_never_answers_times_out_and_is_tried_again() {
    transport::set_network_timeouts(Duration::from_secs(2), Duration::from_millis(500));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (accepted, connections) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            // Read the request, say nothing, keep the connection open.
            let mut buffer = [0u8; 4096];
            let _ = stream.read(&mut buffer);
            let _ = accepted.send(());
            std::mem::forget(stream);
        }
    });

    let url = format!("http://127.0.0.1:{port}/demo.git");
    let (done, outcome) = mpsc::channel();
    let work = tempfile::tempdir().unwrap();
    let cache = MirrorCache::new(work.path().join("cache")).with_retry(RetryPolicy {
        attempts: 2,
        first_backoff: Duration::from_millis(10),
        longest_wait: Duration::from_millis(10),
    });
    std::thread::spawn(move || {
        let credentials = Credentials::Token {
            username: "bot".into(),
            token: SecretString::from("ghs_stall-token-0123456789".to_owned()),
        };
        let result = cache.update("github/acme/demo", &url, &credentials);
        let _ = done.send(result.err());
    });
    // A hang detector (the fetch takes about two read timeouts): how soon
    // it comes back is not asserted, only that it does.
    let error = outcome
        .recv_timeout(Duration::from_secs(60))
        .expect("hung: the fetch did not come back within 60 s: it waits for ever");
    let error = error.expect("a server that never answers is an error");
    assert!(error.is_transient(), "{error:?}");
    let message = error.to_string();
    assert!(
        message.starts_with(&format!("git fetch http://127.0.0.1:{port}/demo.git: "))
            && message.contains("timed out")
            && message.ends_with("(2 tries)"),
        "{message}"
    );
    // Each try's request reached the server (the server says so once it
    // has read it, which may come after the client gave up on a loaded
    // machine: waited for, not counted at once).
    for n in 1..=2 {
        connections
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("hung: request {n} never reached the server"));
    }
    assert!(connections.try_recv().is_err(), "tried twice, not more");
}
