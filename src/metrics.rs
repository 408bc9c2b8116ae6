//! Prometheus metrics (`GET /metrics`): HTTP requests and latency by route, jobs by state,
//! queue depth, render seconds per model, sign-ins ok/failed.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    pub route: &'static str,
    pub method: &'static str,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub route: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelLabels {
    pub model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HeldLabels {
    pub model: String,
    pub device: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GpuLabels {
    pub gpu: String,
    pub name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobLabels {
    pub kind: String,
    pub status: String,
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointLabels {
    pub endpoint: String,
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointResultLabels {
    pub endpoint: String,
    pub kind: String,
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: String,
}

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

fn render_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 2.0, 14))
}

pub struct Metrics {
    registry: Registry,
    pub http_requests: Family<HttpLabels, Counter>,
    pub http_seconds: Family<RouteLabels, Histogram, fn() -> Histogram>,
    pub render_seconds: Family<ModelLabels, Histogram, fn() -> Histogram>,
    pub jobs_created: Family<ModelLabels, Counter>,
    pub jobs_finished: Family<JobLabels, Counter>,
    pub jobs_active: Family<StateLabels, Gauge>,
    pub queue_depth: Gauge,
    pub signins: Family<ResultLabels, Gauge>,
    pub password_checks: Gauge,
    pub webhook_attempts: Family<ResultLabels, Counter>,
    pub backend_up: Family<EndpointLabels, Gauge>,
    pub backend_in_flight: Family<EndpointLabels, Gauge>,
    pub backend_requests: Family<EndpointResultLabels, Gauge>,
    pub backend_latency: Family<EndpointLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    pub store_commits: Gauge,
    pub store_flushes: Gauge,
    pub model_memory: Family<HeldLabels, Gauge>,
    pub gpu_memory_used: Family<GpuLabels, Gauge>,
    pub gpu_memory_total: Family<GpuLabels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("pictor");
        let http_requests = Family::<HttpLabels, Counter>::default();
        let http_seconds =
            Family::<RouteLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                latency_histogram as fn() -> Histogram,
            );
        let render_seconds =
            Family::<ModelLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                render_histogram as fn() -> Histogram,
            );
        let jobs_created = Family::<ModelLabels, Counter>::default();
        let jobs_finished = Family::<JobLabels, Counter>::default();
        let jobs_active = Family::<StateLabels, Gauge>::default();
        let queue_depth = Gauge::default();
        let signins = Family::<ResultLabels, Gauge>::default();
        let password_checks = Gauge::default();
        let webhook_attempts = Family::<ResultLabels, Counter>::default();
        let backend_up = Family::<EndpointLabels, Gauge>::default();
        let backend_in_flight = Family::<EndpointLabels, Gauge>::default();
        let backend_requests = Family::<EndpointResultLabels, Gauge>::default();
        let backend_latency =
            Family::<EndpointLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        let store_commits = Gauge::default();
        let store_flushes = Gauge::default();
        let model_memory = Family::<HeldLabels, Gauge>::default();
        let gpu_memory_used = Family::<GpuLabels, Gauge>::default();
        let gpu_memory_total = Family::<GpuLabels, Gauge>::default();
        registry.register(
            "model_memory_bytes",
            "Bytes of weights the built-in engine holds, by installed model and device (cpu, cuda:N)",
            model_memory.clone(),
        );
        registry.register(
            "gpu_memory_used_bytes",
            "GPU memory in use (every process), on the GPU the built-in engine runs on",
            gpu_memory_used.clone(),
        );
        registry.register(
            "gpu_memory_total_bytes",
            "GPU memory in all, on the GPU the built-in engine runs on",
            gpu_memory_total.clone(),
        );
        registry.register(
            "store_commits",
            "Store write transactions committed since start",
            store_commits.clone(),
        );
        registry.register(
            "store_durable_flushes",
            "Durable commits (fsyncs) since start; each covers every transaction committed before it (group commit)",
            store_flushes.clone(),
        );
        registry.register(
            "http_requests",
            "HTTP requests by route, method and status",
            http_requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "HTTP request latency by route",
            http_seconds.clone(),
        );
        registry.register(
            "render_duration_seconds",
            "Render time per model (on the blocking pool)",
            render_seconds.clone(),
        );
        registry.register(
            "jobs_created",
            "Jobs accepted, by model",
            jobs_created.clone(),
        );
        registry.register(
            "jobs_finished",
            "Jobs finished, by kind, status and failure code",
            jobs_finished.clone(),
        );
        registry.register(
            "jobs",
            "Jobs in flight in this process, by state (queued, running)",
            jobs_active.clone(),
        );
        registry.register(
            "render_queue_depth",
            "Jobs waiting for a render slot",
            queue_depth.clone(),
        );
        registry.register(
            "signins",
            "Web sign-in attempts since start, by result (ok, failed)",
            signins.clone(),
        );
        registry.register(
            "password_checks",
            "Passwords checked against their hash by the sign-in form since start (attempts refused earlier, by the throttle or the bot check, are not)",
            password_checks.clone(),
        );
        registry.register(
            "webhook_attempts",
            "Webhook delivery attempts, by result (delivered, retry, failed)",
            webhook_attempts.clone(),
        );
        registry.register(
            "backend_up",
            "Inference server endpoints: 1 up, 0 marked down",
            backend_up.clone(),
        );
        registry.register(
            "backend_in_flight",
            "Requests in flight per inference server endpoint",
            backend_in_flight.clone(),
        );
        registry.register(
            "backend_requests",
            "Calls per inference server endpoint since start, by result (ok, failed)",
            backend_requests.clone(),
        );
        registry.register(
            "backend_latency_seconds",
            "Moving average of successful call times per inference server endpoint",
            backend_latency.clone(),
        );
        Metrics {
            registry,
            http_requests,
            http_seconds,
            render_seconds,
            jobs_created,
            jobs_finished,
            jobs_active,
            queue_depth,
            signins,
            password_checks,
            webhook_attempts,
            backend_up,
            backend_in_flight,
            backend_requests,
            backend_latency,
            store_commits,
            store_flushes,
            model_memory,
            gpu_memory_used,
            gpu_memory_total,
        }
    }
}

