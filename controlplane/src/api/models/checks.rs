//! The model connection checks: provider config per provider group, the credential matrix,
//! secret shapes and filter-window limits.

use std::collections::BTreeMap;

use portcullis_shared::api::{AuthMethod, CredentialType};
use portcullis_shared::provider::{Cloud, Locator, Provider, SecretShape};
use serde_json::{Map, Value};

use crate::error::{invalid, ApiResult};
use crate::validate;

pub const MAX_FILTER_WINDOW_BYTES: u64 = 1024 * 1024;
pub const MAX_FILTER_WINDOW_TOKENS: u64 = 4096;

const CONFIG_KEYS: &[&str] = &[
    "model",
    "base_url",
    "region",
    "project",
    "location",
    "api_version",
    "pricing",
    "role_arn",
    "external_id",
    "anthropic_betas",
    "server_tools",
];
/// Most entries of an allow list in `provider_config`.
const MAX_ALLOWED: usize = 32;
const PRICING_KEYS: &[&str] = &[
    "input_usd_per_mtok",
    "output_usd_per_mtok",
    "cached_input_usd_per_mtok",
    "cache_write_usd_per_mtok",
];

pub fn check_provider_config(provider: &Provider, config: &Map<String, Value>) -> ApiResult<()> {
    for key in config.keys() {
        if !CONFIG_KEYS.contains(&key.as_str()) {
            return Err(invalid(format!(
                "provider_config.{key} is not a known setting; known: {}",
                CONFIG_KEYS.join(", ")
            )));
        }
    }
    let text = |key: &str| -> ApiResult<Option<&str>> {
        match config.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(_) => Err(invalid(format!("provider_config.{key} must be a string"))),
        }
    };
    if text("model")?.is_none() {
        return Err(invalid(
            "provider_config.model is required (the upstream model id)",
        ));
    }
    for key in ["region", "project", "location", "api_version"] {
        text(key)?;
    }
    check_role(provider, text("role_arn")?, text("external_id")?)?;
    for key in ["anthropic_betas", "server_tools"] {
        allow_list(config, key)?;
    }
    let base_url = text("base_url")?;
    if let Some(url) = base_url {
        validate::target_url("provider_config.base_url", url)?;
    }
    match provider.locator {
        Locator::DefaultBaseUrl(_) => {}
        Locator::BaseUrl if base_url.is_none() => {
            return Err(invalid(format!(
                "provider_config.base_url is required for provider {}",
                provider.id
            )))
        }
        Locator::BaseUrl => {}
        Locator::Keys(keys) => {
            for key in keys {
                if text(key)?.is_none() {
                    return Err(invalid(format!(
                        "provider {} needs provider_config.{key}",
                        provider.id
                    )));
                }
            }
        }
    }
    if let Some(pricing) = config.get("pricing") {
        check_pricing(pricing)?;
    }
    Ok(())
}

/// A role to assume is a Bedrock matter: an IAM role ARN, with an optional external id.
fn check_role(
    provider: &Provider,
    role_arn: Option<&str>,
    external_id: Option<&str>,
) -> ApiResult<()> {
    if role_arn.is_none() && external_id.is_some() {
        return Err(invalid(
            "provider_config.external_id goes with provider_config.role_arn",
        ));
    }
    let Some(arn) = role_arn else {
        return Ok(());
    };
    if provider.cloud != Some(Cloud::Aws) {
        return Err(invalid(format!(
            "provider_config.role_arn is for bedrock models, not {}",
            provider.id
        )));
    }
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let valid = parts.len() == 6
        && parts[0] == "arn"
        && parts[2] == "iam"
        && parts[5].starts_with("role/")
        && arn.len() <= 2048;
    if !valid {
        return Err(invalid(format!(
            "provider_config.role_arn {:?} is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)",
            validate::clip(arn)
        )));
    }
    Ok(())
}

fn check_pricing(pricing: &Value) -> ApiResult<()> {
    let obj = pricing
        .as_object()
        .ok_or_else(|| invalid("provider_config.pricing must be an object"))?;
    for (key, value) in obj {
        if !PRICING_KEYS.contains(&key.as_str()) {
            return Err(invalid(format!(
                "provider_config.pricing.{key} is not known; known: {}",
                PRICING_KEYS.join(", ")
            )));
        }
        let ok = value.as_f64().is_some_and(|v| v.is_finite() && v >= 0.0);
        if !ok {
            return Err(invalid(format!(
                "provider_config.pricing.{key} must be a non-negative number of USD per million tokens"
            )));
        }
    }
    Ok(())
}

