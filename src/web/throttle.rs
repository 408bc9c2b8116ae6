//! Sign-in and sign-up throttling for the pages (see [`Throttle`]).

use crate::lock;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use ipnet::IpNet;

use crate::auth::secret::sha256;
use crate::clock::Millis;

/// Sign-in throttling that an attacker cannot turn against the account's owner:
/// - every source address (an IPv6 /64 counts as one) may make [`IP_ATTEMPTS_PER_MINUTE`]
///   attempts a minute (all accounts);
/// - failures are counted per (account, source): after [`CHALLENGE_AFTER_FAILURES`] that source
///   must solve the proof-of-work challenge, and after [`DELAY_AFTER_FAILURES`] it waits a delay
///   that doubles with every further failure (1 s, 2 s, 4 s … at most 15 minutes);
/// - failures from all sources together only make the challenge mandatory for everyone (after
///   [`ACCOUNT_CHALLENGE_AFTER`]); they never lock the account, so the owner, from their own
///   address, with the right password and a solved challenge, always gets in.
///
/// An attempt counts as a failure the moment it is let through, under the same lock as the
/// check (so a burst of parallel requests cannot all slip past before the first one fails);
/// [`Throttle::succeed`] takes it back when the password or code was right. Accounts are keyed
/// by a hash of the name, every map has a hard cap on its keys, and every key keeps a bounded
/// number of timestamps, so an attacker cannot grow these tables without bound.
#[derive(Default)]
pub struct Throttle {
    per_ip: Mutex<HashMap<IpNet, Vec<Millis>>>,
    per_source: Mutex<HashMap<Source, Vec<Millis>>>,
    per_account: Mutex<HashMap<[u8; 32], Vec<Millis>>>,
    /// Failed sign-ins per address block, whatever the account (a fresh sign-in form, which does
    /// not know the account yet, shows the bot check when its address needs one).
    failures_per_block: Mutex<HashMap<Option<IpNet>, Vec<Millis>>>,
    client_failures: Mutex<HashMap<Option<IpNet>, Vec<Millis>>>,
    signups: Mutex<HashMap<IpNet, Vec<Millis>>>,
}

/// An (account hash, address block) pair of the sign-in throttle.
type Source = ([u8; 32], Option<IpNet>);

/// Attempts one address may make per minute (all accounts together).
pub const IP_ATTEMPTS_PER_MINUTE: usize = 20;
/// Failures of one (account, source) after which that source must solve the challenge.
pub const CHALLENGE_AFTER_FAILURES: usize = 3;
/// Failures of one (account, source) after which its attempts are spaced by a growing delay.
pub const DELAY_AFTER_FAILURES: usize = 5;
/// Failures of one account from all sources after which every source must solve the challenge.
pub const ACCOUNT_CHALLENGE_AFTER: usize = 10;
/// Longest delay between attempts of one (account, source).
pub const MAX_DELAY_MS: u64 = 15 * 60 * 1000;
const FAILURE_WINDOW_MS: u64 = 15 * 60 * 1000;
/// Failed client authentications at the token endpoint per address in 15 minutes before 429
/// (correct secrets are never refused).
pub const CLIENT_FAILURES_LIMIT: usize = 30;
/// Accounts one address may create on `/register` per hour.
pub const SIGNUPS_PER_IP_PER_HOUR: usize = 3;
/// Accounts one /24 (IPv4) or /64 (IPv6) may create on `/register` per hour.
pub const SIGNUPS_PER_SUBNET_PER_HOUR: usize = 10;
const HOUR_MS: u64 = 60 * 60 * 1000;
/// Keys a throttle map holds at most (expired ones go first, then the least recently used).
const MAX_KEYS: usize = 100_000;
/// Timestamps one key keeps at most (the newest): more never change a decision.
const MAX_STAMPS: usize = 64;

pub enum Verdict {
    /// Go ahead; `challenge`: the bot check must be solved first.
    Allowed { challenge: bool },
    /// Too many attempts: retry after this many seconds.
    Limited(u64),
}

/// The block an address is throttled as: itself for IPv4, its /64 for IPv6 (one customer's
/// allocation, where every address is the same attacker's).
fn block(ip: IpAddr) -> IpNet {
    match ip {
        IpAddr::V4(_) => IpNet::from(ip),
        IpAddr::V6(_) => crate::net::subnet_of(ip),
    }
}

fn account_key(account: &str) -> [u8; 32] {
    sha256(&account.trim().to_lowercase())
}

fn recent<K: std::hash::Hash + Eq>(
    map: &mut HashMap<K, Vec<Millis>>,
    key: &K,
    now: Millis,
    window: u64,
) -> usize {
    match map.get_mut(key) {
        Some(v) => {
            v.retain(|t| now < t + window);
            v.len()
        }
        None => 0,
    }
}

