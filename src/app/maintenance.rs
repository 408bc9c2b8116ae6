//! Background maintenance, one function per task, all spawned here and all stopped on shutdown:
//! purging expired sessions, authorization codes, tokens and retired signing keys.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::MissedTickBehavior;
use tracing::{debug, warn};

use crate::state::AppState;

/// Spawns the maintenance tasks; they end when `stop` turns true.
pub fn spawn(state: AppState, stop: watch::Receiver<bool>) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = vec![tokio::spawn(purge_expired(state.clone(), stop.clone()))];
    if let Some(days) = state.config.retention_days {
        tasks.push(tokio::spawn(expire_pictures(state, stop, days)));
    }
    tasks
}

/// Deletes pictures older than the retention period; their jobs then say so.
async fn expire_pictures(state: AppState, mut stop: watch::Receiver<bool>, days: u32) {
    let mut tick = tokio::time::interval(Duration::from_secs(3600));
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        if let Err(e) = expire_now(&state, days).await {
            warn!(error = %e, "picture retention failed");
        }
    }
}

/// One retention pass (also called by tests). Returns how many pictures were deleted.
pub async fn expire_now(state: &AppState, days: u32) -> Result<usize, crate::store::StoreError> {
    let now = state.clock.now();
    let before = now.saturating_sub(days as u64 * crate::clock::DAY_MS);
    let mut total = 0;
    loop {
        let tokens = state
            .store
            .call(move |s| s.expire_pictures(before, now, 500))
            .await?;
        if tokens.is_empty() {
            break;
        }
        for t in &tokens {
            let path = state.config.images_dir().join(format!("{t}.png"));
            if let Err(e) = tokio::fs::remove_file(&path).await
                && e.kind() != std::io::ErrorKind::NotFound
            {
                warn!(error = %e, "cannot delete an expired picture");
            }
        }
        total += tokens.len();
    }
    if total > 0 {
        tracing::info!(
            pictures = total,
            days,
            "deleted pictures past the retention period"
        );
    }
    Ok(total)
}

async fn purge_expired(state: AppState, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(Duration::from_secs(600));
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        let now = state.clock.now();
        let result = state
            .store
            .call(move |s| {
                Ok::<_, crate::store::StoreError>(s.purge_sessions(now)? + s.purge_oauth(now)?)
            })
            .await;
        match result {
            Ok(n) => debug!(
                removed = n,
                "purged expired sessions, codes, tokens and keys"
            ),
            Err(e) => warn!(error = %e, "purge failed"),
        }
    }
}
