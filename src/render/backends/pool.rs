//! Backend pools: a model served by several endpoints (`urls = [...]`). Each job goes to the
//! least busy healthy endpoint (fewest requests in flight, then the lowest recent latency); an
//! endpoint that fails `down_after` calls in a row is marked down for `probe_secs`, then probed
//! (a cheap GET of the server's status route) before it gets work again. A job whose endpoint
//! fails moves on to the next one within the same render, so it is charged once whatever
//! happens.
//!
//! Endpoint health is shared by every model and edit configured with the same server.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::http::{self, CallError};
use super::{BackendConfig, BackendKind};

/// One server of a pool.
pub struct Endpoint {
    pub kind: BackendKind,
    /// Base URL (no trailing slash, no `/v1`).
    pub url: String,
    in_flight: AtomicUsize,
    ok: AtomicU64,
    failed: AtomicU64,
    /// A probe is running (one at a time; other jobs treat the endpoint as down meanwhile).
    probing: AtomicBool,
    health: Mutex<Health>,
}

#[derive(Default)]
struct Health {
    /// Failed calls in a row.
    failures: u32,
    /// Down (no work) until this instant; then probed.
    down_until: Option<Instant>,
    last_error: Option<String>,
    /// Moving average of successful call times, seconds.
    latency: Option<f64>,
}

/// What `pictor backends status` and `/metrics` show of an endpoint (shared with the
/// `Renderer` trait).
pub use pictor_core::EndpointStatus;

impl Endpoint {
    pub fn new(kind: BackendKind, url: &str) -> Endpoint {
        Endpoint {
            kind,
            url: http::base(url).to_owned(),
            in_flight: AtomicUsize::new(0),
            ok: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            probing: AtomicBool::new(false),
            health: Mutex::default(),
        }
    }

    fn health(&self) -> std::sync::MutexGuard<'_, Health> {
        self.health.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Whether it takes work now (`Some(false)`: down but due for a probe).
    fn available(&self, now: Instant) -> Option<bool> {
        match self.health().down_until {
            None => Some(true),
            Some(until) if until <= now => Some(false),
            Some(_) => None,
        }
    }

    fn latency(&self) -> f64 {
        self.health().latency.unwrap_or(0.0)
    }

    /// A call answered (successfully, or with a refusal no other server would change).
    pub fn answered(&self, took: Option<Duration>) {
        self.ok.fetch_add(1, Ordering::Relaxed);
        let mut h = self.health();
        h.failures = 0;
        h.down_until = None;
        if let Some(t) = took {
            let s = t.as_secs_f64();
            h.latency = Some(h.latency.map_or(s, |avg| avg + 0.3 * (s - avg)));
        }
    }

    /// A call failed for want of the server; after `down_after` in a row it is down for
    /// `down_for`.
    pub fn failed(&self, error: &str, down_after: u32, down_for: Duration) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        let mut h = self.health();
        h.failures += 1;
        h.last_error = Some(error.to_owned());
        if h.failures >= down_after {
            h.down_until = Some(Instant::now() + down_for);
        }
    }

    /// Probes the endpoint if it is down and due, and no other job is probing it already.
    fn probe_if_due(&self, cfg: &BackendConfig, now: Instant) {
        if self.available(now) == Some(false)
            && self
                .probing
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            self.probe(cfg);
            self.probing.store(false, Ordering::SeqCst);
        }
    }

    /// A cheap GET of the server's status route; 2xx means up.
    pub fn probe(&self, cfg: &BackendConfig) -> bool {
        let url = match self.kind {
            BackendKind::OpenAi => format!("{}/v1/models", self.url),
            BackendKind::A1111 => format!("{}/sdapi/v1/progress?skip_current_image=true", self.url),
            BackendKind::ComfyUi => format!("{}/system_stats", self.url),
        };
        let up = http::block_on(async {
            let client = reqwest::Client::builder()
                .timeout(Duration::from_secs(3))
                .build()
                .map_err(|e| CallError::Refused(e.to_string()))?;
            match http::authorized(cfg, client.get(&url)).send().await {
                Ok(r) if r.status().is_success() => Ok(()),
                Ok(r) => Err(CallError::Unavailable(format!(
                    "probe answered HTTP {}",
                    r.status().as_u16()
                ))),
                Err(e) => Err(CallError::Unavailable(format!("probe failed: {e}"))),
            }
        });
        match up {
            Ok(()) => {
                let mut h = self.health();
                h.failures = 0;
                h.down_until = None;
                true
            }
            Err(CallError::Unavailable(m) | CallError::Refused(m) | CallError::Overloaded(m)) => {
                let mut h = self.health();
                h.last_error = Some(m);
                h.down_until = Some(Instant::now() + Duration::from_secs(cfg.probe_secs));
                false
            }
            Err(CallError::Cancelled) => false,
        }
    }

    pub fn status(&self, serves: Vec<String>) -> EndpointStatus {
        let h = self.health();
        let now = Instant::now();
        EndpointStatus {
            url: self.url.clone(),
            kind: self.kind.as_str().to_owned(),
            serves,
            up: h.down_until.is_none(),
            in_flight: self.in_flight(),
            requests_ok: self.ok.load(Ordering::Relaxed),
            requests_failed: self.failed.load(Ordering::Relaxed),
            latency_ms: h.latency.map(|s| (s * 1000.0).round() as u64),
            last_error: h.last_error.clone(),
            down_for_secs: h
                .down_until
                .map(|u| u.saturating_duration_since(now).as_secs()),
        }
    }
}

