//! The webhook delivery worker: takes due notifications from the store's outbox, POSTs each
//! job's body (signed) to its `webhook_url`, and records the attempt. At least once: a delivery
//! answered but not yet recorded when the process dies is sent again after the restart, with the
//! same `Pictor-Webhook-Id`. Failures are retried with exponential backoff (the operator's
//! `webhooks.retry_ms`, doubled per attempt, at most an hour, ±20 % jitter) up to
//! `webhooks.max_attempts`; the schedule lives in the store, so it survives restarts.

use crate::lock;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::RngExt;
use tokio::sync::{Semaphore, watch};
use tracing::{debug, info, warn};

use crate::api::jobs::job_view;
use crate::clock::Millis;
use crate::jobs::service::Snapshot;
use crate::jobs::webhooks::{self, ResolveError};
use crate::state::AppState;
use crate::store::JobRecord;
use crate::store::webhooks::Attempt;

/// Deliveries in flight at once.
const PARALLEL: usize = 8;
/// How long one delivery may take (connect, send, answer).
const TIMEOUT: Duration = Duration::from_secs(15);
/// Longest wait between attempts.
const MAX_BACKOFF_MS: u64 = 3_600_000;
/// Longest the worker sleeps without looking at the outbox.
const IDLE: Duration = Duration::from_secs(30);

/// Starts the worker; it ends when `stop` turns true.
pub fn spawn(state: AppState, stop: watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(run(state, stop))
}

