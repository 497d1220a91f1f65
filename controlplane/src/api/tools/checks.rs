//! The tool connection checks: protocols and their config, egress headers, auth pairing (the
//! same matrix as models, plus `oauth` only over streamable-http), and OAuth client settings.

use std::collections::{BTreeMap, HashSet};

use portcullis_shared::api::tools::{HeaderSource, HttpConfig, Protocol, StdioConfig};
use portcullis_shared::api::{AuthMethod, CredentialType};
use serde_json::{Map, Value};

use crate::error::{invalid, precondition, ApiResult};
use crate::validate;

/// Tool connection names: letters, digits, `_` and `-` (they prefix `connection/tool`).
pub fn connection_name(value: &str) -> ApiResult<String> {
    if value.is_empty() || value.len() > 48 {
        return Err(invalid("name must be 1–48 characters"));
    }
    if !value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(invalid(format!(
            "name '{}' may contain only letters, digits, _ and - (tool names are connection/tool)",
            validate::clip(value)
        )));
    }
    Ok(value.to_string())
}

pub fn protocol(value: &str) -> ApiResult<Protocol> {
    match Protocol::parse(value) {
        Some(Protocol::Rest) => Err(invalid(
            "protocol rest is only created by installing a catalog adapter; use streamable-http or stdio",
        )),
        Some(p) => Ok(p),
        None => Err(invalid(format!(
            "protocol '{}' is unknown; use streamable-http or stdio",
            validate::clip(value)
        ))),
    }
}

/// A connection's config, parsed for its protocol. `require_target` demands the URL or command
/// (creation); an update may clear them, as the spec's update rule says.
pub enum Config {
    Http(HttpConfig),
    Stdio(StdioConfig),
}

impl Config {
    pub fn to_value(&self) -> Value {
        match self {
            Config::Http(c) => serde_json::to_value(c).unwrap_or(Value::Null),
            Config::Stdio(c) => serde_json::to_value(c).unwrap_or(Value::Null),
        }
    }
}

fn parse_field<T: serde::de::DeserializeOwned + Default>(value: Option<&Value>) -> ApiResult<T> {
    match value {
        None | Some(Value::Null) => Ok(T::default()),
        Some(v) => {
            serde_json::from_value(v.clone()).map_err(|e| invalid(format!("protocol_config: {e}")))
        }
    }
}

pub fn config(
    protocol: Protocol,
    value: Option<&Value>,
    require_target: bool,
    allow_stdio: bool,
) -> ApiResult<Config> {
    match protocol {
        Protocol::StreamableHttp => {
            let c: HttpConfig = parse_field(value)?;
            if c.url.is_empty() {
                if require_target {
                    return Err(invalid(
                        "protocol_config.url is required for streamable-http",
                    ));
                }
            } else {
                validate::target_url("protocol_config.url", &c.url)?;
            }
            headers(&c)?;
            Ok(Config::Http(c))
        }
        Protocol::Stdio => {
            if !allow_stdio {
                return Err(precondition("this deployment does not allow stdio tools"));
            }
            if value.and_then(|v| v.get("headers")).is_some() {
                return Err(invalid("only streamable-http tools carry headers"));
            }
            let c: StdioConfig = parse_field(value)?;
            if c.command.trim().is_empty() && require_target {
                return Err(invalid("protocol_config.command is required for stdio"));
            }
            for key in c.env.keys() {
                let ok = !key.is_empty()
                    && key
                        .chars()
                        .all(|ch| ch.is_ascii_alphanumeric() || ch == '_');
                if !ok {
                    return Err(invalid(format!(
                        "protocol_config.env: '{}' is not a variable name",
                        validate::clip(key)
                    )));
                }
            }
            Ok(Config::Stdio(c))
        }
        Protocol::Rest => Err(invalid("protocol rest is only created by catalog install")),
    }
}

fn headers(c: &HttpConfig) -> ApiResult<()> {
    let mut seen = HashSet::new();
    if c.headers.len() > 32 {
        return Err(invalid("protocol_config.headers has more than 32 entries"));
    }
    for (i, h) in c.headers.iter().enumerate() {
        let field = format!("protocol_config.headers[{i}]");
        validate::header_name(&format!("{field}.name"), &h.name)?;
        if !seen.insert(h.name.to_ascii_lowercase()) {
            return Err(invalid(format!(
                "{field}: header {} is listed twice",
                h.name
            )));
        }
        match (h.source, h.value.as_deref()) {
            (HeaderSource::Literal, Some(v)) => validate::header_value(&format!("{field}.value"), v)?,
            (HeaderSource::Secret, Some(v)) if !v.is_empty() => {}
            (HeaderSource::Actas, None) => {}
            (HeaderSource::Actas, Some(_)) => {
                return Err(invalid(format!("{field}: an actas header takes no value; it forwards the verified act-as assertion")))
            }
            (source, _) => {
                let kind = match source {
                    HeaderSource::Literal => "literal",
                    HeaderSource::Secret => "secret",
                    HeaderSource::Actas => "actas",
                };
                return Err(invalid(format!("{field}.value is required for a {kind} header")));
            }
        }
    }
    Ok(())
}

