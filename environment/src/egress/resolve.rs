//! Name resolution for the egress: each name looked up once for all the
//! connections that want it, kept a short while, with few lookups at once.
//!
//! A package manager opens hundreds of connections to one or two names in
//! a burst (npm 9 through a proxy opens one tunnel per request, all of a
//! tree's tarballs at once). Looking the name up again for each of them
//! sends the host's DNS server a burst of identical queries: measured on
//! this project's CI, its server answered 16 parallel `getaddrinfo` calls
//! in milliseconds, dropped some of 32 (glibc retries after 5 s), and
//! failed a fifth of 64 after 10 s, which the egress reported as
//! "resolution timed out" and npm as retried or failed fetches. So:
//!
//! * concurrent requests for one name share one lookup (a lookup is a
//!   task of its own, finished even when the connection that started it
//!   gave up, so a burst never turns into a lookup per connection);
//! * a successful answer is reused for [`ANSWER_TTL`] (`getaddrinfo`
//!   gives no TTL); a failure is not kept, the next request asks again;
//! * at most [`MAX_LOOKUPS`] lookups of distinct names run at once, so a
//!   setup asking for many names (under a `*.example.org` entry) cannot
//!   burst the host's resolver either;
//! * at most [`MAX_NAMES`] names are kept.
//!
//! Caching weakens nothing: the addresses are still checked against the
//! denied ranges by every connection before it connects to them, and are
//! the addresses it connects to.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{watch, Semaphore};
use tokio::time::Instant;

/// Name resolution, replaceable so tests can map an allowed name to a
/// private address without touching the host's DNS.
#[async_trait]
pub trait Resolve: Send + Sync + 'static {
    async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>>;
}

/// The host's resolver (`getaddrinfo`, through tokio).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

#[async_trait]
impl Resolve for SystemResolver {
    async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        Ok(tokio::net::lookup_host((host, port)).await?.collect())
    }
}

/// How long an answer is reused. Short, as `getaddrinfo` says nothing of
/// the record's TTL; long enough that a setup's burst is one lookup.
pub const ANSWER_TTL: Duration = Duration::from_secs(60);

/// Lookups of distinct names at once: well under the 16 parallel queries
/// the CI's DNS server answered without dropping one.
pub const MAX_LOOKUPS: usize = 4;

/// Names kept at most; past it, expired answers are dropped, then all.
pub const MAX_NAMES: usize = 256;

/// A lookup's result, as every waiter gets it (an `io::Error` is not
/// `Clone`: its text is what a refusal shows).
type Answer = Result<(Vec<IpAddr>, Instant), String>;

/// One name's lookup: pending (`None`) until its task sends the answer.
struct Slot {
    answer: watch::Receiver<Option<Answer>>,
}

impl Slot {
    /// Pending, or answered within `ttl`.
    fn usable(&self, now: Instant, ttl: Duration) -> bool {
        match &*self.answer.borrow() {
            None => true,
            Some(Ok((_, at))) => now.saturating_duration_since(*at) < ttl,
            Some(Err(_)) => false,
        }
    }
}

/// How the egress's lookups went, for its summary.
#[derive(Debug, Default)]
pub(crate) struct LookupCounters {
    /// Lookups asked of the underlying resolver.
    pub lookups: AtomicU64,
    /// Requests answered by a lookup another request started, or a kept
    /// answer.
    pub shared: AtomicU64,
    /// Lookups that failed.
    pub failed: AtomicU64,
}

/// The egress's resolver: the underlying one (the host's), shared and
/// kept as the module says.
pub(crate) struct Resolver {
    inner: Arc<dyn Resolve>,
    ttl: Duration,
    names: Mutex<HashMap<String, Arc<Slot>>>,
    lookups: Arc<Semaphore>,
    pub counters: LookupCounters,
}

impl Resolver {
    pub fn new(inner: Arc<dyn Resolve>) -> Arc<Self> {
        Self::with_ttl(inner, ANSWER_TTL)
    }

    fn with_ttl(inner: Arc<dyn Resolve>, ttl: Duration) -> Arc<Self> {
        Arc::new(Resolver {
            inner,
            ttl,
            names: Mutex::new(HashMap::new()),
            lookups: Arc::new(Semaphore::new(MAX_LOOKUPS)),
            counters: LookupCounters::default(),
        })
    }

    /// The addresses `name` resolves to, with `port`. Waits for a lookup
    /// under way rather than starting another; the caller bounds the wait.
    pub async fn resolve(self: &Arc<Self>, name: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        let mut answer = self.slot(name, port).answer.clone();
        let answer = match answer.wait_for(Option::is_some).await {
            Ok(answer) => answer.clone(),
            // The lookup's task ended without an answer (it panicked).
            Err(_) => Some(Err("the lookup failed".to_owned())),
        };
        match answer {
            Some(Ok((ips, _))) => Ok(ips
                .into_iter()
                .map(|ip| SocketAddr::new(ip, port))
                .collect()),
            Some(Err(problem)) => Err(io::Error::other(problem)),
            None => unreachable!("waited for an answer"),
        }
    }

