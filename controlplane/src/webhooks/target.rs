//! Where a webhook may be sent. Endpoints are public HTTPS unless the deployment allows
//! private targets (`--allow-private-webhook-targets`, which also allows plain `http://`).
//! The address is checked where it is used: every name the client resolves is filtered, an IP
//! literal is checked before the request, and redirects are not followed, so a name that
//! later resolves to an internal address, or a redirect to one, reaches nothing. Link-local
//! and cloud metadata addresses are refused even when private targets are allowed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use url::{Host, Url};

/// Longest endpoint URL accepted.
pub const MAX_URL_BYTES: usize = 2048;
/// A receiver acknowledges within this.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Checks an endpoint URL as given by an administrator; the error says why it is refused.
pub fn check_url(given: &str, allow_private: bool) -> Result<Url, String> {
    if given.len() > MAX_URL_BYTES {
        return Err(format!("is longer than {MAX_URL_BYTES} bytes"));
    }
    let url = Url::parse(given).map_err(|e| format!("is not a URL ({e})"))?;
    match url.scheme() {
        "https" => {}
        "http" if allow_private => {}
        "http" => {
            return Err(
                "must be https:// (plain http:// only where the deployment allows private \
                 webhook targets)"
                    .into(),
            )
        }
        other => return Err(format!("must be https://, not {other}://")),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "must not carry credentials; the destination's secret signs each delivery".into(),
        );
    }
    if url.fragment().is_some() {
        return Err("must not have a #fragment".into());
    }
    let ip = match url.host() {
        None => return Err("has no host".into()),
        Some(Host::Ipv4(v4)) => Some(IpAddr::V4(v4)),
        Some(Host::Ipv6(v6)) => Some(IpAddr::V6(v6)),
        Some(Host::Domain(d)) if d.eq_ignore_ascii_case("localhost") => {
            Some(IpAddr::V4(Ipv4Addr::LOCALHOST))
        }
        Some(Host::Domain(_)) => None,
    };
    if let Some(ip) = ip {
        if let Err(why) = check_ip(ip, allow_private) {
            return Err(format!("points at {why}"));
        }
    }
    Ok(url)
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
        return Err(
            "a loopback or private address (allowed only with --allow-private-webhook-targets)",
        );
    }
    Ok(())
}

/// Addresses no webhook is sent to: link-local (cloud metadata lives there), unspecified,
/// multicast and broadcast.
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

/// Resolves names and keeps only the addresses a webhook may go to.
struct Resolver {
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

/// The HTTP client deliveries go out on.
pub fn client(allow_private: bool) -> reqwest::Client {
    reqwest::Client::builder()
        .dns_resolver(Arc::new(Resolver { allow_private }))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(TIMEOUT)
        .user_agent(concat!("Portcullis-Webhooks/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_https_only_unless_private_targets_are_allowed() {
        assert!(check_url("https://hooks.example.com/x", false).is_ok());
        assert!(check_url("http://hooks.example.com/x", false)
            .unwrap_err()
            .contains("https"));
        assert!(check_url("https://127.0.0.1/x", false)
            .unwrap_err()
            .contains("private"));
        assert!(check_url("https://localhost:8443/", false).is_err());
        assert!(check_url("https://10.1.2.3/", false).is_err());
        assert!(check_url("https://[::ffff:192.168.1.1]/", false).is_err());
        assert!(check_url("http://127.0.0.1:9000/hook", true).is_ok());
        assert!(check_url("ftp://example.com/", true).is_err());
        assert!(check_url("https://u:p@example.com/", false)
            .unwrap_err()
            .contains("credentials"));
    }

    #[test]
    fn metadata_and_link_local_are_refused_even_when_private_targets_are_allowed() {
        for url in [
            "http://169.254.169.254/latest/meta-data",
            "http://[fe80::1]/",
            "http://[::ffff:169.254.169.254]/",
            "http://0.0.0.0/",
            "http://100.100.100.200/",
        ] {
            assert!(check_url(url, true).is_err(), "{url}");
        }
    }
}
