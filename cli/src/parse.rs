//! Parsing of the compact flag forms: `NAME=VALUE`, `MODEL[:WEIGHT[:PRIORITY]]`, the API-key
//! header per provider, times (`--since 24h`), and the enum values clap checks (a bad one is a
//! usage error); and the optional fields an update sends for `--enable`/`--disable` and for a
//! list flag given or cleared.

use std::collections::BTreeMap;

use anyhow::{anyhow, bail};
use portcullis_shared::api::agents::{ActAsMethod, AgentStatus};
use portcullis_shared::api::eventing::DeliveryStatus;
use portcullis_shared::api::gateways::GatewayState;
use portcullis_shared::api::guards::{GuardAction, GuardKind, GuardStage};
use portcullis_shared::api::pools::PoolStrategy;
use portcullis_shared::api::rules::BundleScope;
use portcullis_shared::api::workspace::{Permission, Role};
use portcullis_shared::api::{AuthMethod, CredentialType};
use portcullis_shared::provider;
use serde_json::{Map, Value};

/// A flag whose value is a JSON object (`--oauth-config '{"issuer": "…"}'`).
pub fn json_object(flag: &str, text: &str) -> anyhow::Result<Map<String, Value>> {
    match serde_json::from_str(text).map_err(|e| anyhow!("--{flag} is not valid JSON: {e}"))? {
        Value::Object(map) => Ok(map),
        _ => bail!("--{flag} must be a JSON object"),
    }
}

/// `NAME=VALUE`; the value may itself contain `=`.
pub fn pair(flag: &str, text: &str) -> anyhow::Result<(String, String)> {
    let (k, v) = text
        .split_once('=')
        .ok_or_else(|| anyhow!("--{flag} takes NAME=VALUE, got '{text}'"))?;
    if k.is_empty() {
        bail!("--{flag} takes NAME=VALUE with a non-empty NAME");
    }
    Ok((k.to_string(), v.to_string()))
}

/// Repeated `NAME=VALUE` flags as a JSON object; a later NAME wins.
pub fn pairs(flag: &str, items: &[String]) -> anyhow::Result<Map<String, Value>> {
    let mut map = Map::new();
    for item in items {
        let (k, v) = pair(flag, item)?;
        map.insert(k, Value::String(v));
    }
    Ok(map)
}

/// Repeated `NAME=VALUE` flags as a string map; a later NAME wins.
pub fn string_map(flag: &str, items: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    items.iter().map(|item| pair(flag, item)).collect()
}

/// An `--enable`/`--disable` pair as an update's `enabled`: `None` (unchanged) when neither is
/// given.
pub fn toggle(enable: bool, disable: bool) -> Option<bool> {
    (enable || disable).then_some(enable)
}

/// A repeatable flag on update: `Some` when values were given (replacing the list) or the list
/// is cleared, `None` (unchanged) otherwise.
pub fn list_change(values: Vec<String>, clear: bool) -> Option<Vec<String>> {
    (clear || !values.is_empty()).then_some(values)
}

/// An RFC 3339 time as given, or a duration back from now (`30s`, `15m`, `2h`, `7d`) as the
/// RFC 3339 time it reaches.
pub fn time_arg(t: &str) -> anyhow::Result<String> {
    Ok(portcullis_client::time::since(t)?)
}

/// A webhook subscription filter: `key=value` (exact) or `key~=glob`, with a non-empty key.
/// The server checks the rest (limits, glob shape).
pub fn webhook_filter(s: &str) -> Result<String, String> {
    match s.split_once('=') {
        Some((key, _)) if !key.trim_end_matches('~').is_empty() => Ok(s.to_string()),
        _ => Err(format!("'{s}' is not key=value or key~=glob")),
    }
}

