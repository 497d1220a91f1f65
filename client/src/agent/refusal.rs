//! Reads a gateway's refusal, in whichever shape it came (OpenAI, Anthropic or JSON-RPC), into
//! the spec's error classes.

use serde_json::Value;

use crate::error::{GatewayError, GatewayErrorKind};

/// What the call was about, for the error's fields.
#[derive(Debug, Clone, Default)]
pub struct CallIds {
    pub activity_id: Option<String>,
    pub gateway_id: Option<String>,
    pub request_id: Option<String>,
    /// The model or tool named.
    pub target: String,
    /// `Retry-After`, in seconds.
    pub retry_after: Option<u64>,
}

/// The parts of an error body the classes need: the `error` object of all three shapes,
/// with its details either beside the message (OpenAI, Anthropic) or under `data` (JSON-RPC).
struct Said<'a> {
    error: &'a Value,
    details: &'a Value,
    rpc_code: Option<i64>,
}

impl<'a> Said<'a> {
    fn of(body: &'a Value) -> Self {
        let error = &body["error"];
        let rpc_code = error["code"].as_i64();
        let details = if error["data"].is_object() {
            &error["data"]
        } else {
            error
        };
        Self {
            error,
            details,
            rpc_code,
        }
    }

    fn text(&self, field: &str) -> Option<String> {
        self.details[field]
            .as_str()
            .or_else(|| self.error[field].as_str())
            .map(str::to_string)
    }

    /// The reason code: `data.reason_code` (JSON-RPC), else the string `code`.
    fn code(&self) -> Option<String> {
        self.details["reason_code"]
            .as_str()
            .or_else(|| self.error["code"].as_str())
            .map(str::to_string)
    }
}

