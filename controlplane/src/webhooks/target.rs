//! Where a webhook may be sent. Endpoints are public HTTPS unless the deployment allows
//! private targets (`--allow-private-webhook-targets`, which also allows plain `http://`).
//! Addresses follow the deployment's egress policy ([`portcullis_shared::egress`]): checked
//! when the endpoint is configured and again as each attempt is sent, every resolved name
//! filtered, no redirects followed; link-local and cloud metadata addresses are refused even
//! when private targets are allowed.

use std::time::Duration;

use portcullis_shared::egress::{self, EgressError};
use url::Url;

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
    match egress::check_url(&url, allow_private) {
        Ok(()) => Ok(url),
        Err(EgressError::Refused { why, .. }) => Err(format!("points at {why}")),
        Err(e) => Err(e.to_string()),
    }
}

/// The HTTP client deliveries go out on: the egress policy, and a receiver's deadline.
pub fn client(allow_private: bool) -> reqwest::Client {
    egress::client(
        allow_private,
        TIMEOUT,
        concat!("Portcullis-Webhooks/", env!("CARGO_PKG_VERSION")),
    )
}

/// Checks a stored endpoint again as it is sent: the deployment's settings may have changed
/// since it was configured.
pub fn check_at_send(url: &str, allow_private: bool) -> Result<(), String> {
    let url = Url::parse(url).map_err(|_| "the endpoint is not a URL".to_string())?;
    egress::check_url(&url, allow_private).map_err(|e| format!("the endpoint is refused: {e}"))
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