fn default_type(method: AuthMethod) -> CredentialType {
    match method {
        AuthMethod::None => CredentialType::None,
        AuthMethod::ApiKey => CredentialType::Shared,
        AuthMethod::OAuth => CredentialType::PerUser,
    }
}

fn check_pair(method: AuthMethod, ctype: CredentialType) -> ApiResult<()> {
    match (method, ctype) {
        (AuthMethod::None, CredentialType::None) => Ok(()),
        (AuthMethod::None, _) => Err(invalid(format!(
            "auth_method none accepts only credential_type none, not {}",
            ctype.as_str()
        ))),
        (_, CredentialType::None) => Err(invalid(format!(
            "auth_method {} needs credential_type shared or per-user",
            method.as_str()
        ))),
        _ => Ok(()),
    }
}

/// The auth pair of a create: both omitted → `api-key` + `shared`; one omitted → its default.
pub fn resolve_auth(
    method: Option<AuthMethod>,
    ctype: Option<CredentialType>,
) -> ApiResult<(AuthMethod, CredentialType)> {
    let pair = match (method, ctype) {
        (None, None) => (AuthMethod::ApiKey, CredentialType::Shared),
        (Some(m), None) => (m, default_type(m)),
        (None, Some(CredentialType::None)) => (AuthMethod::None, CredentialType::None),
        (None, Some(c)) => (AuthMethod::ApiKey, c),
        (Some(m), Some(c)) => (m, c),
    };
    check_pair(pair.0, pair.1)?;
    Ok(pair)
}

/// The auth pair of an update: omitted values keep the stored ones, except that a new
/// method without a credential type takes that method's default.
pub fn updated_auth(
    current: (AuthMethod, CredentialType),
    method: Option<AuthMethod>,
    ctype: Option<CredentialType>,
) -> ApiResult<(AuthMethod, CredentialType)> {
    let pair = match (method, ctype) {
        (None, None) => current,
        (Some(m), None) if m == current.0 => current,
        (Some(m), None) => (m, default_type(m)),
        (None, Some(c)) => (current.0, c),
        (Some(m), Some(c)) => (m, c),
    };
    check_pair(pair.0, pair.1)?;
    Ok(pair)
}

/// Secret values are stored only for shared API keys, in the provider's shape.
pub fn check_secrets(
    provider: &Provider,
    method: AuthMethod,
    ctype: CredentialType,
    secrets: &BTreeMap<String, String>,
) -> ApiResult<()> {
    if secrets.is_empty() {
        return Ok(());
    }
    if (method, ctype) != (AuthMethod::ApiKey, CredentialType::Shared) {
        return Err(invalid(format!(
            "secret_values can be stored only for auth_method api-key with credential_type \
             shared (this model uses {} / {})",
            method.as_str(),
            ctype.as_str()
        )));
    }
    if secrets.len() > 16 {
        return Err(invalid("secret_values has more than 16 entries"));
    }
    for (key, value) in secrets {
        if value.len() > 64 * 1024 {
            return Err(invalid(format!(
                "secret_values.{key} is larger than 64 KiB"
            )));
        }
        match provider.secret_shape {
            // A Bedrock API key: `Authorization: Bearer …` in place of access keys.
            SecretShape::Fields(_)
                if provider.cloud == Some(Cloud::Aws) && key == "Authorization" =>
            {
                validate::header_value(&format!("secret_values.{key}"), value)?;
            }
            SecretShape::Headers => {
                validate::header_name("secret_values", key)?;
                validate::header_value(&format!("secret_values.{key}"), value)?;
            }
            SecretShape::Fields(fields) => {
                if !fields.contains(&key.as_str()) {
                    return Err(invalid(format!(
                        "secret_values.{} is not a credential field of provider {}; known: {}",
                        validate::clip(key),
                        provider.id,
                        fields.join(", ")
                    )));
                }
                if value.is_empty() {
                    return Err(invalid(format!("secret_values.{key} must not be empty")));
                }
            }
        }
    }
    check_cloud_secrets(provider, secrets)
}

/// The fields a cloud provider's stored credential needs together.
fn check_cloud_secrets(provider: &Provider, secrets: &BTreeMap<String, String>) -> ApiResult<()> {
    if secrets.is_empty() {
        return Ok(());
    }
    let api_key = secrets.contains_key("Authorization");
    match provider.cloud {
        Some(Cloud::Aws) if api_key && secrets.len() > 1 => {
            return Err(invalid(
                "secret_values holds either a Bedrock API key (Authorization) or access keys, not both",
            ));
        }
        Some(Cloud::Aws) if api_key => {}
        Some(Cloud::Aws) => {
            for key in ["aws_access_key_id", "aws_secret_access_key"] {
                if !secrets.contains_key(key) {
                    return Err(invalid(format!(
                        "bedrock access keys need secret_values.{key}"
                    )));
                }
            }
        }
        Some(Cloud::Google) => {
            let json = secrets
                .get("service_account_json")
                .map(String::as_str)
                .unwrap_or_default();
            check_service_account(json)?;
        }
        None => {}
    }
    Ok(())
}

