//! Who is calling: the socket peer, or — only when the peer is one of the configured
//! `trusted_proxies` — the client named by the one forwarding header the proxy writes
//! (`X-Forwarded-For` by default, or `Forwarded` (RFC 7239) with `forwarded_header = "forwarded"`).
//! Only that header is read: proxies pass the other one through from the client unchanged.
//! Throttles and sign-up limits key on this address.

use std::net::IpAddr;

use ipnet::IpNet;

/// The forwarding header a trusted proxy writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ForwardedHeader {
    /// `X-Forwarded-For` (nginx `$proxy_add_x_forwarded_for`, Caddy, Traefik, HAProxy).
    #[default]
    XForwardedFor,
    /// `Forwarded` (RFC 7239).
    Forwarded,
}

impl ForwardedHeader {
    pub fn parse(v: &str) -> Result<ForwardedHeader, String> {
        match v.trim().to_ascii_lowercase().as_str() {
            "x-forwarded-for" => Ok(ForwardedHeader::XForwardedFor),
            "forwarded" => Ok(ForwardedHeader::Forwarded),
            other => Err(format!(
                "{other:?} is not a forwarding header: use x-forwarded-for or forwarded"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ForwardedHeader::XForwardedFor => "x-forwarded-for",
            ForwardedHeader::Forwarded => "forwarded",
        }
    }
}

/// The proxies whose forwarding header is believed (addresses or CIDR blocks), and which header.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    nets: Vec<IpNet>,
    pub header: ForwardedHeader,
}

impl TrustedProxies {
    /// Parses a comma- or space-separated list of addresses and CIDR blocks
    /// (`127.0.0.1, 10.0.0.0/8, ::1`). An empty list trusts nobody.
    pub fn parse(list: &str) -> Result<TrustedProxies, String> {
        let mut nets = Vec::new();
        for item in list
            .split([',', ' '])
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            let net = match item.parse::<IpNet>() {
                Ok(n) => n,
                Err(_) => item
                    .parse::<IpAddr>()
                    .map(IpNet::from)
                    .map_err(|_| format!("{item:?} is not an IP address or CIDR block"))?,
            };
            nets.push(net);
        }
        Ok(TrustedProxies {
            nets,
            header: ForwardedHeader::default(),
        })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.nets.iter().any(|n| n.contains(&ip))
    }

