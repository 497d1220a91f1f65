//! Destination providers: a generic HTTPS endpoint (the Standard Webhooks body as is) and
//! Slack incoming webhooks (a one-line summary as `{"text"}`; the URL is the secret). Every
//! destination has a signing secret and every attempt carries the signature headers.

use portcullis_shared::api::eventing::{Provider, ProviderSetting};
use serde_json::{json, Map, Value};

use super::target;

pub const HTTPS: &str = "https";
pub const SLACK: &str = "slack";

pub fn list() -> Vec<Provider> {
    vec![
        Provider {
            provider: HTTPS.into(),
            display_name: "HTTPS endpoint".into(),
            description: "Signed POSTs of {type, timestamp, data} to delivery_endpoint; verify \
                          them with any Standard Webhooks library."
                .into(),
            settings: vec![],
        },
        Provider {
            provider: SLACK.into(),
            display_name: "Slack incoming webhook".into(),
            description: "A one-line summary of each event posted to a Slack channel.".into(),
            settings: vec![ProviderSetting {
                name: "webhook_url".into(),
                description: "The incoming webhook URL Slack gave you \
                              (https://hooks.slack.com/services/…)."
                    .into(),
                required: true,
                secret: true,
            }],
        },
    ]
}

/// A provider's settings checked and split into what may be shown and what is sealed.
#[derive(Debug)]
pub struct Settings {
    pub shown: Map<String, Value>,
    pub sealed: Map<String, Value>,
}

pub fn check_settings(
    provider: &str,
    settings: &Map<String, Value>,
    allow_private: bool,
) -> Result<Settings, String> {
    let Some(spec) = list().into_iter().find(|p| p.provider == provider) else {
        return Err(format!(
            "provider: unknown provider {provider:?}; ListProviders lists https and slack"
        ));
    };
    let mut out = Settings {
        shown: Map::new(),
        sealed: Map::new(),
    };
    for (key, value) in settings {
        let Some(field) = spec.settings.iter().find(|s| s.name == *key) else {
            return Err(format!(
                "settings.{key}: the {provider} provider has no such setting"
            ));
        };
        let Some(text) = value.as_str() else {
            return Err(format!("settings.{key}: must be a string"));
        };
        if key == "webhook_url" {
            target::check_url(text, allow_private)
                .map_err(|e| format!("settings.webhook_url {e}"))?;
        }
        let into = if field.secret {
            &mut out.sealed
        } else {
            &mut out.shown
        };
        into.insert(key.clone(), Value::String(text.to_string()));
    }
    for field in spec.settings.iter().filter(|s| s.required) {
        if !settings.contains_key(&field.name) {
            return Err(format!(
                "settings.{}: required by the {provider} provider",
                field.name
            ));
        }
    }
    Ok(out)
}

/// What is posted to a provider for an event body.
pub fn shape(provider: &str, body: &Value) -> Value {
    if provider != SLACK {
        return body.clone();
    }
    let data = &body["data"];
    let field = |k: &str| data.get(k).and_then(Value::as_str).unwrap_or_default();
    let mut parts = Vec::new();
    if !field("agent_name").is_empty() {
        parts.push(format!("agent {}", field("agent_name")));
    }
    let resource = data["resource"]["name"].as_str().unwrap_or_default();
    if !resource.is_empty() {
        parts.push(format!(
            "{} {resource}",
            data["resource"]["kind"].as_str().unwrap_or("on")
        ));
    }
    for k in ["reason", "guard", "action"] {
        if !field(k).is_empty() {
            parts.push(format!("{k}: {}", field(k)));
        }
    }
    let kind = body["type"].as_str().unwrap_or_default();
    let text = if parts.is_empty() {
        format!("Portcullis: {kind}")
    } else {
        format!("Portcullis: {kind} — {}", parts.join(", "))
    };
    json!({ "text": text })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn slack_takes_its_url_sealed_and_posts_a_summary() {
        let settings = json!({"webhook_url": "https://hooks.slack.com/services/T0/B0/x"});
        let s = check_settings(SLACK, settings.as_object().unwrap(), false).unwrap();
        assert!(s.shown.is_empty());
        assert_eq!(s.sealed["webhook_url"], settings["webhook_url"]);
        let missing = check_settings(SLACK, &Map::new(), false).unwrap_err();
        assert!(missing.contains("settings.webhook_url"));
        let unknown = json!({"channel": "#x"});
        assert!(check_settings(SLACK, unknown.as_object().unwrap(), false).is_err());
        assert!(check_settings("teams", &Map::new(), false)
            .unwrap_err()
            .contains("provider"));
        let body = json!({"type": "access.denied", "timestamp": "t", "data": {
            "agent_name": "billing", "resource": {"kind": "tool", "name": "github/delete_repo"},
            "reason": "forbidden by rule"}});
        assert_eq!(
            shape(SLACK, &body)["text"],
            "Portcullis: access.denied — agent billing, tool github/delete_repo, reason: \
             forbidden by rule"
        );
        assert_eq!(shape(HTTPS, &body), body);
    }
}