async fn run(state: AppState, mut stop: watch::Receiver<bool>) {
    let wake = state.jobs.ended_signal();
    let in_flight: Arc<Mutex<HashSet<u128>>> = Arc::default();
    // Jobs whose last attempt could not be recorded: not sent again before this instant.
    let held: Arc<Mutex<HashMap<u128, Instant>>> = Arc::default();
    let permits = Arc::new(Semaphore::new(PARALLEL));
    loop {
        let now = state.clock.now();
        let due = state.store.call(move |s| s.webhooks_due(now, 256)).await;
        lock(&held).retain(|_, until| *until > Instant::now());
        let next = match due {
            Ok((jobs, next)) => {
                for job in jobs {
                    if lock(&held).contains_key(&job.id) || !lock(&in_flight).insert(job.id) {
                        continue;
                    }
                    let permit = tokio::select! {
                        p = permits.clone().acquire_owned() => p,
                        _ = stop.wait_for(|s| *s) => return,
                    };
                    let Ok(permit) = permit else { return };
                    let (state, in_flight, held, wake) =
                        (state.clone(), in_flight.clone(), held.clone(), wake.clone());
                    tokio::spawn(async move {
                        let id = job.id;
                        if !deliver_and_record(&state, job).await {
                            let pause =
                                state.config.webhooks.retry_base.max(Duration::from_secs(1));
                            lock(&held).insert(id, Instant::now() + pause);
                        }
                        lock(&in_flight).remove(&id);
                        drop(permit);
                        wake.notify_one();
                    });
                }
                next
            }
            Err(e) => {
                warn!(error = %e, "cannot read the webhook outbox");
                None
            }
        };
        let mut sleep = next.map_or(IDLE, |at| {
            Duration::from_millis(at.saturating_sub(state.clock.now())).min(IDLE)
        });
        if !lock(&held).is_empty() {
            sleep = sleep.min(Duration::from_secs(1));
        }
        tokio::select! {
            () = tokio::time::sleep(sleep) => {}
            () = wake.notified() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// The wait before attempt `n + 1` after `n` failed ones.
fn backoff(base: Duration, failed: u32) -> Millis {
    let base = base.as_millis() as u64;
    let wait = base
        .saturating_mul(1u64 << failed.saturating_sub(1).min(30))
        .min(MAX_BACKOFF_MS);
    let jitter = rand::rng().random_range(0.8..1.2);
    ((wait as f64) * jitter) as Millis
}

/// One attempt, recorded. `false` when the attempt could not be recorded (it will be made
/// again: the receiver sees the same webhook id).
async fn deliver_and_record(state: &AppState, job: JobRecord) -> bool {
    let id = job.job_id();
    let Some(hook) = job.webhook.clone() else {
        return true;
    };
    let failed_before = hook.attempts;
    // The outbox may have been read before an earlier pass over this job finished: send only
    // what is still due as read.
    let current = state.store.call(move |s| s.job(id)).await;
    let now = state.clock.now();
    let still_due = matches!(&current, Ok(Some(j)) if j.webhook.as_ref().is_some_and(|w| {
        w.status == crate::store::WebhookStatus::Pending
            && w.attempts == failed_before
            && w.next_attempt_at.is_some_and(|t| t <= now)
    }));
    if !still_due {
        return current.is_ok();
    }
    let outcome = deliver(state, &job, &hook.url, failed_before + 1).await;
    let now = state.clock.now();
    let opts = &state.config.webhooks;
    let attempt = match outcome {
        Ok(()) => {
            info!(job = %id, attempt = failed_before + 1, "webhook delivered");
            Attempt::Delivered
        }
        Err(Failure::Final(error)) => {
            warn!(job = %id, %error, "webhook given up");
            Attempt::GiveUp { error }
        }
        Err(Failure::Retry(error)) if failed_before + 1 >= opts.max_attempts => {
            warn!(job = %id, %error, attempts = failed_before + 1, "webhook given up after its last attempt");
            Attempt::GiveUp { error }
        }
        Err(Failure::Retry(error)) => {
            let next_at = now + backoff(opts.retry_base, failed_before + 1);
            debug!(job = %id, %error, attempt = failed_before + 1, "webhook attempt failed; retrying");
            Attempt::Retry { error, next_at }
        }
    };
    state.metrics.webhook_attempt(match &attempt {
        Attempt::Delivered => "delivered",
        Attempt::Retry { .. } => "retry",
        Attempt::GiveUp { .. } => "failed",
    });
    match state
        .store
        .call(move |s| s.webhook_attempted(id, failed_before, attempt, now))
        .await
    {
        Ok(_) => true,
        Err(e) => {
            // The row stays due; it is sent again (the receiver sees the same webhook id).
            warn!(job = %id, error = %e, "cannot record a webhook attempt");
            false
        }
    }
}

enum Failure {
    Retry(String),
    Final(String),
}

/// The body a job's webhook carries: the job as `GET /v1/jobs/{id}` shows it, without the
/// delivery's own (changing) record.
pub fn body(state: &AppState, job: JobRecord) -> Result<Vec<u8>, String> {
    let balance = state
        .store
        .user(job.user_id)
        .map_err(|e| e.to_string())?
        .map_or(0, |u| u.balance);
    let mut view = job_view(
        state,
        &Snapshot {
            job,
            balance,
            live: None,
        },
    );
    view.webhook = None;
    serde_json::to_vec(&poem_openapi::types::ToJSON::to_json(&view)).map_err(|e| e.to_string())
}

async fn deliver(
    state: &AppState,
    job: &JobRecord,
    raw: &str,
    attempt: u32,
) -> Result<(), Failure> {
    let allow_private = state.config.webhooks.allow_private;
    let url = webhooks::check_url(raw, allow_private).map_err(Failure::Final)?;
    let addrs = webhooks::resolve(&url, allow_private)
        .await
        .map_err(|e| match e {
            ResolveError::Refused(m) => Failure::Final(format!("refused: {m}")),
            ResolveError::Dns(m) => Failure::Retry(m),
        })?;
    let (user_id, now) = (job.user_id, state.clock.now());
    let secrets = state.idp.secrets.clone();
    let keys = state
        .store
        .call(move |s| webhooks::signing_secrets(s, &secrets, user_id, now))
        .await
        .map_err(|e| Failure::Retry(format!("cannot read the signing secret: {e}")))?;
    let body = body(state, job.clone()).map_err(Failure::Retry)?;
    let t = now / 1000;
    let signature = webhooks::signature(&keys, t, &body);

    let mut client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(TIMEOUT)
        .connect_timeout(Duration::from_secs(10))
        .no_proxy();
    if let Some(host) = url.host_str().filter(|_| url.domain().is_some()) {
        // Connect to exactly the addresses checked above.
        client = client.resolve_to_addrs(host, &addrs);
    }
    let client = client
        .build()
        .map_err(|e| Failure::Retry(format!("cannot build the HTTP client: {e}")))?;
    let answer = client
        .post(url.as_str())
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(
            reqwest::header::USER_AGENT,
            concat!("Pictor-Webhooks/", env!("CARGO_PKG_VERSION")),
        )
        .header("Pictor-Webhook-Id", job.job_id().to_string())
        .header("Pictor-Event", "job.finished")
        .header("Pictor-Delivery-Attempt", attempt.to_string())
        .header("Pictor-Signature", signature)
        .body(body)
        .send()
        .await;
    match answer {
        Ok(r) if r.status().is_success() => Ok(()),
        Ok(r) => Err(Failure::Retry(format!("HTTP {}", r.status().as_u16()))),
        Err(e) if e.is_timeout() => Err(Failure::Retry(format!(
            "no answer within {} s",
            TIMEOUT.as_secs()
        ))),
        Err(e) => Err(Failure::Retry(format!(
            "cannot reach the receiver: {}",
            short(e)
        ))),
    }
}

/// An error's chain on one line, without the URL (it may carry a receiver's token).
fn short(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut out = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        out.push_str(": ");
        out.push_str(&s.to_string());
        src = s.source();
    }
    out.chars().take(200).collect()
}
