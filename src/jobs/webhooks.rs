//! Job notifications: which `webhook_url`s are accepted (the SSRF guard), how a delivery is
//! signed, and each user's signing secret. Delivery itself is `app::webhooks`, from the store's
//! outbox (`store::webhooks`).
//!
//! The signature follows Stripe's scheme, which most webhook libraries verify already:
//! `Pictor-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`, with a second
//! `v1=` (the previous secret's) for 24 hours after the secret is rotated.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::LazyLock;

use ipnet::{Ipv4Net, Ipv6Net};
use url::{Host, Url};

use crate::clock::{DAY_MS, Millis};
use crate::idp::crypto::{SecretBox, random_token};
use crate::store::{Store, StoreError, UserRecord};

/// Longest `webhook_url` accepted.
pub const MAX_URL_LEN: usize = 2048;

/// How long the previous secret keeps signing after a rotation.
pub const ROTATION_OVERLAP_MS: Millis = DAY_MS;

/// Addresses a webhook may not reach unless the operator allows private targets: this host,
/// private networks, link-local (cloud metadata at 169.254.169.254), carrier-grade NAT,
/// documentation, benchmarking, multicast and reserved ranges (IANA special-purpose registries).
static BLOCKED_V4: LazyLock<Vec<Ipv4Net>> = LazyLock::new(|| {
    [
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
    ]
    .iter()
    .filter_map(|n| n.parse().ok())
    .collect()
});

static BLOCKED_V6: LazyLock<Vec<Ipv6Net>> = LazyLock::new(|| {
    [
        "::/96",
        "64:ff9b:1::/48",
        "100::/64",
        "2001::/23",
        "2001:db8::/32",
        "fc00::/7",
        "fe80::/10",
        "fec0::/10",
        "ff00::/8",
    ]
    .iter()
    .filter_map(|n| n.parse().ok())
    .collect()
});

/// Whether `ip` is a public unicast address. IPv6 forms that carry an IPv4 address (mapped,
/// NAT64, 6to4) are judged by that address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => !BLOCKED_V4.iter().any(|n| n.contains(&v4)),
        IpAddr::V6(v6) => {
            // IPv4-compatible addresses (::/96, deprecated and not routed) are never public.
            if v6.segments()[..6] == [0; 6] {
                return false;
            }
            if let Some(v4) = embedded_v4(v6) {
                return is_public(IpAddr::V4(v4));
            }
            !BLOCKED_V6.iter().any(|n| n.contains(&v6))
        }
    }
}

fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let o = v6.octets();
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    // IPv4-compatible ::a.b.c.d (deprecated, RFC 4291 2.5.5.1); `::` and `::1` are IPv6's own
    // unspecified and loopback addresses.
    if s[..6] == [0; 6] && !v6.is_unspecified() && !v6.is_loopback() {
        return Some(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
    }
    // NAT64 well-known prefix 64:ff9b::/96: the last 32 bits.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
    }
    // 6to4 2002::/16: bits 16..48.
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(o[2], o[3], o[4], o[5]));
    }
    None
}

/// Addresses that are never a webhook target, whatever the operator allows. IPv6 forms that
/// carry an IPv4 address (mapped, compatible, NAT64, 6to4) are judged by that address.
fn never(ip: IpAddr) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => embedded_v4(v6).map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    match ip {
        IpAddr::V4(v4) => v4.is_unspecified() || v4.is_broadcast() || v4.is_multicast(),
        IpAddr::V6(v6) => v6.is_unspecified() || v6.is_multicast(),
    }
}

/// Why an address is refused, or `None` when it may be called.
fn refuse_ip(ip: IpAddr, allow_private: bool) -> Option<String> {
    if never(ip) {
        return Some(format!("{ip} cannot receive webhooks"));
    }
    if !allow_private && !is_public(ip) {
        return Some(format!(
            "{ip} is a loopback, private, link-local or reserved address; the server's operator \
             must set webhooks.allow_private = true to allow it"
        ));
    }
    None
}