fn record<K: std::hash::Hash + Eq + Clone>(
    map: &mut HashMap<K, Vec<Millis>>,
    key: K,
    now: Millis,
    window: u64,
) {
    if map.len() >= MAX_KEYS && !map.contains_key(&key) {
        map.retain(|_, v| v.last().is_some_and(|t| now < t + window));
        if map.len() >= MAX_KEYS {
            // Still full of live keys (a flood): forget the least recently used half.
            let mut lasts: Vec<Millis> = map.values().filter_map(|v| v.last().copied()).collect();
            let mid = lasts.len() / 2;
            let (_, cut, _) = lasts.select_nth_unstable(mid);
            let cut = *cut;
            map.retain(|_, v| v.last().is_some_and(|t| *t > cut));
        }
    }
    let v = map.entry(key).or_default();
    v.retain(|t| now < t + window);
    if v.len() >= MAX_STAMPS {
        v.remove(0);
    }
    v.push(now);
}

/// Takes back the newest timestamp of `key` (a provisional failure that turned out a success).
fn unrecord<K: std::hash::Hash + Eq>(map: &mut HashMap<K, Vec<Millis>>, key: &K) {
    if let Some(v) = map.get_mut(key) {
        v.pop();
        if v.is_empty() {
            map.remove(key);
        }
    }
}

impl Throttle {
    /// Decides on an attempt on `account` from `ip` and, when it may proceed, counts it as a
    /// failure until [`Throttle::succeed`] says otherwise.
    pub fn attempt(&self, ip: Option<IpAddr>, account: &str, now: Millis) -> Verdict {
        let ip = ip.map(block);
        if let Some(ip) = ip {
            let mut map = lock(&self.per_ip);
            let n = recent(&mut map, &ip, now, 60_000);
            if n >= IP_ATTEMPTS_PER_MINUTE {
                let wait = map
                    .get(&ip)
                    .and_then(|v| v.first())
                    .map(|t| (t + 60_000).saturating_sub(now) / 1000 + 1)
                    .unwrap_or(60);
                return Verdict::Limited(wait);
            }
            record(&mut map, ip, now, 60_000);
        }
        let account = account_key(account);
        let key = (account, ip);
        let mut sources = lock(&self.per_source);
        let failures = recent(&mut sources, &key, now, FAILURE_WINDOW_MS);
        if failures >= DELAY_AFTER_FAILURES {
            let exponent = (failures - DELAY_AFTER_FAILURES).min(20) as u32;
            let delay = (1000u64 << exponent).min(MAX_DELAY_MS);
            let last = sources
                .get(&key)
                .and_then(|v| v.last().copied())
                .unwrap_or(0);
            if now < last + delay {
                return Verdict::Limited((last + delay - now).div_ceil(1000));
            }
        }
        let mut accounts = lock(&self.per_account);
        let everyone = recent(&mut accounts, &account, now, FAILURE_WINDOW_MS);
        let challenge = failures >= CHALLENGE_AFTER_FAILURES || everyone >= ACCOUNT_CHALLENGE_AFTER;
        record(&mut sources, key, now, FAILURE_WINDOW_MS);
        record(&mut accounts, account, now, FAILURE_WINDOW_MS);
        record(
            &mut lock(&self.failures_per_block),
            ip,
            now,
            FAILURE_WINDOW_MS,
        );
        Verdict::Allowed { challenge }
    }

    /// Whether a sign-in on `account` from `ip` would have to come with a solved challenge (for
    /// showing the form; the decision itself is [`Throttle::attempt`]'s).
    pub fn needs_challenge(&self, ip: Option<IpAddr>, account: &str, now: Millis) -> bool {
        let account = account_key(account);
        let from_source = recent(
            &mut lock(&self.per_source),
            &(account, ip.map(block)),
            now,
            FAILURE_WINDOW_MS,
        );
        from_source >= CHALLENGE_AFTER_FAILURES
            || recent(
                &mut lock(&self.per_account),
                &account,
                now,
                FAILURE_WINDOW_MS,
            ) >= ACCOUNT_CHALLENGE_AFTER
    }

    /// Whether sign-ins from `ip` have failed often enough that its next one, on any account,
    /// may need a solved challenge (the sign-in form before the account is typed).
    pub fn source_needs_challenge(&self, ip: Option<IpAddr>, now: Millis) -> bool {
        recent(
            &mut lock(&self.failures_per_block),
            &ip.map(block),
            now,
            FAILURE_WINDOW_MS,
        ) >= CHALLENGE_AFTER_FAILURES
    }

    /// The password or code was right: that source's failures are forgiven and this attempt no
    /// longer counts against the account.
    pub fn succeed(&self, ip: Option<IpAddr>, account: &str) {
        let account = account_key(account);
        if let Some(n) = lock(&self.per_source).remove(&(account, ip.map(block))) {
            // Those failures are forgiven for the address too (this attempt among them).
            let mut blocks = lock(&self.failures_per_block);
            for _ in 0..n.len() {
                unrecord(&mut blocks, &ip.map(block));
            }
        }
        unrecord(&mut lock(&self.per_account), &account);
    }

