//! Against the real package registries this machine reaches, their hosts
//! taken from the package managers at run time (no registry's name is
//! written in the project).

use std::net::SocketAddr;
use std::process::Command;

use forgehand_environment::egress::{AllowHosts, Egress, EgressHandle, Outcome, Policy};
use forgehand_environment::hosts::{propose, read_sources, Manager};
use tokio::net::TcpListener;

const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// npm's registry URL, from npm itself.
fn npm_registry() -> url::Url {
    let output = Command::new("npm")
        .args(["config", "get", "registry"])
        .output()
        .expect("npm is needed for this test: install it (Debian: apt-get install npm)");
    assert!(output.status.success(), "`npm config get registry` failed");
    let text = String::from_utf8(output.stdout).unwrap();
    url::Url::parse(text.trim()).expect("npm's registry is a URL")
}

/// The default policy (the default denied ranges, the host's resolver)
/// allowing `host` alone.
async fn egress_for(host: &str) -> (EgressHandle, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let policy = Policy::new(AllowHosts::parse([host]).unwrap());
    (Egress::new(policy).unwrap().spawn(listener), address)
}

fn client_through(proxy: SocketAddr) -> reqwest::Client {
    let bundle = std::fs::read(CA_BUNDLE)
        .unwrap_or_else(|e| panic!("{CA_BUNDLE} is needed (install ca-certificates): {e}"));
    let mut builder = reqwest::Client::builder()
        .proxy(reqwest::Proxy::all(format!("http://{proxy}")).unwrap())
        .timeout(std::time::Duration::from_secs(60));
    for certificate in reqwest::Certificate::from_pem_bundle(&bundle).unwrap() {
        builder = builder.add_root_certificate(certificate);
    }
    builder.build().unwrap()
}

#[tokio::test]
async fn an_https_get_reaches_npms_registry_through_the_egress() {
    let registry = npm_registry();
    let host = registry.host_str().expect("a registry host").to_owned();
    let (egress, proxy) = egress_for(&host).await;
    let response = client_through(proxy)
        .get(registry.clone())
        .send()
        .await
        .expect("the registry answers through the egress");
    assert!(response.status().is_success(), "{}", response.status());
    let body = response.bytes().await.unwrap();
    assert!(!body.is_empty());
    let summary = egress.shutdown().await;
    let record = &summary.records[0];
    assert_eq!(record.host.as_deref(), Some(host.as_str()), "{summary}");
    assert_eq!(record.outcome, Outcome::Allowed, "{summary}");
    assert!(record.bytes_down as usize > body.len(), "{summary}");
}

#[tokio::test]
async fn a_plain_http_get_reaches_the_apt_archive_through_the_egress() {
    let (sources, _) = read_sources(std::path::Path::new("/"));
    let source = sources
        .iter()
        .find(|s| s.uri.scheme() == "http" && !s.suites.is_empty() && !s.mirror_list)
        .expect("an http apt source in /etc/apt (Debian's default sources) is needed");
    let host = source.uri.host_str().unwrap().to_owned();
    let (egress, proxy) = egress_for(&host).await;
    let release = format!(
        "{}/dists/{}/Release",
        source.uri.as_str().trim_end_matches('/'),
        source.suites[0]
    );
    let response = client_through(proxy).get(&release).send().await.unwrap();
    assert!(
        response.status().is_success(),
        "{release}: {}",
        response.status()
    );
    let text = response.text().await.unwrap();
    assert!(
        text.contains("\nSuite: ") || text.contains("\nCodename: "),
        "{text:.300}"
    );
    let summary = egress.shutdown().await;
    assert_eq!(summary.records[0].outcome, Outcome::Allowed, "{summary}");
    assert_eq!(summary.records[0].port, Some(80));
}

#[tokio::test]
async fn the_proposal_finds_this_machines_npm_and_apt_hosts() {
    let proposal = propose().await;
    let shown = proposal.to_string();
    println!("{shown}");
    let npm_host = npm_registry().host_str().unwrap().to_owned();
    let npm = proposal
        .hosts
        .iter()
        .find(|h| h.managers.contains(&Manager::Npm))
        .unwrap_or_else(|| panic!("no npm host:\n{shown}"));
    assert_eq!(npm.host, npm_host);
    assert!(
        proposal
            .hosts
            .iter()
            .any(|h| h.managers.contains(&Manager::Apt)),
        "no apt host:\n{shown}"
    );
    // pip is found, or the proposal says why not.
    assert!(
        proposal
            .hosts
            .iter()
            .any(|h| h.managers.contains(&Manager::Pip))
            || proposal.notes.iter().any(|n| n.starts_with("pip")),
        "{shown}"
    );
    // Every proposed host is one the egress accepts as an entry.
    AllowHosts::parse(proposal.allow_hosts()).unwrap();
}

/// A burst of tunnels to npm's registry through the egress, with the
/// host's resolver, as `npm install` opens them: every one is opened.
/// Each asking the host's resolver on its own failed here: this
/// machine's DNS server drops queries beyond a few dozen at once, and
/// the egress answered "resolution timed out" (issue 26).
#[tokio::test]
async fn a_burst_of_tunnels_to_npms_registry_all_open_with_one_lookup() {
    const TUNNELS: usize = 200;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = npm_registry()
        .host_str()
        .expect("a registry host")
        .to_owned();
    let (egress, proxy) = egress_for(&host).await;
    let request = format!("CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n");
    let started = std::time::Instant::now();
    let mut tunnels = tokio::task::JoinSet::new();
    for _ in 0..TUNNELS {
        let request = request.clone();
        tunnels.spawn(async move {
            let mut stream = tokio::net::TcpStream::connect(proxy).await.unwrap();
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut answer = vec![0u8; 512];
            let n =
                tokio::time::timeout(std::time::Duration::from_secs(30), stream.read(&mut answer))
                    .await
                    .expect("an answer within 30 s")
                    .unwrap();
            String::from_utf8_lossy(&answer[..n]).into_owned()
        });
    }
    let mut refused = Vec::new();
    while let Some(answer) = tunnels.join_next().await {
        let answer = answer.unwrap();
        if !answer.starts_with("HTTP/1.1 200 ") {
            refused.push(answer);
        }
    }
    let took = started.elapsed();
    let summary = egress.shutdown().await;
    assert!(
        refused.is_empty(),
        "{} of {TUNNELS} refused, e.g. {:?}\n{summary}",
        refused.len(),
        refused[0]
    );
    assert_eq!(summary.load.lookups, 1, "{summary}");
    assert_eq!(summary.load.lookups_failed, 0, "{summary}");
    println!("{TUNNELS} tunnels in {took:?}\n{summary}");
}
