//! Parsing of the compact flag forms: `NAME=VALUE`, `MODEL[:WEIGHT[:PRIORITY]]`, and the
//! API-key header per provider.

use anyhow::{anyhow, bail};
use serde_json::{Map, Value};

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

pub fn pairs(flag: &str, items: &[String]) -> anyhow::Result<Map<String, Value>> {
    let mut map = Map::new();
    for item in items {
        let (k, v) = pair(flag, item)?;
        map.insert(k, Value::String(v));
    }
    Ok(map)
}

/// `MODEL[:WEIGHT[:PRIORITY]]` → (model, weight, priority).
pub fn member(text: &str) -> anyhow::Result<(String, Option<u32>, Option<u32>)> {
    let mut parts = text.split(':');
    let model = parts
        .next()
        .filter(|m| !m.is_empty())
        .ok_or_else(|| anyhow!("--member needs a model"))?;
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

/// The secret a provider's API key is stored as: its header and scheme.
pub fn api_key_secret(provider: &str, key: &str) -> anyhow::Result<(String, String)> {
    let p = portcullis_shared::provider::find(provider).ok_or_else(|| {
        anyhow!(
            "unknown provider '{provider}'; known: {}",
            portcullis_shared::provider::known_ids()
        )
    })?;
    if let portcullis_shared::provider::SecretShape::Fields(fields) = p.secret_shape {
        bail!(
            "provider {provider} takes cloud credentials, not an API key; use --secret with {}",
            fields.join(", ")
        );
    }
    let (header, scheme) = p.api_key_header;
    Ok((header.to_string(), format!("{scheme}{key}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_keep_equals_in_values() {
        assert_eq!(
            pair("secret", "Authorization=Bearer a=b").unwrap(),
            ("Authorization".into(), "Bearer a=b".into())
        );
        assert!(pair("secret", "novalue").is_err());
        assert!(pair("attr", "=x").is_err());
    }

    #[test]
    fn members() {
        assert_eq!(member("gpt").unwrap(), ("gpt".into(), None, None));
        assert_eq!(member("gpt:3").unwrap(), ("gpt".into(), Some(3), None));
        assert_eq!(member("gpt::2").unwrap(), ("gpt".into(), None, Some(2)));
        assert!(member("gpt:x").is_err());
        assert!(member("a:1:2:3").is_err());
    }

    #[test]
    fn api_keys_go_under_the_provider_header() {
        assert_eq!(
            api_key_secret("openai", "sk").unwrap(),
            ("Authorization".into(), "Bearer sk".into())
        );
        assert_eq!(
            api_key_secret("anthropic", "k").unwrap(),
            ("x-api-key".into(), "k".into())
        );
        assert!(api_key_secret("bedrock", "k").is_err());
        assert!(api_key_secret("nope", "k").is_err());
    }
}