    /// The slot to wait on for `name`: a usable one, or a new one whose
    /// lookup has just been started.
    fn slot(self: &Arc<Self>, name: &str, port: u16) -> Arc<Slot> {
        let now = Instant::now();
        let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = names.get(name).filter(|slot| slot.usable(now, self.ttl)) {
            self.counters.shared.fetch_add(1, Ordering::Relaxed);
            return slot.clone();
        }
        if names.len() >= MAX_NAMES {
            names.retain(|_, slot| slot.usable(now, self.ttl));
            if names.len() >= MAX_NAMES {
                names.clear();
            }
        }
        let (sender, receiver) = watch::channel(None);
        let slot = Arc::new(Slot { answer: receiver });
        names.insert(name.to_owned(), slot.clone());
        drop(names);
        self.counters.lookups.fetch_add(1, Ordering::Relaxed);
        // A task of its own: the lookup finishes (and its answer is kept)
        // even when every connection waiting for it has given up, and
        // holds its permit until the underlying resolver returns, so
        // lookups at once stay bounded even when the resolver hangs.
        let this = self.clone();
        let name = name.to_owned();
        let started = slot.clone();
        tokio::spawn(async move {
            let answer = match this.lookups.clone().acquire_owned().await {
                Ok(_permit) => match this.inner.resolve(&name, port).await {
                    Ok(addresses) => Ok((
                        addresses.iter().map(SocketAddr::ip).collect(),
                        Instant::now(),
                    )),
                    Err(e) => Err(e.to_string()),
                },
                Err(_) => Err("the resolver is closed".to_owned()),
            };
            if answer.is_err() {
                this.counters.failed.fetch_add(1, Ordering::Relaxed);
                // Not kept: the next request for the name asks again.
                let mut names = this.names.lock().unwrap_or_else(|e| e.into_inner());
                if names.get(&name).is_some_and(|s| Arc::ptr_eq(s, &started)) {
                    names.remove(&name);
                }
            }
            sender.send_replace(Some(answer));
        });
        slot
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Answers after a delay, counting calls and the most at once.
    struct Slow {
        calls: AtomicUsize,
        now: AtomicUsize,
        most: AtomicUsize,
        fail: bool,
    }

    #[async_trait]
    impl Resolve for Slow {
        async fn resolve(&self, _: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(50)).await;
            self.now.fetch_sub(1, Ordering::SeqCst);
            match self.fail {
                true => Err(io::Error::other("no such name")),
                false => Ok(vec![SocketAddr::from(([192, 0, 2, 7], port))]),
            }
        }
    }

    fn slow(fail: bool) -> Arc<Slow> {
        Arc::new(Slow {
            calls: AtomicUsize::new(0),
            now: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
            fail,
        })
    }

    #[tokio::test]
    async fn a_burst_for_one_name_is_one_lookup_and_the_answer_is_kept() {
        let inner = slow(false);
        let resolver = Resolver::new(inner.clone());
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..200u16 {
            let resolver = resolver.clone();
            tasks.spawn(async move { resolver.resolve("registry.test", 1000 + i).await });
        }
        let mut ports = Vec::new();
        while let Some(done) = tasks.join_next().await {
            let addresses = done.unwrap().unwrap();
            assert_eq!(addresses.len(), 1);
            assert_eq!(addresses[0].ip(), IpAddr::from([192, 0, 2, 7]));
            ports.push(addresses[0].port());
        }
        // Each caller gets its own port, whoever's lookup answered it.
        ports.sort_unstable();
        assert_eq!(ports, (1000..1200).collect::<Vec<_>>());
        resolver.resolve("registry.test", 443).await.unwrap();
        assert_eq!(inner.calls.load(Ordering::SeqCst), 1);
        assert_eq!(resolver.counters.lookups.load(Ordering::SeqCst), 1);
        assert_eq!(resolver.counters.shared.load(Ordering::SeqCst), 200);
    }

    #[tokio::test]
    async fn an_answer_is_asked_again_once_its_time_is_up() {
        let inner = slow(false);
        let resolver = Resolver::with_ttl(inner.clone(), Duration::from_millis(300));
        resolver.resolve("registry.test", 443).await.unwrap();
        resolver.resolve("registry.test", 443).await.unwrap();
        assert_eq!(inner.calls.load(Ordering::SeqCst), 1);
        tokio::time::sleep(Duration::from_millis(400)).await;
        resolver.resolve("registry.test", 443).await.unwrap();
        assert_eq!(inner.calls.load(Ordering::SeqCst), 2);
        assert_eq!(Resolver::new(inner).ttl, ANSWER_TTL);
    }

    #[tokio::test]
    async fn distinct_names_are_looked_up_a_few_at_a_time() {
        let inner = slow(false);
        let resolver = Resolver::new(inner.clone());
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..40 {
            let resolver = resolver.clone();
            tasks.spawn(async move { resolver.resolve(&format!("n{i}.test"), 443).await });
        }
        while let Some(done) = tasks.join_next().await {
            done.unwrap().unwrap();
        }
        assert_eq!(inner.calls.load(Ordering::SeqCst), 40);
        assert_eq!(inner.most.load(Ordering::SeqCst), MAX_LOOKUPS);
    }

    #[tokio::test]
    async fn a_failure_reaches_every_waiter_and_is_not_kept() {
        let inner = slow(true);
        let resolver = Resolver::new(inner.clone());
        let (a, b) = tokio::join!(
            resolver.resolve("missing.test", 443),
            resolver.resolve("missing.test", 443)
        );
        assert_eq!(a.unwrap_err().to_string(), "no such name");
        assert_eq!(b.unwrap_err().to_string(), "no such name");
        assert_eq!(inner.calls.load(Ordering::SeqCst), 1);
        assert!(resolver.resolve("missing.test", 443).await.is_err());
        assert_eq!(inner.calls.load(Ordering::SeqCst), 2);
        assert_eq!(resolver.counters.failed.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_lookup_goes_on_when_its_first_waiter_gives_up() {
        let inner = slow(false);
        let resolver = Resolver::new(inner.clone());
        let gave_up = tokio::time::timeout(
            Duration::from_millis(5),
            resolver.resolve("registry.test", 443),
        )
        .await;
        assert!(gave_up.is_err());
        resolver.resolve("registry.test", 443).await.unwrap();
        assert_eq!(inner.calls.load(Ordering::SeqCst), 1);
    }
}