/// `MODEL[:WEIGHT[:PRIORITY]]` → (model, weight, priority); an empty part means the default.
pub fn member(text: &str) -> anyhow::Result<(String, Option<u32>, Option<u32>)> {
    let mut parts = text.split(':');
    let model = parts
        .next()
        .filter(|m| !m.is_empty())
        .ok_or_else(|| anyhow!("--member takes MODEL[:WEIGHT[:PRIORITY]], got '{text}'"))?;
    let number = |p: Option<&str>, what: &str| -> anyhow::Result<Option<u32>> {
        p.filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<u32>()
                    .map_err(|_| anyhow!("--member {text}: {what} must be a whole number"))
            })
            .transpose()
    };
    let weight = number(parts.next(), "weight")?;
    let priority = number(parts.next(), "priority")?;
    if parts.next().is_some() {
        bail!("--member takes MODEL[:WEIGHT[:PRIORITY]], got '{text}'");
    }
    Ok((model.to_string(), weight, priority))
}

/// The secret a provider's API key is stored as: its header, and the value with the scheme.
pub fn api_key_secret(provider_id: &str, key: &str) -> anyhow::Result<(String, String)> {
    provider::api_key_secret(provider_id, key).map_err(anyhow::Error::msg)
}

/// A clap value parser for one of the shared API enums, by its `parse`.
macro_rules! enum_parser {
    ($name:ident, $ty:ty, [$($value:literal),+ $(,)?]) => {
        pub fn $name(s: &str) -> Result<$ty, String> {
            <$ty>::parse(s).ok_or_else(|| {
                format!("'{s}' is not one of: {}", [$($value),+].join(", "))
            })
        }
    };
}

enum_parser!(auth_method, AuthMethod, ["none", "api-key", "oauth"]);
enum_parser!(
    credential_type,
    CredentialType,
    ["none", "shared", "per-user"]
);
enum_parser!(
    strategy,
    PoolStrategy,
    ["round_robin", "weighted", "priority"]
);
enum_parser!(gateway_state, GatewayState, ["active", "disabled"]);
enum_parser!(
    agent_status,
    AgentStatus,
    ["active", "suspended", "provisioned", "revoked"]
);
enum_parser!(bundle_scope, BundleScope, ["workspace", "gateway", "agent"]);
enum_parser!(role, Role, ["admin", "operator", "viewer"]);
enum_parser!(actas_method, ActAsMethod, ["none", "oidc", "hmac", "bound"]);
enum_parser!(
    guard_stage,
    GuardStage,
    ["llm_output", "llm_input", "tool_result", "tool_arguments"]
);
enum_parser!(
    guard_kind,
    GuardKind,
    ["regex", "keywords", "pii", "secrets", "json_schema"]
);
enum_parser!(guard_action, GuardAction, ["block", "redact"]);
enum_parser!(
    delivery_status,
    DeliveryStatus,
    ["pending", "failed", "succeeded", "dlq", "canceled"]
);

/// A permission name (`gateway.view`, `agents.register`, …).
pub fn permission(s: &str) -> Result<Permission, String> {
    Permission::parse(s).ok_or_else(|| {
        let all: Vec<&str> = Permission::ALL.iter().map(|p| p.as_str()).collect();
        format!("'{s}' is not one of: {}", all.join(", "))
    })
}

/// An act-as method, or `""` (which clears it on update).
pub fn actas_method_text(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Ok(String::new());
    }
    actas_method(s).map(|m| m.as_str().to_string())
}

pub fn provider_method(s: &str) -> Result<portcullis_shared::api::actas::ProviderMethod, String> {
    portcullis_shared::api::actas::ProviderMethod::parse(s)
        .ok_or_else(|| "one of oidc, hmac".to_string())
}

pub fn actas_strength(s: &str) -> Result<portcullis_shared::api::actas::ActAsStrength, String> {
    portcullis_shared::api::actas::ActAsStrength::parse(s)
        .ok_or_else(|| "one of none, hmac, oidc".to_string())
}

pub fn quota_subject(s: &str) -> Result<portcullis_shared::api::quotas::QuotaSubject, String> {
    portcullis_shared::api::quotas::QuotaSubject::parse(s)
        .ok_or_else(|| "one of workspace, agent, act-as, pool, model, gateway".to_string())
}