/// Checks a `webhook_url` as a client sends it: an absolute http(s) URL of at most
/// [`MAX_URL_LEN`] bytes, without credentials, whose host is not (by its name or literal
/// address) a non-public one unless `allow_private`. Names are resolved and checked again at
/// each delivery ([`resolve`]), so a name that later points inside the network is caught too.
pub fn check_url(raw: &str, allow_private: bool) -> Result<Url, String> {
    if raw.len() > MAX_URL_LEN {
        return Err(format!(
            "`webhook_url` is {} bytes; the limit is {MAX_URL_LEN}",
            raw.len()
        ));
    }
    if raw.trim() != raw || raw.is_empty() {
        return Err("`webhook_url` must be a URL without surrounding spaces".into());
    }
    let url = Url::parse(raw).map_err(|e| format!("`webhook_url` is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "`webhook_url` must be http:// or https://, not {}:",
            url.scheme()
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("`webhook_url` must not contain a user name or password".into());
    }
    let refused = match url.host() {
        None => return Err("`webhook_url` has no host".into()),
        Some(Host::Ipv4(v4)) => refuse_ip(IpAddr::V4(v4), allow_private),
        Some(Host::Ipv6(v6)) => refuse_ip(IpAddr::V6(v6), allow_private),
        Some(Host::Domain(name)) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            let local = name == "localhost"
                || name.ends_with(".localhost")
                || name.ends_with(".local")
                || name.ends_with(".internal")
                || !name.contains('.');
            (local && !allow_private).then(|| {
                format!(
                    "{name} is a local name; the server's operator must set \
                     webhooks.allow_private = true to allow it"
                )
            })
        }
    };
    match refused {
        Some(why) => Err(format!("`webhook_url` refused: {why}")),
        None => Ok(url),
    }
}

/// Why a delivery cannot go to a URL.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The name resolves to a refused address (or the URL is refused): never retried.
    #[error("{0}")]
    Refused(String),
    /// The name does not resolve now: retried.
    #[error("{0}")]
    Dns(String),
}

/// The addresses a delivery to `url` may connect to: every address its host resolves to, each
/// checked like [`check_url`] checks literals (one refused address refuses the URL, so a
/// resolver cannot slip a private address in beside a public one). The caller connects to
/// exactly these, so the name cannot be re-resolved elsewhere between check and connect.
pub async fn resolve(url: &Url, allow_private: bool) -> Result<Vec<SocketAddr>, ResolveError> {
    let port = url
        .port_or_known_default()
        .ok_or_else(|| ResolveError::Refused("the URL has no port".into()))?;
    let addrs: Vec<SocketAddr> = match url.host() {
        None => return Err(ResolveError::Refused("the URL has no host".into())),
        Some(Host::Ipv4(v4)) => vec![SocketAddr::new(IpAddr::V4(v4), port)],
        Some(Host::Ipv6(v6)) => vec![SocketAddr::new(IpAddr::V6(v6), port)],
        Some(Host::Domain(name)) => tokio::net::lookup_host((name, port))
            .await
            .map_err(|e| ResolveError::Dns(format!("cannot resolve {name}: {e}")))?
            .collect(),
    };
    if addrs.is_empty() {
        return Err(ResolveError::Dns("the host has no address".into()));
    }
    for a in &addrs {
        if let Some(why) = refuse_ip(a.ip(), allow_private) {
            return Err(ResolveError::Refused(why));
        }
    }
    Ok(addrs)
}

/// `Pictor-Signature` for `body` sent at `t` (Unix seconds), one `v1=` per secret.
pub fn signature(secrets: &[String], t: u64, body: &[u8]) -> String {
    let mut header = format!("t={t}");
    for secret in secrets {
        let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, secret.as_bytes());
        let mut ctx = aws_lc_rs::hmac::Context::with_key(&key);
        ctx.update(t.to_string().as_bytes());
        ctx.update(b".");
        ctx.update(body);
        header.push_str(",v1=");
        header.push_str(&hex::encode(ctx.sign().as_ref()));
    }
    header
}

