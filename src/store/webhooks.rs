//! The webhook outbox: a job created with a `webhook_url` gets a delivery that is queued in the
//! same transaction that ends the job (done, failed or cancelled), so a crash between the end of
//! a job and its notification cannot lose the notification. The delivery worker
//! (`jobs::webhooks`) takes due rows, POSTs, and records each attempt here.

use redb::{ReadableTable, ReadableTableMetadata, WriteTransaction};
use serde::{Deserialize, Serialize};

use super::tables::{JOBS, WEBHOOK_OUTBOX};
use super::{JobId, JobRecord, Store, StoreError, codec};
use crate::clock::Millis;

/// Where a job's notification stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WebhookStatus {
    /// Not delivered yet (the job is unfinished, or attempts are being retried).
    Pending,
    /// A 2xx answer was received.
    Delivered,
    /// Every attempt failed (or the URL became unsafe); no more attempts are made.
    Failed,
}

impl WebhookStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookStatus::Pending => "pending",
            WebhookStatus::Delivered => "delivered",
            WebhookStatus::Failed => "failed",
        }
    }
}

/// A job's webhook and its delivery record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Webhook {
    pub url: String,
    pub status: WebhookStatus,
    /// Delivery attempts made so far.
    #[serde(default)]
    pub attempts: u32,
    /// Why the last attempt failed (an HTTP status or a connection error).
    #[serde(default)]
    pub last_error: Option<String>,
    #[serde(default)]
    pub delivered_at: Option<Millis>,
    /// When the next attempt is due (while pending and the job has ended).
    #[serde(default)]
    pub next_attempt_at: Option<Millis>,
}

impl Webhook {
    pub fn new(url: String) -> Webhook {
        Webhook {
            url,
            status: WebhookStatus::Pending,
            attempts: 0,
            last_error: None,
            delivered_at: None,
            next_attempt_at: None,
        }
    }
}

/// How one delivery attempt went.
#[derive(Debug, Clone)]
pub enum Attempt {
    Delivered,
    /// Failed; try again at `next_at`.
    Retry {
        error: String,
        next_at: Millis,
    },
    /// Failed for good.
    GiveUp {
        error: String,
    },
}

/// Queues the job's notification, if it has one, as due now. Called in every transaction that
/// makes a job terminal; a job ends once, so it is queued once.
pub(super) fn enqueue(
    txn: &WriteTransaction,
    job: &mut JobRecord,
    now: Millis,
) -> Result<(), StoreError> {
    if let Some(hook) = &mut job.webhook
        && hook.status == WebhookStatus::Pending
    {
        hook.next_attempt_at = Some(now);
        txn.open_table(WEBHOOK_OUTBOX)?.insert(job.id, now)?;
    }
    Ok(())
}

impl Store {
    /// Jobs whose notification is due at `now`, earliest first (at most `limit`), and when the
    /// next one not yet due is.
    pub fn webhooks_due(
        &self,
        now: Millis,
        limit: usize,
    ) -> Result<(Vec<JobRecord>, Option<Millis>), StoreError> {
        let txn = self.begin_read()?;
        let outbox = txn.open_table(WEBHOOK_OUTBOX)?;
        let jobs = txn.open_table(JOBS)?;
        let mut due: Vec<(Millis, u128)> = Vec::new();
        let mut next: Option<Millis> = None;
        for row in outbox.iter()? {
            let (id, at) = row?;
            let (id, at) = (id.value(), at.value());
            if at <= now {
                due.push((at, id));
            } else {
                next = Some(next.map_or(at, |n: Millis| n.min(at)));
            }
        }
        due.sort_unstable();
        if due.len() > limit {
            next = Some(now);
            due.truncate(limit);
        }
        let mut out = Vec::with_capacity(due.len());
        for (_, id) in due {
            if let Some(v) = jobs.get(id)? {
                out.push(codec::decode(v.value())?);
            }
        }
        Ok((out, next))
    }

    /// Records a delivery attempt made after `made_before` earlier ones: delivered and given-up
    /// notifications leave the outbox, a retry is rescheduled. An attempt whose count does not
    /// match (another worker pass recorded one meanwhile) changes nothing. Returns the job as
    /// recorded.
    pub fn webhook_attempted(
        &self,
        id: JobId,
        made_before: u32,
        attempt: Attempt,
        now: Millis,
    ) -> Result<JobRecord, StoreError> {
        let txn = self.begin_write()?;
        let job = {
            let mut jobs = txn.open_table(JOBS)?;
            let mut job: JobRecord = match jobs.get(id.0)? {
                Some(v) => codec::decode(v.value())?,
                None => return Err(StoreError::NotFound(format!("no job {id}"))),
            };
            let mut outbox = txn.open_table(WEBHOOK_OUTBOX)?;
            let Some(hook) = job
                .webhook
                .as_mut()
                .filter(|h| h.status == WebhookStatus::Pending)
            else {
                // No delivery to record (recorded already): the row just leaves the outbox.
                outbox.remove(id.0)?;
                drop((outbox, jobs));
                self.commit(txn)?;
                return Ok(job);
            };
            if hook.attempts != made_before {
                return Ok(job);
            }
            hook.attempts += 1;
            match attempt {
                Attempt::Delivered => {
                    hook.status = WebhookStatus::Delivered;
                    hook.delivered_at = Some(now);
                    hook.next_attempt_at = None;
                    outbox.remove(id.0)?;
                }
                Attempt::Retry { error, next_at } => {
                    hook.last_error = Some(error);
                    hook.next_attempt_at = Some(next_at);
                    outbox.insert(id.0, next_at)?;
                }
                Attempt::GiveUp { error } => {
                    hook.status = WebhookStatus::Failed;
                    hook.last_error = Some(error);
                    hook.next_attempt_at = None;
                    outbox.remove(id.0)?;
                }
            }
            jobs.insert(id.0, codec::encode(&job)?.as_slice())?;
            job
        };
        self.commit(txn)?;
        Ok(job)
    }

    /// Notifications still to deliver.
    pub fn webhooks_pending(&self) -> Result<usize, StoreError> {
        let txn = self.begin_read()?;
        Ok(txn.open_table(WEBHOOK_OUTBOX)?.len()? as usize)
    }
}