pub fn quota_window(s: &str) -> Result<portcullis_shared::api::quotas::QuotaWindow, String> {
    portcullis_shared::api::quotas::QuotaWindow::parse(s)
        .ok_or_else(|| "one of daily, monthly".to_string())
}

/// USD as given on the command line (`25`, `0.50`, `$3`, `1,000,000`) → micro-USD, exactly
/// (no floating point): at most six decimal places, at most the API's largest limit.
pub fn usd(s: &str) -> Result<u64, String> {
    let text: String = s.trim().trim_start_matches('$').replace(',', "");
    let bad = || format!("{s:?} is not an amount of USD (for example 25 or 0.50)");
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
    if whole.is_empty() && fraction.is_empty()
        || !whole
            .bytes()
            .chain(fraction.bytes())
            .all(|b| b.is_ascii_digit())
    {
        return Err(bad());
    }
    if fraction.len() > 6 {
        return Err(format!("{s:?}: at most six decimal places (one micro-USD)"));
    }
    let max = portcullis_shared::api::quotas::MAX_LIMIT_MICROS;
    let too_large = || format!("{s:?}: the largest limit is {max} micro-USD");
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| too_large())?
    };
    let fraction: u64 = format!("{fraction:0<6}").parse().map_err(|_| bad())?;
    whole
        .checked_mul(1_000_000)
        .and_then(|w| w.checked_add(fraction))
        .filter(|m| *m <= max)
        .ok_or_else(too_large)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_replace_or_clear_or_stay() {
        assert_eq!(list_change(vec![], false), None);
        assert_eq!(list_change(vec![], true), Some(vec![]));
        assert_eq!(list_change(vec!["a".into()], false), Some(vec!["a".into()]));
    }

    #[test]
    fn enable_and_disable_set_enabled_or_leave_it() {
        assert_eq!(toggle(false, false), None);
        assert_eq!(toggle(true, false), Some(true));
        assert_eq!(toggle(false, true), Some(false));
    }

    #[test]
    fn usd_amounts_become_micro_usd() {
        assert_eq!(usd("2.50"), Ok(2_500_000));
        assert_eq!(usd("$3"), Ok(3_000_000));
        assert_eq!(usd("0.000001"), Ok(1));
        assert_eq!(
            usd("2,000,000"),
            Ok(2_000_000_000_000),
            "budgets past 1,000,000 USD"
        );
        assert_eq!(usd(".5"), Ok(500_000));
        assert_eq!(usd("9007199254.740991"), Ok((1 << 53) - 1));
        for bad in [
            "-1",
            "ten",
            "",
            ".",
            "1.0000001",
            "9007199254.740992",
            "1e3",
        ] {
            assert!(usd(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn secrets_keep_equals_in_values() {
        assert_eq!(
            pair("secret", "Authorization=Bearer a=b").unwrap(),
            ("Authorization".into(), "Bearer a=b".into())
        );
        assert_eq!(pair("secret", "X=").unwrap(), ("X".into(), String::new()));
        assert!(pair("secret", "novalue").is_err());
        assert!(pair("secret", "=x").is_err());
    }

    #[test]
    fn attrs_become_a_map_and_later_names_win() {
        let map = string_map(
            "attr",
            &["team=blue".into(), "tier=1".into(), "team=red".into()],
        )
        .unwrap();
        assert_eq!(map.len(), 2);
        assert_eq!(map["team"], "red");
        assert_eq!(map["tier"], "1");
        assert!(string_map("attr", &["bad".into()]).is_err());
        assert!(string_map("attr", &[]).unwrap().is_empty());
    }

    #[test]
    fn members() {
        assert_eq!(member("gpt").unwrap(), ("gpt".into(), None, None));
        assert_eq!(member("gpt:3").unwrap(), ("gpt".into(), Some(3), None));
        assert_eq!(member("gpt:3:1").unwrap(), ("gpt".into(), Some(3), Some(1)));
        assert_eq!(member("gpt::2").unwrap(), ("gpt".into(), None, Some(2)));
        assert!(member("gpt:x").is_err());
        assert!(member("gpt:1:-1").is_err());
        assert!(member(":1").is_err());
        assert!(member("a:1:2:3").is_err());
    }

    #[test]
    fn api_keys_go_under_the_provider_header() {
        assert_eq!(
            api_key_secret("openai", "sk").unwrap(),
            ("Authorization".into(), "Bearer sk".into())
        );
        assert_eq!(
            api_key_secret("openai_compatible", "sk").unwrap(),
            ("Authorization".into(), "Bearer sk".into())
        );
        assert_eq!(
            api_key_secret("anthropic", "k").unwrap(),
            ("x-api-key".into(), "k".into())
        );
        assert_eq!(
            api_key_secret("google", "g").unwrap(),
            ("x-goog-api-key".into(), "g".into())
        );
        assert_eq!(
            api_key_secret("bedrock", "k").unwrap(),
            ("Authorization".into(), "Bearer k".into()),
            "a Bedrock API key is a bearer token"
        );
        assert!(api_key_secret("vertex", "k").is_err());
        assert!(api_key_secret("nope", "k").is_err());
    }

    #[test]
    fn every_header_provider_takes_an_api_key() {
        for p in provider::PROVIDERS {
            let result = api_key_secret(p.id, "k");
            match p.secret_shape {
                provider::SecretShape::Headers => {
                    let (header, value) = result.unwrap();
                    assert_eq!(header, p.api_key_header.0);
                    assert_eq!(value, format!("{}k", p.api_key_header.1));
                }
                provider::SecretShape::Fields(_) if p.id == "bedrock" => assert!(result.is_ok()),
                provider::SecretShape::Fields(_) => assert!(result.is_err(), "{}", p.id),
            }
        }
    }

    #[test]
    fn enum_values_round_trip() {
        for s in ["none", "api-key", "oauth"] {
            assert_eq!(auth_method(s).unwrap().as_str(), s);
        }
        for s in ["none", "shared", "per-user"] {
            assert_eq!(credential_type(s).unwrap().as_str(), s);
        }
        for s in ["round_robin", "weighted", "priority"] {
            assert_eq!(strategy(s).unwrap().as_str(), s);
        }
        assert!(strategy("random").unwrap_err().contains("round_robin"));
        assert_eq!(
            permission("gateways.view").unwrap(),
            Permission::GatewayView
        );
        assert!(permission("x").is_err());
        assert_eq!(actas_method_text("").unwrap(), "");
        assert_eq!(actas_method_text("oidc").unwrap(), "oidc");
        assert!(actas_method_text("saml").is_err());
        for s in ["llm_output", "llm_input", "tool_result", "tool_arguments"] {
            assert_eq!(guard_stage(s).unwrap().as_str(), s);
        }
        assert_eq!(guard_kind("json_schema").unwrap().as_str(), "json_schema");
        assert!(guard_kind("yaml").unwrap_err().contains("json_schema"));
        assert_eq!(guard_action("redact").unwrap().as_str(), "redact");
        for s in DeliveryStatus::ALL {
            assert_eq!(delivery_status(s.as_str()), Ok(s));
        }
        assert!(delivery_status("done").unwrap_err().contains("dlq"));
    }

    #[test]
    fn webhook_filters_need_a_key_and_an_operator() {
        for good in ["agent_name=billing", "tool_name~=github/*", "k=", "k=a=b"] {
            assert_eq!(webhook_filter(good).as_deref(), Ok(good));
        }
        for bad in ["agent_name", "=x", "~=x", ""] {
            assert!(webhook_filter(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn times_pass_and_durations_count_back() {
        assert_eq!(
            time_arg("2025-01-31T09:00:00Z").unwrap(),
            "2025-01-31T09:00:00Z"
        );
        let an_hour_ago = time_arg("1h").unwrap();
        let at = chrono::DateTime::parse_from_rfc3339(&an_hour_ago).unwrap();
        let back = chrono::Utc::now().signed_duration_since(at);
        assert!((3599..=3610).contains(&back.num_seconds()), "{an_hour_ago}");
        assert!(time_arg("1 hour").is_err());
    }
}