/// Counts a call in flight for as long as it lives.
pub struct InFlight<'a>(&'a Endpoint);

impl<'a> InFlight<'a> {
    pub fn new(e: &'a Endpoint) -> InFlight<'a> {
        e.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(e)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A model's (or the edits') servers.
pub struct Pool {
    pub cfg: BackendConfig,
    pub endpoints: Vec<Arc<Endpoint>>,
    /// Choosing and counting the chosen endpoint busy happen under this lock, so jobs arriving
    /// together spread out instead of all seeing the same idle endpoint.
    choosing: Mutex<()>,
}

impl Pool {
    pub fn new(cfg: BackendConfig, endpoints: Vec<Arc<Endpoint>>) -> Pool {
        Pool {
            cfg,
            endpoints,
            choosing: Mutex::new(()),
        }
    }

    /// The endpoint for the next call, skipping those in `tried`, counted busy until the
    /// returned guard drops: the least busy that is up (then the fastest). Endpoints whose rest
    /// is over are probed first (one probe at a time each), so a recovered server rejoins even
    /// while its peers carry the load. `None` when every untried endpoint is down. A single
    /// endpoint is always used (its own retries decide), as before pools existed.
    pub fn pick(&self, tried: &[usize]) -> Option<(usize, InFlight<'_>)> {
        if self.endpoints.len() == 1 {
            return (!tried.contains(&0)).then(|| (0, InFlight::new(&self.endpoints[0])));
        }
        for (i, e) in self.endpoints.iter().enumerate() {
            if !tried.contains(&i) {
                e.probe_if_due(&self.cfg, Instant::now());
            }
        }
        let _choosing = self.choosing.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let best = (0..self.endpoints.len())
            .filter(|i| !tried.contains(i))
            .filter(|&i| self.endpoints[i].available(now) == Some(true))
            .min_by(|&a, &b| {
                let (ea, eb) = (&self.endpoints[a], &self.endpoints[b]);
                ea.in_flight()
                    .cmp(&eb.in_flight())
                    .then(ea.latency().total_cmp(&eb.latency()))
                    .then(a.cmp(&b))
            })?;
        Some((best, InFlight::new(&self.endpoints[best])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(n: usize) -> Pool {
        let cfg: BackendConfig = toml::from_str(
            "kind = \"a1111\"\nurls = [\"http://127.0.0.1:1\", \"http://127.0.0.1:2\", \"http://127.0.0.1:3\"]\nprobe_secs = 60\n",
        )
        .unwrap();
        let endpoints = (0..n)
            .map(|i| {
                Arc::new(Endpoint::new(
                    cfg.kind,
                    &format!("http://127.0.0.1:{}", i + 1),
                ))
            })
            .collect();
        Pool::new(cfg, endpoints)
    }

    fn pick(p: &Pool, tried: &[usize]) -> Option<usize> {
        p.pick(tried).map(|(i, _)| i)
    }

    #[test]
    fn least_busy_then_fastest_and_down_ones_skipped() {
        let p = pool(3);
        assert_eq!(pick(&p, &[]), Some(0));
        let _a = InFlight::new(&p.endpoints[0]);
        assert_eq!(pick(&p, &[]), Some(1), "least in flight");
        p.endpoints[1].answered(Some(Duration::from_secs(3)));
        p.endpoints[2].answered(Some(Duration::from_secs(1)));
        assert_eq!(pick(&p, &[]), Some(2), "same load: the faster");
        p.endpoints[2].failed("boom", 1, Duration::from_secs(60));
        assert_eq!(pick(&p, &[]), Some(1), "down ones get no work");
        assert_eq!(pick(&p, &[1]), Some(0), "a job moves on past what it tried");
        assert!(!p.endpoints[2].status(vec![]).up);
        assert_eq!(
            p.endpoints[2].status(vec![]).last_error.as_deref(),
            Some("boom")
        );
    }

    #[test]
    fn a_due_endpoint_is_probed_and_stays_down_when_the_probe_fails() {
        let p = pool(2);
        p.endpoints[0].failed("x", 1, Duration::ZERO);
        p.endpoints[1].failed("x", 1, Duration::from_secs(60));
        // Endpoint 0 is due: probed (nothing listens on port 1), fails, stays down.
        assert_eq!(pick(&p, &[]), None);
        assert!(!p.endpoints[0].status(vec![]).up);
    }
}
