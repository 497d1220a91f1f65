//! Where outbound fetches may go (DESIGN §24), for every fetch whose URL an administrator, a
//! client or a remote document chooses: webhooks and OAuth on the control plane, upstreams on
//! the gateway. Addresses are checked where they are used: every name a client resolves is
//! filtered ([`builder`] installs the resolver), an IP-literal host is checked before the
//! request ([`check_url`]), and redirects are never followed, so a name that later resolves
//! to an internal address, or a redirect to one, reaches nothing. Link-local and cloud
//! metadata addresses are refused always; loopback and private ranges unless the deployment
//! allows private targets. Bodies are read with a cap ([`read_capped`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use url::{Host, Url};

/// What an outbound fetch came to when it may not go on.
#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    /// The target is an address this deployment does not send to.
    #[error("{host} is {why}")]
    Refused { host: String, why: &'static str },
    /// The URL is not an http(s) URL with a host.
    #[error("{0}")]
    Unusable(&'static str),
    /// The answer is longer than the reader takes.
    #[error("the answer is larger than {0} bytes")]
    TooLarge(usize),
    /// The answer could not be read.
    #[error("reading the answer failed: {0}")]
    Read(#[source] reqwest::Error),
}

/// Whether a resolved address may be connected to; the error names what it is.
pub fn check_ip(ip: IpAddr, allow_private: bool) -> Result<(), &'static str> {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    if let Some(why) = never(ip) {
        return Err(why);
    }
    if !allow_private && is_private(ip) {
        return Err("a loopback or private address (allowed only with --allow-private-targets)");
    }
    Ok(())
}

/// Checks the URL about to be fetched: http(s), a host, and, when the host is an IP literal
/// (which no resolver sees) or `localhost`, an address that may be reached.
pub fn check_url(url: &Url, allow_private: bool) -> Result<(), EgressError> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(EgressError::Unusable(
            "only http:// and https:// URLs are fetched",
        ));
    }
    let ip = match url.host() {
        None => return Err(EgressError::Unusable("the URL has no host")),
        Some(Host::Ipv4(v4)) => IpAddr::V4(v4),
        Some(Host::Ipv6(v6)) => IpAddr::V6(v6),
        Some(Host::Domain(d)) if is_localhost(d) => IpAddr::V4(Ipv4Addr::LOCALHOST),
        Some(Host::Domain(_)) => return Ok(()),
    };
    check_ip(ip, allow_private).map_err(|why| EgressError::Refused {
        host: url.host_str().unwrap_or_default().to_string(),
        why,
    })
}

fn is_localhost(domain: &str) -> bool {
    let d = domain.trim_end_matches('.').to_ascii_lowercase();
    d == "localhost" || d.ends_with(".localhost")
}

/// Addresses nothing is sent to: link-local (cloud metadata lives there), the other cloud
/// metadata addresses, unspecified, multicast and broadcast.
fn never(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            if v4.is_link_local() || o == [100, 100, 100, 200] {
                Some("a link-local or cloud metadata address")
            } else if o[0] == 0 || v4.is_multicast() || v4.is_broadcast() {
                Some("an unspecified, multicast or broadcast address")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            if (s[0] & 0xffc0) == 0xfe80 || v6 == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)
            {
                Some("a link-local or cloud metadata address")
            } else if v6.is_unspecified() || v6.is_multicast() {
                Some("an unspecified or multicast address")
            } else {
                None
            }
        }
    }
}

/// Loopback, private (RFC 1918, ULA), shared (CGNAT) and benchmarking ranges, and the
/// translation prefixes that could lead into them.
fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || (o[0] == 100 && (64..128).contains(&o[1]))
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || (o[0] == 198 && (18..20).contains(&o[1]))
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            v6.is_loopback()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] == 0x64 && s[1] == 0xff9b)
                || (s[0] == 0x2002)
        }
    }
}

/// Resolves names and keeps only the addresses the policy allows; runs once per new
/// connection, so pooled connections pay nothing.
pub struct Resolver {
    allow_private: bool,
}

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|a| check_ip(a.ip(), allow_private).is_ok())
                .collect();
            if allowed.is_empty() {
                let why = found.first().map_or("no address", |a| {
                    check_ip(a.ip(), allow_private).err().unwrap_or("")
                });
                return Err(format!("{host} resolves to {why}").into());
            }
            let addrs: reqwest::dns::Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

/// The resolver that keeps only the addresses the policy allows, for a client built by hand
/// (one that must honour an operator's egress proxy, say).
pub fn resolver(allow_private: bool) -> Arc<Resolver> {
    Arc::new(Resolver { allow_private })
}

/// A client builder under the policy: the filtering resolver, no redirects, no proxy. The
/// caller adds its deadline, pool settings and user agent.
pub fn builder(allow_private: bool) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .dns_resolver(resolver(allow_private))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
}

/// A client under the policy with an overall deadline per fetch.
pub fn client(allow_private: bool, deadline: Duration, user_agent: &str) -> reqwest::Client {
    builder(allow_private)
        .timeout(deadline)
        .user_agent(user_agent)
        .build()
        .or_else(|e| {
            tracing::error!(error = %e, "Building the egress HTTP client failed; retrying bare.");
            builder(allow_private).timeout(deadline).build()
        })
        .unwrap_or_default()
}

/// Reads a body while it streams in, stopping at `cap` bytes: a longer answer is an error,
/// and nothing past the cap is kept.
pub async fn read_capped(
    mut response: reqwest::Response,
    cap: usize,
) -> Result<Bytes, EgressError> {
    if response
        .content_length()
        .is_some_and(|n| n > u64::try_from(cap).unwrap_or(u64::MAX))
    {
        return Err(EgressError::TooLarge(cap));
    }
    let mut body = BytesMut::new();
    while let Some(chunk) = response.chunk().await.map_err(EgressError::Read)? {
        if body.len() + chunk.len() > cap {
            return Err(EgressError::TooLarge(cap));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

#[cfg(test)]
mod tests;
