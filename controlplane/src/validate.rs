//! Input checks shared by the handlers. Every error names the field it is about.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{invalid, ApiResult};

/// Whether this deployment sends to loopback and private addresses (`--allow-private-targets`):
/// one setting for the process, set when it starts, read when a URL is configured.
static ALLOW_PRIVATE_TARGETS: AtomicBool = AtomicBool::new(false);

/// Records the deployment's egress setting (DESIGN §24) for the URL checks below.
pub fn allow_private_targets(allowed: bool) {
    ALLOW_PRIVATE_TARGETS.store(allowed, Ordering::Relaxed);
}

pub const MAX_NAME_LEN: usize = 128;

/// A resource name (models, pools, gateways, agents, keys, bundles): 1–128 characters of
/// letters, digits and `. _ - : @ /`, starting with a letter or digit.
pub fn name(field: &str, value: &str) -> ApiResult<String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || "._-:@/".contains(c);
    if value.is_empty() {
        return Err(invalid(format!("{field} is required")));
    }
    if value.len() > MAX_NAME_LEN {
        return Err(invalid(format!(
            "{field} is longer than {MAX_NAME_LEN} characters"
        )));
    }
    if uuid::Uuid::parse_str(value).is_ok() {
        return Err(invalid(format!(
            "{field} '{value}' looks like an id; names must not be UUIDs, so that an id always \
             means the same resource"
        )));
    }
    if !value.starts_with(|c: char| c.is_ascii_alphanumeric()) || !value.chars().all(ok_char) {
        return Err(invalid(format!(
            "{field} '{value}' may contain only letters, digits and . _ - : @ /, and must start \
             with a letter or digit"
        )));
    }
    Ok(value.to_string())
}

/// A UUID-shaped id.
pub fn id(field: &str, value: &str) -> ApiResult<String> {
    if value.is_empty() {
        return Err(invalid(format!("{field} is required")));
    }
    uuid::Uuid::parse_str(value)
        .map(|u| u.to_string())
        .map_err(|_| invalid(format!("{field} must be a UUID, got '{}'", clip(value))))
}

/// An absolute http(s) URL.
pub fn http_url(field: &str, value: &str) -> ApiResult<url::Url> {
    let url =
        url::Url::parse(value).map_err(|e| invalid(format!("{field} is not a valid URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(invalid(format!(
            "{field} must be an absolute http or https URL"
        )));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid(format!(
            "{field} must not embed credentials; store them as secret values"
        )));
    }
    Ok(url)
}

/// An absolute http(s) URL this service or its gateways will fetch: an IP-literal host (which
/// no resolver filters) must be one the egress policy lets them reach, so a refused target is
/// `invalid_argument` now rather than a failed call later. Names are checked when resolved.
pub fn target_url(field: &str, value: &str) -> ApiResult<url::Url> {
    let url = http_url(field, value)?;
    let allowed = ALLOW_PRIVATE_TARGETS.load(Ordering::Relaxed);
    portcullis_shared::egress::check_url(&url, allowed)
        .map_err(|e| invalid(format!("{field} is refused: {e}")))?;
    Ok(url)
}

/// An https target URL, or plain http on a loopback host (a provider on the same machine).
pub fn https_url(field: &str, value: &str) -> ApiResult<url::Url> {
    let parsed = target_url(field, value)?;
    let loopback = matches!(parsed.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
    if parsed.scheme() != "https" && !loopback {
        return Err(invalid(format!("{field} must use https")));
    }
    Ok(parsed)
}

/// An HTTP header name (RFC 9110 token).
pub fn header_name(field: &str, value: &str) -> ApiResult<()> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if value.is_empty() || !value.chars().all(token) {
        return Err(invalid(format!(
            "{field}: '{}' is not a valid HTTP header name",
            clip(value)
        )));
    }
    Ok(())
}

/// An HTTP header value: visible characters, spaces and tabs.
pub fn header_value(field: &str, value: &str) -> ApiResult<()> {
    if value.is_empty() {
        return Err(invalid(format!("{field} must not be empty")));
    }
    if value.chars().any(|c| c.is_control() && c != '\t') {
        return Err(invalid(format!("{field} contains control characters")));
    }
    Ok(())
}