/// A user's webhook secret, made (and stored encrypted) on first use. A stored secret that
/// cannot be decrypted (the data folder's `secret.key` was replaced) is an error, not silently
/// replaced: receivers would reject every delivery. Rotating makes a new one.
pub fn secret(store: &Store, secrets: &SecretBox, user_id: u64) -> Result<String, StoreError> {
    secret_of(store, secrets, user_id).map(|(secret, _)| secret)
}

/// [`secret`] and the user record it was read from.
fn secret_of(
    store: &Store,
    secrets: &SecretBox,
    user_id: u64,
) -> Result<(String, UserRecord), StoreError> {
    let user = store
        .user(user_id)?
        .ok_or_else(|| StoreError::NotFound("no such user".into()))?;
    if user.webhook_secret_enc.is_some() {
        return Ok((current(secrets, &user)?, user));
    }
    let mut made = None;
    let user = store.modify_user(user_id, |u| {
        if u.webhook_secret_enc.is_none() {
            let fresh = random_token("whsec_");
            u.webhook_secret_enc = Some(seal(secrets, &fresh)?);
            made = Some(fresh);
        }
        Ok(())
    })?;
    match made {
        Some(s) => Ok((s, user)),
        // Made by a concurrent call meanwhile.
        None => Ok((current(secrets, &user)?, user)),
    }
}

/// Replaces a user's webhook secret; the old one keeps signing (beside the new one) for
/// [`ROTATION_OVERLAP_MS`]. Returns the new secret.
pub fn rotate(
    store: &Store,
    secrets: &SecretBox,
    user_id: u64,
    now: Millis,
) -> Result<String, StoreError> {
    let fresh = random_token("whsec_");
    let sealed = seal(secrets, &fresh)?;
    store.modify_user(user_id, |u| {
        u.webhook_secret_prev_enc = u.webhook_secret_enc.take();
        u.webhook_secret_prev_until = u
            .webhook_secret_prev_enc
            .is_some()
            .then_some(now + ROTATION_OVERLAP_MS);
        u.webhook_secret_enc = Some(sealed);
        Ok(())
    })?;
    Ok(fresh)
}

/// The secrets a delivery is signed with now: the current one, then the previous one while its
/// overlap lasts.
pub fn signing_secrets(
    store: &Store,
    secrets: &SecretBox,
    user_id: u64,
    now: Millis,
) -> Result<Vec<String>, StoreError> {
    let (current, user) = secret_of(store, secrets, user_id)?;
    let mut out = vec![current];
    if user.webhook_secret_prev_until.is_some_and(|t| t > now)
        && let Some(prev) = user
            .webhook_secret_prev_enc
            .as_deref()
            .and_then(|s| open_secret(secrets, s))
    {
        out.push(prev);
    }
    Ok(out)
}

fn seal(secrets: &SecretBox, plain: &str) -> Result<String, StoreError> {
    secrets
        .seal(plain.as_bytes())
        .ok_or_else(|| StoreError::Invalid("cannot encrypt the webhook secret".into()))
}

/// A sealed secret, decrypted.
pub fn open_secret(secrets: &SecretBox, sealed: &str) -> Option<String> {
    secrets.open(sealed).and_then(|b| String::from_utf8(b).ok())
}