/// A refusal the gateway answered with `status` and `body` (a whole HTTP error, or the
/// in-band error of a JSON-RPC reply with status 200).
pub fn classify(status: u16, body: &Value, ids: CallIds) -> GatewayError {
    let said = Said::of(body);
    let message = said.error["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| format!("the gateway answered HTTP {status}"));
    let code = said.code();
    let kind = kind(status, &said, code.as_deref(), &ids, &message);
    GatewayError {
        kind,
        message,
        status_code: status,
        request_id: said
            .text("request_id")
            .or_else(|| body["request_id"].as_str().map(str::to_string))
            .or(ids.request_id),
        activity_id: ids.activity_id,
        gateway_id: ids.gateway_id,
    }
}

fn kind(
    status: u16,
    said: &Said<'_>,
    code: Option<&str>,
    ids: &CallIds,
    message: &str,
) -> GatewayErrorKind {
    // A rule (with its determining policy), a blocked catalog entry or a guard.
    let denial = said.text("determining_policy").is_some()
        || matches!(
            code,
            Some("policy_denied" | "blocked" | "input_filtered" | "output_filtered")
        );
    match code {
        Some("credential_required") => GatewayErrorKind::CredentialRequired {
            connection_name: said.text("connection_name").unwrap_or_default(),
            provision_url: said.text("provision_url").unwrap_or_default(),
            expires_at: said.text("expires_at").unwrap_or_default(),
        },
        Some(c) if c.starts_with("actas_") && c != "actas_issuer_unavailable" => {
            GatewayErrorKind::ActAsRequired {
                reason_code: c.to_string(),
            }
        }
        Some("model_not_found") => GatewayErrorKind::ModelNotFound {
            model: ids.target.clone(),
        },
        _ if denial => GatewayErrorKind::Denied {
            reason: said.text("reason").unwrap_or_else(|| message.to_string()),
            reason_code: code.unwrap_or("denied").to_string(),
            determining_policy: said.text("determining_policy"),
        },
        // An upstream MCP server's own error, passed on by the gateway.
        Some("upstream_rpc_error") => GatewayErrorKind::Gateway {
            reason_code: code.map(str::to_string),
        },
        _ if said.rpc_code == Some(-32602) && !ids.target.is_empty() => {
            GatewayErrorKind::ToolNotFound {
                tool: ids.target.clone(),
            }
        }
        Some("not_ready" | "quota_unavailable") => GatewayErrorKind::NotReady,
        Some("policy_stale") => GatewayErrorKind::PolicyStale,
        Some("upstream_error" | "upstream_failed" | "upstream_timeout") => {
            GatewayErrorKind::Unavailable
        }
        _ => by_status(status, said, code, ids),
    }
}

fn by_status(status: u16, said: &Said<'_>, code: Option<&str>, ids: &CallIds) -> GatewayErrorKind {
    match status {
        401 | 403 => GatewayErrorKind::AuthorizationDenied {
            reason_code: code.map(str::to_string),
        },
        429 => GatewayErrorKind::RateLimited {
            retry_after_secs: ids.retry_after,
            quota_id: said.text("quota_id"),
            resets_at: said.text("resets_at"),
        },
        502..=504 => GatewayErrorKind::Unavailable,
        _ => GatewayErrorKind::Gateway {
            reason_code: code.map(str::to_string),
        },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ids(target: &str) -> CallIds {
        CallIds {
            target: target.into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_three_shapes_of_one_denial_read_alike() {
        let details = json!({"reason": "no rule permits", "reason_code": "no_permit",
            "determining_policy": "default-deny", "request_id": "r1"});
        let mut openai = json!({"error": {"message": "no rule permits", "code": "policy_denied"}});
        let mut anthropic = json!({"type": "error", "error": {"message": "no rule permits", "code": "policy_denied"}});
        for body in [&mut openai, &mut anthropic] {
            for (k, v) in details.as_object().unwrap() {
                body["error"][k] = v.clone();
            }
        }
        let rpc = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "no rule permits", "data": details}});
        for (status, body) in [(403, openai), (403, anthropic), (200, rpc)] {
            let e = classify(status, &body, ids("m"));
            assert_eq!(
                e.kind,
                GatewayErrorKind::Denied {
                    reason: "no rule permits".into(),
                    reason_code: "no_permit".into(),
                    determining_policy: Some("default-deny".into()),
                },
                "{body}"
            );
            assert_eq!(e.request_id.as_deref(), Some("r1"));
        }
    }

    #[test]
    fn statuses_and_codes_pick_the_class() {
        let openai = |code: &str| json!({"error": {"message": "m", "code": code}});
        let class = |status, body: Value| classify(status, &body, ids("x")).kind.class();
        assert_eq!(
            class(401, openai("invalid_api_key")),
            "authorization denied"
        );
        assert_eq!(class(404, openai("model_not_found")), "model not found");
        assert_eq!(class(403, openai("actas_required")), "act-as required");
        assert_eq!(
            class(503, openai("actas_issuer_unavailable")),
            "gateway unavailable"
        );
        assert_eq!(class(503, openai("not_ready")), "gateway not ready");
        assert_eq!(class(429, openai("quota_exceeded")), "rate limited");
        assert_eq!(class(502, openai("upstream_failed")), "gateway unavailable");
        assert_eq!(class(400, openai("invalid_request")), "gateway error");
        let in_band = json!({"error": {"code": -32603, "message": "m",
            "data": {"reason_code": "upstream_error"}}});
        assert_eq!(class(200, in_band), "gateway unavailable");
        assert_eq!(
            class(
                200,
                json!({"error": {"code": -32602, "message": "unknown tool: a/b"}})
            ),
            "tool not found"
        );
        let e = classify(
            401,
            &json!({"error": {"message": "m", "code": "credential_required",
                "connection_name": "github", "provision_url": "https://cp/provision/t",
                "expires_at": "2026-01-01T00:00:00Z"}}),
            ids("github/search"),
        );
        assert_eq!(
            e.kind,
            GatewayErrorKind::CredentialRequired {
                connection_name: "github".into(),
                provision_url: "https://cp/provision/t".into(),
                expires_at: "2026-01-01T00:00:00Z".into(),
            }
        );
    }
}

/// Whatever a gateway (or something in its place) answers, reading it never panics and keeps
/// the status.
#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;
    use serde_json::Value;

    use super::{classify, CallIds};

    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<i64>().prop_map(Value::from),
            "(policy_denied|credential_required|actas_required|model_not_found|not_ready|.{0,8})"
                .prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop::collection::btree_map(
                "(error|data|code|message|reason_code|determining_policy|provision_url|.{0,4})",
                inner,
                0..4,
            )
            .prop_map(|m| Value::Object(m.into_iter().collect()))
        })
    }

    proptest! {
        #[test]
        fn any_reply_reads_as_some_class(status in 0u16..600, body in json()) {
            let e = classify(status, &body, CallIds::default());
            prop_assert_eq!(e.status_code, status);
            prop_assert!(!e.kind.class().is_empty());
        }
    }
}