/// A Google service-account key file: an email, an RSA key in PEM and a token URI. Messages
/// never repeat the key.
fn check_service_account(json: &str) -> ApiResult<()> {
    let bad = |why: &str| invalid(format!("secret_values.service_account_json {why}"));
    let key: Value = serde_json::from_str(json).map_err(|_| bad("is not JSON"))?;
    let field = |k: &str| key.get(k).and_then(Value::as_str).filter(|v| !v.is_empty());
    if field("client_email").is_none() {
        return Err(bad("has no client_email"));
    }
    if !field("private_key").is_some_and(|k| k.contains("PRIVATE KEY-----")) {
        return Err(bad("has no private_key in PEM"));
    }
    match field("token_uri") {
        Some(uri) => validate::target_url("service_account_json.token_uri", uri).map(|_| ()),
        None => Err(bad("has no token_uri")),
    }
}

/// Filter windows: at most 1 MiB and 4,096 tokens; 0 uses the workspace setting.
pub fn filter_window(bytes: u64, tokens: u64) -> ApiResult<(i64, i64)> {
    if bytes > MAX_FILTER_WINDOW_BYTES {
        return Err(invalid(format!(
            "filter_window_bytes is {bytes}; the maximum is {MAX_FILTER_WINDOW_BYTES} (1 MiB)"
        )));
    }
    if tokens > MAX_FILTER_WINDOW_TOKENS {
        return Err(invalid(format!(
            "filter_window_tokens is {tokens}; the maximum is {MAX_FILTER_WINDOW_TOKENS}"
        )));
    }
    // Both bounds fit in i64.
    Ok((bytes as i64, tokens as i64))
}

/// An allow list of Anthropic's request extensions (`anthropic_betas`: `anthropic-beta`
/// values; `server_tools`: server tool types such as `web_search_20250305`) that callers may
/// pass through to this model: an array of at most 32 names of letters, digits, `-` and `_`.
fn allow_list(config: &Map<String, Value>, key: &str) -> ApiResult<()> {
    let Some(value) = config.get(key).filter(|v| !v.is_null()) else {
        return Ok(());
    };
    let names = value
        .as_array()
        .ok_or_else(|| invalid(format!("provider_config.{key} must be an array of names")))?;
    if names.len() > MAX_ALLOWED {
        return Err(invalid(format!(
            "provider_config.{key} lists more than {MAX_ALLOWED} names"
        )));
    }
    for name in names {
        let ok = name.as_str().is_some_and(|n| {
            !n.is_empty()
                && n.len() <= 64
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        });
        if !ok {
            return Err(invalid(format!(
                "provider_config.{key}: {} is not a name (letters, digits, - and _, at most 64)",
                validate::clip(&name.to_string())
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_defaults_follow_the_spec() {
        assert_eq!(
            resolve_auth(None, None).unwrap(),
            (AuthMethod::ApiKey, CredentialType::Shared)
        );
        assert_eq!(
            resolve_auth(Some(AuthMethod::None), None).unwrap(),
            (AuthMethod::None, CredentialType::None)
        );
        assert_eq!(
            resolve_auth(Some(AuthMethod::OAuth), None).unwrap(),
            (AuthMethod::OAuth, CredentialType::PerUser)
        );
        assert!(resolve_auth(Some(AuthMethod::None), Some(CredentialType::Shared)).is_err());
        assert!(resolve_auth(Some(AuthMethod::ApiKey), Some(CredentialType::None)).is_err());
    }

    #[test]
    fn update_keeps_or_defaults() {
        let cur = (AuthMethod::ApiKey, CredentialType::Shared);
        assert_eq!(updated_auth(cur, None, None).unwrap(), cur);
        assert_eq!(
            updated_auth(cur, None, Some(CredentialType::PerUser)).unwrap(),
            (AuthMethod::ApiKey, CredentialType::PerUser)
        );
        assert_eq!(
            updated_auth(cur, Some(AuthMethod::None), None).unwrap(),
            (AuthMethod::None, CredentialType::None)
        );
        assert!(updated_auth(cur, None, Some(CredentialType::None)).is_err());
    }
}