    /// Takes back an attempt that never reached the password check (its bot check was missing
    /// or wrong): it is not a failed guess, so it must not push the owner towards the delays.
    pub fn cancel(&self, ip: Option<IpAddr>, account: &str) {
        let account = account_key(account);
        unrecord(&mut lock(&self.per_source), &(account, ip.map(block)));
        unrecord(&mut lock(&self.per_account), &account);
        unrecord(&mut lock(&self.failures_per_block), &ip.map(block));
    }

    /// Whether `ip` has failed client authentication too often (checked only after a wrong secret).
    pub fn client_failures_exceeded(&self, ip: Option<IpAddr>, now: Millis) -> bool {
        recent(
            &mut lock(&self.client_failures),
            &ip.map(block),
            now,
            FAILURE_WINDOW_MS,
        ) >= CLIENT_FAILURES_LIMIT
    }

    pub fn client_failed(&self, ip: Option<IpAddr>, now: Millis) {
        record(
            &mut lock(&self.client_failures),
            ip.map(block),
            now,
            FAILURE_WINDOW_MS,
        );
    }

    /// Reserves an account creation for `ip` (and its subnet) if their hourly quota allows,
    /// atomically, so parallel requests cannot all pass the check; `Limited` says for how long
    /// not. A creation that then fails gives its place back with [`Throttle::signup_failed`].
    pub fn signup_reserve(&self, ip: Option<IpAddr>, now: Millis) -> Verdict {
        let Some(ip) = ip else {
            return Verdict::Allowed { challenge: true };
        };
        let mut map = lock(&self.signups);
        let host = IpNet::from(ip);
        let subnet = crate::net::subnet_of(ip);
        for (key, limit) in [
            (host, SIGNUPS_PER_IP_PER_HOUR),
            (subnet, SIGNUPS_PER_SUBNET_PER_HOUR),
        ] {
            if recent(&mut map, &key, now, HOUR_MS) >= limit {
                let first = map
                    .get(&key)
                    .and_then(|v| v.first().copied())
                    .unwrap_or(now);
                return Verdict::Limited((first + HOUR_MS).saturating_sub(now).div_ceil(1000));
            }
        }
        record(&mut map, host, now, HOUR_MS);
        record(&mut map, subnet, now, HOUR_MS);
        Verdict::Allowed { challenge: true }
    }

    /// Gives back a reservation whose account was not created.
    pub fn signup_failed(&self, ip: Option<IpAddr>) {
        if let Some(ip) = ip {
            let mut map = lock(&self.signups);
            unrecord(&mut map, &IpNet::from(ip));
            unrecord(&mut map, &crate::net::subnet_of(ip));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_attempts_are_counted_before_they_finish() {
        let t = Throttle::default();
        let ip = Some("198.51.100.1".parse().unwrap());
        // Five attempts in flight at once, none finished: the sixth waits.
        for _ in 0..5 {
            assert!(matches!(
                t.attempt(ip, "a@x", 1000),
                Verdict::Allowed { .. }
            ));
        }
        assert!(matches!(t.attempt(ip, "a@x", 1000), Verdict::Limited(_)));
        // Successes are taken back.
        let t = Throttle::default();
        for i in 0..10 {
            assert!(matches!(
                t.attempt(ip, "b@x", 1000 + i),
                Verdict::Allowed { challenge: false }
            ));
            t.succeed(ip, "b@x");
        }
    }

    #[test]
    fn an_ipv6_64_is_one_source() {
        let t = Throttle::default();
        for i in 0..IP_ATTEMPTS_PER_MINUTE {
            let ip: IpAddr = format!("2001:db8::{:x}", i + 1).parse().unwrap();
            assert!(matches!(
                t.attempt(Some(ip), "c@x", 1),
                Verdict::Allowed { .. }
            ));
            t.succeed(Some(ip), "c@x");
        }
        let other: IpAddr = "2001:db8::ffff".parse().unwrap();
        assert!(matches!(
            t.attempt(Some(other), "c@x", 2),
            Verdict::Limited(_)
        ));
    }

    #[test]
    fn maps_stay_bounded_under_a_flood() {
        let t = Throttle::default();
        for i in 0..(MAX_KEYS as u64 + 5000) {
            t.client_failed(
                Some(IpAddr::from(std::net::Ipv4Addr::from(i as u32 + 1))),
                1_000 + i,
            );
        }
        assert!(lock(&t.client_failures).len() <= MAX_KEYS);
    }

    #[test]
    fn signup_reservations_are_atomic() {
        let t = Throttle::default();
        let ip = Some("203.0.113.7".parse().unwrap());
        let granted = (0..20)
            .filter(|_| matches!(t.signup_reserve(ip, 5), Verdict::Allowed { .. }))
            .count();
        assert_eq!(granted, SIGNUPS_PER_IP_PER_HOUR);
        t.signup_failed(ip);
        assert!(matches!(t.signup_reserve(ip, 6), Verdict::Allowed { .. }));
    }
}