/// The rules that span fields, on the connection as it will be stored.
pub fn check_whole(
    protocol: Protocol,
    config: &Config,
    method: AuthMethod,
    ctype: CredentialType,
    secret_keys: &[String],
) -> ApiResult<()> {
    if method == AuthMethod::OAuth && protocol != Protocol::StreamableHttp {
        return Err(invalid(
            "auth_method oauth requires protocol streamable-http",
        ));
    }
    if let Config::Http(c) = config {
        for h in &c.headers {
            match h.source {
                HeaderSource::Actas if method == AuthMethod::OAuth => {
                    return Err(invalid(format!(
                        "header {}: an actas header is invalid on an oauth tool",
                        h.name
                    )))
                }
                HeaderSource::Secret => {
                    let key = h.value.as_deref().unwrap_or_default();
                    if !secret_keys.iter().any(|k| k == key) {
                        return Err(invalid(format!(
                            "header {}: secret '{}' is not among the connection's secret_values",
                            h.name,
                            validate::clip(key)
                        )));
                    }
                }
                _ => {}
            }
        }
    }
    let _ = ctype;
    Ok(())
}

/// Secret values are stored only for shared API keys.
pub fn check_secrets(
    method: AuthMethod,
    ctype: CredentialType,
    secrets: &BTreeMap<String, String>,
) -> ApiResult<()> {
    if secrets.is_empty() {
        return Ok(());
    }
    if (method, ctype) != (AuthMethod::ApiKey, CredentialType::Shared) {
        return Err(invalid(format!(
            "secret_values can be stored only for auth_method api-key with credential_type shared (this tool uses {} / {})",
            method.as_str(),
            ctype.as_str()
        )));
    }
    if secrets.len() > 16 {
        return Err(invalid("secret_values has more than 16 entries"));
    }
    for (key, value) in secrets {
        if key.is_empty() || key.len() > 128 || value.is_empty() || value.len() > 64 * 1024 {
            return Err(invalid(format!(
                "secret_values.{}: keys are 1–128 characters and values 1 byte to 64 KiB",
                validate::clip(key)
            )));
        }
        if value.chars().any(|c| c.is_control()) {
            return Err(invalid(format!(
                "secret_values.{} contains control characters",
                validate::clip(key)
            )));
        }
    }
    Ok(())
}

const OAUTH_KEYS: &[&str] = &[
    "issuer",
    "authorization_url",
    "token_url",
    "revocation_url",
    "registration_url",
    "client_id",
    "client_secret",
    "scopes",
    "dynamic_registration",
    "resource",
];

/// OAuth client settings: only with `auth_method: oauth`; URLs must be URLs. Returns the
/// settings without `client_secret`, and the secret.
pub fn auth_config(
    method: AuthMethod,
    config: &Map<String, Value>,
) -> ApiResult<(Map<String, Value>, Option<String>)> {
    if config.is_empty() {
        return Ok((Map::new(), None));
    }
    if method != AuthMethod::OAuth {
        return Err(invalid(
            "auth_config (OAuth client settings) applies only to auth_method oauth",
        ));
    }
    let mut out = config.clone();
    for key in config.keys() {
        if !OAUTH_KEYS.contains(&key.as_str()) {
            return Err(invalid(format!(
                "auth_config.{key} is not known; known: {}",
                OAUTH_KEYS.join(", ")
            )));
        }
    }
    for key in [
        "issuer",
        "authorization_url",
        "token_url",
        "revocation_url",
        "registration_url",
        "resource",
    ] {
        if let Some(v) = config.get(key) {
            let text = v
                .as_str()
                .ok_or_else(|| invalid(format!("auth_config.{key} must be a string")))?;
            // The browser follows the authorization URL and `resource` names the server: this
            // service fetches the others.
            let field = format!("auth_config.{key}");
            match key {
                "authorization_url" | "resource" => validate::http_url(&field, text)?,
                _ => validate::target_url(&field, text)?,
            };
        }
    }
    let secret = match out.remove("client_secret") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => return Err(invalid("auth_config.client_secret must be a string")),
    };
    Ok((out, secret))
}
