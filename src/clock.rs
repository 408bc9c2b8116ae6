//! Time as a parameter. Logic takes `now` (milliseconds since the Unix epoch) as an argument;
//! edges read it once from a [`Clock`]. Tests shift the clock to cross day boundaries or expiry.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub type Millis = u64;

pub const DAY_MS: u64 = 86_400_000;

/// The system clock plus an adjustable offset (zero in production).
#[derive(Clone, Default)]
pub struct Clock {
    offset_ms: Arc<AtomicI64>,
}

impl Clock {
    pub fn now(&self) -> Millis {
        let real = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        (real + self.offset_ms.load(Ordering::Relaxed)).max(0) as u64
    }

    /// Moves this clock (and every clone of it) forward or backward.
    pub fn advance(&self, ms: i64) {
        self.offset_ms.fetch_add(ms, Ordering::Relaxed);
    }
}

/// The UTC day number of a timestamp: the daily photo limit resets at 00:00 UTC.
pub fn day_of(now: Millis) -> u32 {
    (now / DAY_MS) as u32
}