impl Metrics {
    /// One request's count and duration. The labels are static strings (no allocation per
    /// request): the route's pattern, not its path, and the method's name.
    pub fn observe_http(
        &self,
        route: &'static str,
        method: &'static str,
        status: u16,
        seconds: f64,
    ) {
        self.http_requests
            .get_or_create(&HttpLabels {
                route,
                method,
                status,
            })
            .inc();
        self.http_seconds
            .get_or_create(&RouteLabels { route })
            .observe(seconds);
    }

    pub fn observe_render(&self, model: &str, seconds: f64) {
        self.render_seconds
            .get_or_create(&ModelLabels {
                model: model.to_string(),
            })
            .observe(seconds);
    }

    pub fn job_created(&self, model: &str) {
        self.jobs_created
            .get_or_create(&ModelLabels {
                model: model.to_string(),
            })
            .inc();
    }

    pub fn job_finished(&self, kind: &str, status: &str, code: &str) {
        self.jobs_finished
            .get_or_create(&JobLabels {
                kind: kind.into(),
                status: status.into(),
                code: code.into(),
            })
            .inc();
    }

    pub fn webhook_attempt(&self, result: &str) {
        self.webhook_attempts
            .get_or_create(&ResultLabels {
                result: result.into(),
            })
            .inc();
    }

    /// The built-in engine's memory (at each scrape): each loaded model's weights, and the GPU's
    /// memory when it runs on one.
    pub fn observe_engine(
        &self,
        loaded: &[(String, u64, String)],
        device: &pictor_core::gpu::EngineDevice,
    ) {
        // Models unloaded since the last scrape disappear rather than read their old size.
        self.model_memory.clear();
        for (name, bytes, device) in loaded {
            self.model_memory
                .get_or_create(&HeldLabels {
                    model: name.clone(),
                    device: device.clone(),
                })
                .set(*bytes as i64);
        }
        if let Some(g) = &device.gpu {
            let labels = GpuLabels {
                gpu: device.id.clone(),
                name: g.name.clone(),
            };
            self.gpu_memory_used
                .get_or_create(&labels)
                .set(g.memory_used as i64);
            self.gpu_memory_total
                .get_or_create(&labels)
                .set(g.memory_total as i64);
        }
    }

    /// Copies the inference servers' health into the gauges (at each scrape).
    pub fn observe_backends(&self, endpoints: &[crate::render::backends::pool::EndpointStatus]) {
        for e in endpoints {
            let labels = EndpointLabels {
                endpoint: e.url.clone(),
                kind: e.kind.clone(),
            };
            self.backend_up.get_or_create(&labels).set(i64::from(e.up));
            self.backend_in_flight
                .get_or_create(&labels)
                .set(e.in_flight as i64);
            if let Some(ms) = e.latency_ms {
                self.backend_latency
                    .get_or_create(&labels)
                    .set(ms as f64 / 1000.0);
            }
            for (result, n) in [("ok", e.requests_ok), ("failed", e.requests_failed)] {
                self.backend_requests
                    .get_or_create(&EndpointResultLabels {
                        endpoint: e.url.clone(),
                        kind: e.kind.clone(),
                        result: result.into(),
                    })
                    .set(n as i64);
            }
        }
    }

    /// The text exposition (OpenMetrics text, which Prometheus reads).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// A bounded route label for a request path (ids and tokens replaced by placeholders).
/// The name of a request method for the metrics' label (`other` for extension methods).
pub fn method_label(method: &poem::http::Method) -> &'static str {
    use poem::http::Method;
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::PATCH => "PATCH",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

pub fn route_label(path: &str) -> &'static str {
    let fixed = [
        "/api/pictor/v1/generate",
        "/api/pictor/v1/edit",
        "/api/pictor/v1/me",
        "/api/pictor/v1/models",
        "/api/pictor/openapi.json",
        "/api/pictor/",
        "/api/pictor",
        "/oauth/authorize",
        "/oauth/token",
        "/oauth/revoke",
        "/oauth/logout",
        "/oauth/userinfo",
        "/oauth/jwks",
        "/.well-known/openid-configuration",
        "/login",
        "/login/totp",
        "/logout",
        "/register",
        "/forgot",
        "/reset",
        "/lang",
        "/setup",
        "/account",
        "/admin",
        "/playground",
        "/playground/api/generate",
        "/playground/api/edit",
        "/playground/api/me",
        "/playground/api/gallery",
        "/metrics",
        "/healthz",
        "/",
    ];
    if let Some(f) = fixed.iter().find(|f| **f == path) {
        return f;
    }
    for (prefix, label) in [
        ("/api/pictor/v1/jobs/", "/api/pictor/v1/jobs/{job_id}"),
        ("/playground/api/jobs/", "/playground/api/jobs/{job_id}"),
        ("/api/pictor/docs", "/api/pictor/docs"),
        ("/files/", "/files/{name}"),
        ("/avatars/", "/avatars/{name}"),
        ("/static/", "/static/{file}"),
        ("/account/", "/account/{action}"),
        ("/admin/", "/admin/{action}"),
    ] {
        if path.starts_with(prefix) {
            return label;
        }
    }
    "other"
}