fn current(secrets: &SecretBox, user: &UserRecord) -> Result<String, StoreError> {
    user.webhook_secret_enc
        .as_deref()
        .and_then(|s| open_secret(secrets, s))
        .ok_or_else(|| {
            StoreError::Corrupt(
                "the webhook secret cannot be decrypted (was the data folder's secret.key replaced?); rotate it".into(),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_special_addresses_are_refused() {
        for bad in [
            "http://127.0.0.1/x",
            "http://10.1.2.3/",
            "http://172.20.0.1/",
            "http://192.168.1.1/",
            "http://169.254.169.254/latest/meta-data",
            "http://100.64.0.1/",
            "http://0.0.0.0/",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:10.0.0.1]/",
            "http://[64:ff9b::a00:1]/",
            "http://[2002:7f00:1::]/",
            "http://[fe80::1]/",
            "http://[fd00::1]/",
            "http://localhost:8080/",
            "http://api.localhost/",
            "http://printer.local/",
            "http://metadata.google.internal/",
            "http://intranet/",
            "http://2130706433/",
            "http://0x7f.1/",
        ] {
            assert!(check_url(bad, false).is_err(), "{bad} accepted");
        }
        for bad in [
            "ftp://example.com/",
            "file:///etc/passwd",
            "https://user:pw@example.com/",
            " https://example.com/",
            "example.com/hook",
            "gopher://example.com/",
        ] {
            assert!(check_url(bad, true).is_err(), "{bad} accepted");
        }
        assert!(check_url(&format!("https://example.com/{}", "a".repeat(2100)), false).is_err());
        // Unspecified and multicast addresses never.
        assert!(check_url("http://0.0.0.0:9/", true).is_err());
        assert!(check_url("http://224.0.0.1/", true).is_err());
        // ... also in the IPv6 forms that carry them (mapped, compatible, NAT64, 6to4).
        for bad in [
            "http://[::ffff:0.0.0.0]/",
            "http://[::ffff:224.0.0.1]/",
            "http://[::ffff:255.255.255.255]/",
            "http://[::224.0.0.1]/",
            "http://[::255.255.255.255]/",
            "http://[64:ff9b::e000:1]/",
            "http://[2002:e000:1::]/",
            "http://[::]/",
            "http://[ff02::1]/",
        ] {
            assert!(check_url(bad, true).is_err(), "{bad} accepted");
        }
        // IPv4-compatible forms are judged as the IPv4 address they carry.
        assert!(check_url("http://[::10.0.0.1]/", false).is_err());
        assert!(check_url("http://[::10.0.0.1]/", true).is_ok());
        assert!(check_url("http://[::1]:9/", true).is_ok());
    }

    #[test]
    fn public_urls_and_allowed_private_ones_pass() {
        for good in [
            "https://example.com/hooks/pictor?x=1",
            "http://93.184.215.14:8080/",
            "https://[2606:4700::1111]/",
        ] {
            assert!(check_url(good, false).is_ok(), "{good} refused");
        }
        assert!(check_url("http://127.0.0.1:9999/hook", true).is_ok());
        assert!(check_url("http://localhost:9999/hook", true).is_ok());
    }

    #[tokio::test]
    async fn names_are_checked_again_after_resolution() {
        // A name that passes `check_url` (operators allowing it) but resolves to loopback is
        // refused at delivery unless private targets are allowed: what DNS rebinding relies on.
        let url = Url::parse("http://localhost:9/hook").unwrap();
        assert!(matches!(
            resolve(&url, false).await,
            Err(ResolveError::Refused(_))
        ));
        let addrs = resolve(&url, true).await.unwrap();
        assert!(addrs.iter().all(|a| a.ip().is_loopback() && a.port() == 9));
        let literal = Url::parse("http://[::ffff:169.254.169.254]/").unwrap();
        assert!(matches!(
            resolve(&literal, false).await,
            Err(ResolveError::Refused(_))
        ));
    }

    #[test]
    fn signature_matches_an_independent_hmac() {
        // HMAC-SHA256("whsec_test", "1700000000.{}") computed with Python's hmac module.
        let h = signature(&["whsec_test".into()], 1_700_000_000, b"{}");
        assert_eq!(
            h,
            "t=1700000000,v1=35495024f4ef3f94e5a93e22221544c4b75e9a42300cd965ab81cb85cd994e91"
        );
        let two = signature(&["a".into(), "b".into()], 1, b"x");
        assert_eq!(two.matches(",v1=").count(), 2);
    }
}