/// A list of non-empty strings, each at most 256 characters, at most `max` of them; duplicates
/// are dropped, order kept.
pub fn string_list(field: &str, values: &[String], max: usize) -> ApiResult<Vec<String>> {
    if values.len() > max {
        return Err(invalid(format!("{field} has more than {max} entries")));
    }
    let mut out: Vec<String> = Vec::with_capacity(values.len());
    for (i, v) in values.iter().enumerate() {
        let v = v.trim();
        if v.is_empty() {
            return Err(invalid(format!("{field}[{i}] is empty")));
        }
        if v.len() > 256 {
            return Err(invalid(format!(
                "{field}[{i}] is longer than 256 characters"
            )));
        }
        if v.chars().any(char::is_control) {
            return Err(invalid(format!("{field}[{i}] contains control characters")));
        }
        if !out.iter().any(|o| o == v) {
            out.push(v.to_string());
        }
    }
    Ok(out)
}

/// Model attributes: at most 64, keys of letters, digits and `_ . : -` up to 64 characters,
/// values up to 256 characters.
pub fn attributes(field: &str, map: &BTreeMap<String, String>) -> ApiResult<()> {
    if map.len() > 64 {
        return Err(invalid(format!("{field} has more than 64 entries")));
    }
    for (k, v) in map {
        let ok = !k.is_empty()
            && k.len() <= 64
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.:-".contains(c));
        if !ok {
            return Err(invalid(format!(
                "{field}: key '{}' must be 1–64 letters, digits or _ . : -",
                clip(k)
            )));
        }
        if v.len() > 256 || v.chars().any(char::is_control) {
            return Err(invalid(format!(
                "{field}.{k} must be at most 256 characters without control characters"
            )));
        }
    }
    Ok(())
}

/// Shortens user input quoted back in an error.
pub fn clip(value: &str) -> String {
    if value.chars().count() <= 64 {
        value.to_string()
    } else {
        format!("{}…", value.chars().take(64).collect::<String>())
    }
}

/// The origin (scheme, host, port) of the `url` field of a JSON configuration, if it has one.
pub fn config_origin(config: &serde_json::Value, field: &str) -> Option<String> {
    let url = url::Url::parse(config.get(field)?.as_str()?).ok()?;
    Some(url.origin().ascii_serialization())
}

/// Whether a configuration's destination moved away from its origin (to another, or to none):
/// its stored credentials were given for the old one and must not follow it (issue 38, L4).
pub fn origin_moved(old: &serde_json::Value, new: &serde_json::Value, field: &str) -> bool {
    let old = config_origin(old, field);
    old.is_some() && old != config_origin(new, field)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(name("name", "gpt-4o").is_ok());
        assert!(name("name", "openai/gpt-4o:latest").is_ok());
        assert!(name("name", "").is_err());
        assert!(name("name", "-x").is_err());
        assert!(name("name", "has space").is_err());
        assert!(name("name", &"a".repeat(129)).is_err());
        assert!(name("name", "6b977e41-c718-4993-aee6-6df1ea09f44e").is_err());
    }

    #[test]
    fn urls() {
        assert!(http_url("u", "https://api.example.com/v1").is_ok());
        assert!(http_url("u", "ftp://x").is_err());
        assert!(http_url("u", "https://user:pw@x").is_err());
        assert!(http_url("u", "not a url").is_err());
        for refused in [
            "http://169.254.169.254/latest/meta-data/",
            "https://[fd00:ec2::254]/",
            "http://10.0.0.7/v1",
            "http://localhost:8080/",
        ] {
            let e = target_url("provider_config.base_url", refused).unwrap_err();
            assert!(
                e.to_string()
                    .contains("provider_config.base_url is refused"),
                "{refused}: {e}"
            );
        }
        assert!(target_url("u", "https://api.example.com/v1").is_ok());
    }

    #[test]
    fn lists_dedupe_and_reject_empty() {
        let got = string_list("l", &["a".into(), "b".into(), "a".into()], 10).unwrap();
        assert_eq!(got, ["a", "b"]);
        assert!(string_list("l", &["".into()], 10).is_err());
    }
}
