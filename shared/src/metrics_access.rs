//! Who may read `/metrics` (DESIGN §24, finding L7): with a metrics token configured, a caller
//! presenting it as a bearer token; without one, callers on the same host only (loopback), so
//! a scrape from elsewhere needs the token. Counters name agents' traffic and the snapshot
//! revision, which strangers need not see.

use std::net::IpAddr;

use subtle::ConstantTimeEq;

/// Whether a `/metrics` request from `peer` with this `Authorization` header may be answered.
pub fn allowed(peer: Option<IpAddr>, authorization: Option<&str>, token: Option<&str>) -> bool {
    match token.filter(|t| !t.is_empty()) {
        Some(token) => authorization
            .and_then(|h| h.strip_prefix("Bearer "))
            .is_some_and(|given| bool::from(given.as_bytes().ct_eq(token.as_bytes()))),
        None => peer.is_some_and(|ip| match ip {
            IpAddr::V6(v6) => v6
                .to_ipv4_mapped()
                .map_or(v6.is_loopback(), |v4| v4.is_loopback()),
            IpAddr::V4(v4) => v4.is_loopback(),
        }),
    }
}

/// What a refused caller is told.
pub const REFUSED: &str =
    "metrics are served to callers on this host, or to callers with the metrics token";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_without_a_token_and_the_token_with_one() {
        let (local, remote) = (
            Some(IpAddr::from([127, 0, 0, 1])),
            Some(IpAddr::from([10, 1, 2, 3])),
        );
        assert!(allowed(local, None, None));
        assert!(allowed(
            Some("::ffff:127.0.0.1".parse().unwrap()),
            None,
            None
        ));
        assert!(!allowed(remote, None, None));
        assert!(!allowed(None, None, None));
        assert!(allowed(remote, Some("Bearer s3cret"), Some("s3cret")));
        assert!(
            !allowed(local, None, Some("s3cret")),
            "a token binds loopback too"
        );
        assert!(!allowed(remote, Some("Bearer wrong"), Some("s3cret")));
        assert!(!allowed(remote, Some("s3cret"), Some("s3cret")));
    }
}
