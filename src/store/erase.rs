//! Deleting an account (the person on their account page, an administrator with `pictor user
//! remove` or the admin page). One transaction removes the profile, its e-mail and key index
//! rows, sessions, reset links, consents, app spending, daily usage and jobs, and revokes the
//! person's app grants (their unexchanged codes go too); the caller then deletes the files
//! (pictures, uploads, avatar) named in the answer. The ledger keeps its rows — they carry only
//! the account's number, no name or e-mail — plus one `closed` row writing the balance off, so
//! every account number's rows still add up (to zero for a deleted one).

use redb::ReadableTable;

use super::ledger::{self, LedgerReason};
use super::tables::*;
use super::users::UserRecord;
use super::{Store, StoreError, codec};
use crate::clock::Millis;

/// What a deletion removed, and the files the caller must delete.
#[derive(Debug, Default)]
pub struct Erased {
    pub email: String,
    pub jobs: usize,
    pub sessions: usize,
    pub grants: usize,
    /// Credits written off by the `closed` ledger row.
    pub balance_written_off: i64,
    /// Picture tokens (`<images>/<token>.png`).
    pub pictures: Vec<String>,
    /// Jobs whose uploads may remain (`<sources>/<job id>.src`).
    pub job_ids: Vec<u128>,
    /// Avatar token (`<data>/avatars/<token>.png`).
    pub avatar: Option<String>,
}

impl Store {
    /// Deletes the account `user_id`. Refused while one of its jobs is queued or running (its
    /// credits are in flight: cancel it or let it finish first), and for the only administrator.
    pub fn erase_user(&self, user_id: u64, now: Millis) -> Result<Erased, StoreError> {
        let txn = self.begin_write()?;
        let erased = {
            let mut user: UserRecord = match txn.open_table(USERS)?.get(user_id)? {
                Some(v) => codec::decode(v.value())?,
                None => return Err(StoreError::NotFound("no such user".into())),
            };
            if user.admin {
                let users = txn.open_table(USERS)?;
                let mut others = false;
                for row in users.iter()? {
                    let (id, v) = row?;
                    if id.value() != user_id {
                        let u: UserRecord = codec::decode(v.value())?;
                        if u.admin && !u.banned {
                            others = true;
                            break;
                        }
                    }
                }
                if !others {
                    return Err(StoreError::Conflict(
                        "this is the only administrator: make someone else an administrator first"
                            .into(),
                    ));
                }
            }
            if txn.open_table(ACTIVE_BY_USER)?.get(user_id)?.is_some() {
                return Err(StoreError::Conflict(
                    "a picture of this account is still being made; cancel it or wait for it to finish, then delete the account".into(),
                ));
            }
            let mut erased = Erased {
                email: user.email.clone(),
                balance_written_off: user.balance,
                avatar: user.avatar.clone(),
                ..Erased::default()
            };
            if user.balance != 0 {
                let delta = -user.balance;
                ledger::apply(&txn, &mut user, delta, LedgerReason::Closed, None, now)?;
            }
            // Jobs, their webhook deliveries, and the index.
            let job_ids: Vec<u128> = {
                let idx = txn.open_table(JOBS_BY_USER)?;
                let mut ids = Vec::new();
                for row in idx.range((user_id, 0)..=(user_id, u128::MAX))? {
                    ids.push(row?.0.value().1);
                }
                ids
            };
            {
                let mut jobs = txn.open_table(JOBS)?;
                let mut by_user = txn.open_table(JOBS_BY_USER)?;
                let mut outbox = txn.open_table(WEBHOOK_OUTBOX)?;
                let mut pending = txn.open_table(PENDING_JOBS)?;
                for id in &job_ids {
                    if let Some(v) = jobs.remove(*id)? {
                        let job: super::jobs::JobRecord = codec::decode(v.value())?;
                        if let Some(token) = job.photo_token {
                            erased.pictures.push(token);
                        }
                    }
                    by_user.remove((user_id, *id))?;
                    outbox.remove(*id)?;
                    pending.remove(*id)?;
                }
            }
            erased.jobs = job_ids.len();
            erased.job_ids = job_ids;
            // Keys, e-mail, sessions, reset links.
            {
                let mut by_key = txn.open_table(USERS_BY_KEY)?;
                let hashes = user
                    .api_key_hash
                    .iter()
                    .chain(user.api_keys.iter().map(|k| &k.hash))
                    .filter_map(|h| hex::decode(h).ok());
                for h in hashes {
                    by_key.remove(h.as_slice())?;
                }
            }
            txn.open_table(USERS_BY_EMAIL)?
                .remove(user.email.as_str())?;
            erased.sessions = txn
                .open_table(SESSIONS)?
                .extract_if(|_, v| {
                    codec::decode::<super::sessions::SessionRecord>(v)
                        .map(|s| s.user_id == user_id)
                        .unwrap_or(false)
                })?
                .count();
            txn.open_table(PASSWORD_RESETS)?
                .extract_if(|_, v| {
                    codec::decode::<super::recovery::ResetRecord>(v)
                        .map(|r| r.user_id == user_id)
                        .unwrap_or(false)
                })?
                .count();
            // Apps: grants revoked (and unexchanged codes removed), consents and spending gone.
            erased.grants =
                super::oauth::revoke_user_families_in(&txn, user_id, "account deleted", now)?;
            txn.open_table(CONSENTS)?
                .extract_from_if((user_id, "")..(user_id + 1, ""), |_, _| true)?
                .count();
            txn.open_table(APP_SPEND)?
                .extract_from_if((user_id, "")..(user_id + 1, ""), |_, _| true)?
                .count();
            txn.open_table(DAILY_USAGE)?
                .extract_from_if((user_id, 0)..=(user_id, u32::MAX), |_, _| true)?
                .count();
            txn.open_table(USERS)?.remove(user_id)?;
            erased
        };
        self.commit(txn)?;
        Ok(erased)
    }
}

/// Deletes the files an erased account leaves in the data folder: its pictures, any uploads of
/// its jobs, its avatar. Returns how many were deleted; a file already gone is not an error.
pub fn remove_files(folder: &std::path::Path, erased: &Erased) -> usize {
    let plain = |t: &str| {
        !t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    let mut paths: Vec<std::path::PathBuf> = erased
        .pictures
        .iter()
        .filter(|t| plain(t))
        .map(|t| folder.join("images").join(format!("{t}.png")))
        .collect();
    for id in &erased.job_ids {
        let id = super::jobs::JobId(*id);
        let sources = folder.join("sources");
        paths.push(sources.join(format!("{id}.src")));
        paths.push(sources.join(format!("{id}.mask")));
    }
    if let Some(a) = erased.avatar.as_deref().filter(|t| plain(t)) {
        paths.push(folder.join("avatars").join(format!("{a}.png")));
    }
    let mut n = 0;
    for p in paths {
        match std::fs::remove_file(&p) {
            Ok(()) => n += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(error = %e, path = %p.display(), "removing a deleted account's file")
            }
        }
    }
    n
}
