//! Background maintenance, one function per task, all spawned here and all stopped on shutdown:
//! purging expired sessions, authorization codes, tokens and retired signing keys.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::MissedTickBehavior;
use tracing::{debug, warn};

use crate::state::AppState;

/// Spawns the maintenance tasks; they end when `stop` turns true.
pub fn spawn(state: AppState, stop: watch::Receiver<bool>) -> Vec<tokio::task::JoinHandle<()>> {
    vec![tokio::spawn(purge_expired(state, stop))]
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
