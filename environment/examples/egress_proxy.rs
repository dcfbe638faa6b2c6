//! The egress proxy on a local port, for measuring a package manager's
//! traffic through it against the same without it (bench/README.md):
//!
//!   cargo run --release -p forgehand-environment --example egress_proxy -- PORT HOST...
//!
//! Serves `127.0.0.1:PORT` with the default policy allowing HOST... (the
//! default ports, ranges, limits and the host's resolver), until stdin
//! closes; then prints the egress's summary.

use forgehand_environment::egress::{AllowHosts, Egress, Policy};
use tokio::io::AsyncReadExt;

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let port: u16 = args
        .next()
        .and_then(|p| p.parse().ok())
        .expect("usage: egress_proxy PORT HOST...");
    let hosts: Vec<String> = args.collect();
    let policy = Policy::new(AllowHosts::parse(&hosts).expect("valid hosts"));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("the port is free");
    let egress = Egress::new(policy).expect("a valid policy").spawn(listener);
    eprintln!("egress on 127.0.0.1:{port} for {hosts:?}; close stdin to stop");
    let mut sink = Vec::new();
    let _ = tokio::io::stdin().read_to_end(&mut sink).await;
    print!("{}", egress.shutdown().await);
}