    /// The list as configured, for `pictor config show`.
    pub fn describe(&self) -> String {
        self.nets
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// IPv4-mapped IPv6 addresses (`::ffff:1.2.3.4`) as the IPv4 address they are.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

/// One `for=` node of RFC 7239: `192.0.2.1`, `"[2001:db8::1]:4711"`, `unknown`, `_hidden`.
fn parse_node(node: &str) -> Option<IpAddr> {
    let node = node.trim().trim_matches('"');
    if let Some(rest) = node.strip_prefix('[') {
        return rest.split(']').next()?.parse().ok();
    }
    if let Ok(ip) = node.parse::<IpAddr>() {
        return Some(ip);
    }
    // `1.2.3.4:port`
    let (host, port) = node.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    host.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

/// The hops the proxy chain reports in `header`, nearest last; `None` for a hop that names no
/// address. A header that is not text ends the chain with an unknown hop.
fn forwarded_chain(
    headers: &poem::http::HeaderMap,
    header: ForwardedHeader,
) -> Vec<Option<IpAddr>> {
    let mut hops = Vec::new();
    for value in headers.get_all(header.name()) {
        let Ok(value) = value.to_str() else {
            hops.push(None);
            continue;
        };
        for element in value.split(',') {
            let node = match header {
                ForwardedHeader::XForwardedFor => Some(element),
                ForwardedHeader::Forwarded => element.split(';').find_map(|pair| {
                    let (k, v) = pair.split_once('=')?;
                    k.trim().eq_ignore_ascii_case("for").then_some(v)
                }),
            };
            hops.push(node.and_then(parse_node));
        }
    }
    hops
}

/// The client address of a request arriving from `peer`: the peer itself unless it is a trusted
/// proxy; then the nearest hop, walking the chain from the right, that is not a trusted proxy.
/// A hop that names no address ends the walk at the last trusted hop.
pub fn client_ip(
    peer: Option<IpAddr>,
    headers: &poem::http::HeaderMap,
    trusted: &TrustedProxies,
) -> Option<IpAddr> {
    let peer = canonical(peer?);
    if !trusted.contains(peer) {
        return Some(peer);
    }
    let mut nearest = peer;
    for hop in forwarded_chain(headers, trusted.header).into_iter().rev() {
        match hop.map(canonical) {
            Some(ip) if trusted.contains(ip) => nearest = ip,
            Some(ip) => return Some(ip),
            None => return Some(nearest),
        }
    }
    Some(nearest)
}

/// The block an address belongs to for sign-up limits: the /24 of an IPv4 address, the /64 of
/// an IPv6 one (one customer's allocation).
pub fn subnet_of(ip: IpAddr) -> IpNet {
    let (addr, prefix) = match canonical(ip) {
        IpAddr::V4(_) => (ip, 24),
        IpAddr::V6(_) => (ip, 64),
    };
    IpNet::new(canonical(addr), prefix)
        .map(|n| n.trunc())
        .unwrap_or_else(|_| IpNet::from(ip))
}

#[cfg(test)]
mod tests {
    use super::*;
    use poem::http::{HeaderMap, HeaderValue};

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn forwarding_headers_count_only_from_trusted_proxies() {
        let trusted = TrustedProxies::parse("127.0.0.1, 10.0.0.0/8").unwrap();
        let xff = headers(&[("x-forwarded-for", "203.0.113.9, 10.1.2.3")]);
        // From a trusted proxy: the nearest untrusted hop.
        assert_eq!(
            client_ip(Some("127.0.0.1".parse().unwrap()), &xff, &trusted),
            Some("203.0.113.9".parse().unwrap())
        );
        // From anyone else: the headers are ignored.
        assert_eq!(
            client_ip(Some("198.51.100.7".parse().unwrap()), &xff, &trusted),
            Some("198.51.100.7".parse().unwrap())
        );
        // A spoofed left-most entry does not win over the real client the proxy appended.
        let spoof = headers(&[("x-forwarded-for", "1.1.1.1, 203.0.113.9")]);
        assert_eq!(
            client_ip(Some("127.0.0.1".parse().unwrap()), &spoof, &trusted),
            Some("203.0.113.9".parse().unwrap())
        );
        // Nobody trusted: the peer.
        assert_eq!(
            client_ip(
                Some("127.0.0.1".parse().unwrap()),
                &xff,
                &TrustedProxies::default()
            ),
            Some("127.0.0.1".parse().unwrap())
        );
    }

    #[test]
    fn only_the_configured_header_is_read() {
        // nginx appends to X-Forwarded-For and passes a client's own `Forwarded` through.
        let trusted = TrustedProxies::parse("127.0.0.1").unwrap();
        let h = headers(&[
            ("forwarded", "for=1.2.3.4"),
            ("x-forwarded-for", "203.0.113.9"),
        ]);
        assert_eq!(
            client_ip(Some("127.0.0.1".parse().unwrap()), &h, &trusted),
            Some("203.0.113.9".parse().unwrap())
        );
    }

    #[test]
    fn rfc7239_forwarded() {
        let mut trusted = TrustedProxies::parse("::1").unwrap();
        trusted.header = ForwardedHeader::Forwarded;
        let h = headers(&[(
            "forwarded",
            "for=192.0.2.60;proto=http;by=203.0.113.43, for=\"[2001:db8:cafe::17]:4711\"",
        )]);
        assert_eq!(
            client_ip(Some("::1".parse().unwrap()), &h, &trusted),
            Some("2001:db8:cafe::17".parse().unwrap())
        );
        let h = headers(&[("forwarded", "for=unknown")]);
        assert_eq!(
            client_ip(Some("::1".parse().unwrap()), &h, &trusted),
            Some("::1".parse().unwrap())
        );
        assert!(TrustedProxies::parse("not-an-ip").is_err());
    }

    #[test]
    fn subnets() {
        assert_eq!(
            subnet_of("203.0.113.77".parse().unwrap()).to_string(),
            "203.0.113.0/24"
        );
        assert_eq!(
            subnet_of("2001:db8:1:2:3:4:5:6".parse().unwrap()).to_string(),
            "2001:db8:1:2::/64"
        );
    }
}
