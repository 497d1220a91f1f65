//! Why a gateway request failed, as data. The `respond` module is the one place that turns
//! these into responses in the caller's API shape.

use bytes::Bytes;
use portcullis_shared::api::guards::GuardStage;
use serde_json::{json, Value};

/// The shape a caller's replies take: the API it called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// OpenAI: `{"error": {message, type, code, param}}`.
    OpenAi,
    /// Anthropic: `{"type": "error", "error": {type, message}}`.
    Anthropic,
    /// MCP: JSON-RPC errors.
    JsonRpc,
}

/// An upstream refused the request itself (a 4xx about the request, not about the gateway):
/// the caller hears it in its own shape, with the provider's scrubbed message.
#[derive(Debug)]
pub struct Refusal {
    pub status: u16,
    /// The model that refused.
    pub model: String,
    /// The provider's error type, when it gave one.
    pub kind: String,
    /// The provider's message, scrubbed of the stored credential.
    pub message: String,
    /// The provider's `Retry-After`.
    pub retry_after: Option<String>,
    /// The provider's own body, scrubbed, when it is already in a caller's shape: passed on
    /// as it is to a caller of that shape.
    pub body: Option<(Shape, Bytes)>,
}

/// A JSON-RPC error of the MCP endpoint, answered in-band (HTTP 200).
#[derive(Debug, Clone)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
    /// Set when a rule or the catalog refused the call (audited as `access.denied`); boxed,
    /// so the error stays small on the paths that succeed.
    pub denial: Option<Box<Denial>>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
            denial: None,
        }
    }

    pub fn denied(d: &Denial, request_id: &str) -> Self {
        Self {
            code: -32001,
            message: d.reason.clone(),
            data: Some(
                serde_json::json!({"reason": d.reason, "reason_code": d.reason_code,
                "determining_policy": d.determining_policy, "request_id": request_id}),
            ),
            denial: Some(Box::new(d.clone())),
        }
    }

    /// A refusal of the gateway's own, in-band (`-32001`), with its details in `data`.
    pub fn refused(err: &GatewayError, request_id: &str) -> Self {
        Self {
            code: -32001,
            message: err.to_string(),
            data: Some(err.refusal_data(request_id)),
            denial: None,
        }
    }

    /// A failure of the gateway or the upstream, with a reason code.
    pub fn gateway(message: String, reason_code: &str, request_id: &str) -> Self {
        Self {
            code: -32603,
            data: Some(
                serde_json::json!({"reason": message, "reason_code": reason_code,
                "request_id": request_id}),
            ),
            message,
            denial: None,
        }
    }
}

/// A policy denial's explanation, as the caller sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub reason: String,
    /// `no_permit` (nothing allowed it) or `forbidden` (a forbid matched).
    pub reason_code: &'static str,
    /// The forbid that matched, or `default-deny`.
    pub determining_policy: String,
}

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unauthenticated(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{}", .0.reason)]
    Denied(Denial),
    /// The act-as identity was refused; `code` says why (`actas_expired`, `actas_audience`, …).
    #[error("act-as identity refused: {message}")]
    ActAsRefused { code: &'static str, message: String },
    /// The person has no credential for a per-user connection yet.
    #[error("'{}' needs your own credential: provide it at the provision_url, then retry", .0.connection_name)]
    CredentialRequired(Box<Missing>),
    #[error("{0}")]
    NotFound(String),
    #[error("model '{0}' is not available on this gateway")]
    ModelNotFound(String),
    #[error("request body is larger than {0} bytes")]
    TooLarge(usize),
    #[error("the gateway has no configuration yet; retry shortly")]
    NotReady,
    /// The gateway holds as much as it may (request bodies in flight).
    #[error("{0}")]
    Overloaded(String),
    /// The gateway has not reached its control plane for longer than `max_policy_age_secs`,
    /// so its rules may be out of date: it refuses rather than decide on them.
    #[error("the gateway's policy is stale: it has not reached its control plane for {0} s")]
    PolicyStale(u64),
    #[error("{0}")]
    Unsupported(String),
    #[error("upstream failed: {0}")]
    Upstream(String),
    #[error("upstream timed out: {0}")]
    UpstreamTimeout(String),
    #[error("model '{}' refused the request: {}", .0.model, .0.message)]
    UpstreamRefused(Box<Refusal>),
    #[error("{message}")]
    QuotaExceeded {
        message: String,
        quota_id: String,
        resets_at: String,
    },
    /// The model relies on the gateway's own cloud identity, which this gateway may not use.
    #[error("{0}")]
    CloudIdentityUnavailable(String),
    /// A quota applies but the model has no price: it would be charged zero.
    #[error("{0}")]
    Unpriced(String),
    /// A quota applies but the spend counters are not loaded yet.
    #[error("{0}")]
    QuotaUnavailable(String),
    /// A `block` guard matched what was sent or answered.
    #[error("{0}")]
    Filtered(Filtered),
    #[error("{0}")]
    Internal(String),
}

impl GatewayError {
    pub fn status(&self) -> u16 {
        match self {
            GatewayError::BadRequest(_) | GatewayError::Unsupported(_) => 400,
            GatewayError::TooLarge(_) => 413,
            GatewayError::Unauthenticated(_) | GatewayError::CredentialRequired(_) => 401,
            // The issuer's keys could not be fetched: not the caller's fault, worth a retry.
            GatewayError::ActAsRefused {
                code: "actas_issuer_unavailable",
                ..
            } => 503,
            GatewayError::Forbidden(_)
            | GatewayError::Denied(_)
            | GatewayError::ActAsRefused { .. }
            | GatewayError::Unpriced(_)
            | GatewayError::Filtered(_)
            | GatewayError::CloudIdentityUnavailable(_) => 403,
            GatewayError::QuotaExceeded { .. } => 429,
            GatewayError::NotFound(_) | GatewayError::ModelNotFound(_) => 404,
            GatewayError::Upstream(_) => 502,
            GatewayError::NotReady
            | GatewayError::Overloaded(_)
            | GatewayError::PolicyStale(_)
            | GatewayError::QuotaUnavailable(_) => 503,
            GatewayError::UpstreamTimeout(_) => 504,
            GatewayError::UpstreamRefused(r) => r.status,
            GatewayError::Internal(_) => 500,
        }
    }

    /// Anthropic's error `type` for this failure's status.
    pub fn anthropic_type(&self) -> &'static str {
        match self.status() {
            400 | 422 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            503 => "overloaded_error",
            504 => "timeout_error",
            _ => "api_error",
        }
    }

    /// OpenAI's error `type` and `code`.
    pub fn openai_type_and_code(&self) -> (&'static str, &'static str) {
        match self {
            GatewayError::BadRequest(_) => ("invalid_request_error", "invalid_request"),
            GatewayError::Unsupported(_) => ("invalid_request_error", "unsupported"),
            GatewayError::Unauthenticated(_) => ("authentication_error", "invalid_api_key"),
            GatewayError::CredentialRequired(_) => ("credential_required", "credential_required"),
            GatewayError::Forbidden(_) => ("permission_error", "forbidden"),
            GatewayError::Denied(_) => ("permission_error", "policy_denied"),
            GatewayError::ActAsRefused {
                code: "actas_issuer_unavailable",
                ..
            } => ("server_error", "actas_issuer_unavailable"),
            GatewayError::ActAsRefused { code, .. } => ("permission_error", code),
            GatewayError::NotFound(_) => ("invalid_request_error", "not_found"),
            GatewayError::ModelNotFound(_) => ("invalid_request_error", "model_not_found"),
            GatewayError::TooLarge(_) => ("invalid_request_error", "request_too_large"),
            GatewayError::NotReady => ("server_error", "not_ready"),
            GatewayError::Overloaded(_) => ("server_error", "overloaded"),
            GatewayError::PolicyStale(_) => ("server_error", "policy_stale"),
            GatewayError::Upstream(_) => ("upstream_error", "upstream_failed"),
            GatewayError::UpstreamTimeout(_) => ("upstream_error", "upstream_timeout"),
            GatewayError::UpstreamRefused(r) if r.status == 429 => {
                ("rate_limit_error", "upstream_rate_limited")
            }
            GatewayError::UpstreamRefused(_) => ("invalid_request_error", "upstream_refused"),
            GatewayError::QuotaExceeded { .. } => ("insufficient_quota", "quota_exceeded"),
            GatewayError::Unpriced(_) => ("permission_error", "unpriced_model"),
            GatewayError::CloudIdentityUnavailable(_) => {
                ("permission_error", "cloud_identity_unavailable")
            }
            GatewayError::QuotaUnavailable(_) => ("server_error", "quota_unavailable"),
            GatewayError::Filtered(f) => ("permission_error", f.code()),
            GatewayError::Internal(_) => ("server_error", "internal_error"),
        }
    }
}

impl GatewayError {
    /// What a refusal says beyond its message: the policy that decided it, the link to
    /// provide a credential, or the quota.
    pub fn details(&self, into: &mut Value) {
        if let GatewayError::Denied(d) = self {
            into["reason"] = json!(d.reason);
            into["reason_code"] = json!(d.reason_code);
            into["determining_policy"] = json!(d.determining_policy);
        }
        if let GatewayError::CredentialRequired(m) = self {
            into["connection_name"] = json!(m.connection_name);
            into["provision_url"] = json!(m.provision_url);
            into["expires_at"] = json!(m.expires_at);
        }
        if let GatewayError::QuotaExceeded {
            quota_id,
            resets_at,
            ..
        } = self
        {
            into["quota_id"] = json!(quota_id);
            into["resets_at"] = json!(resets_at);
        }
    }

    /// The `data` of a JSON-RPC refusal: why, its code, the request and the refusal's
    /// details.
    pub fn refusal_data(&self, request_id: &str) -> Value {
        let (_, code) = self.openai_type_and_code();
        let mut data =
            json!({"reason": self.to_string(), "reason_code": code, "request_id": request_id});
        self.details(&mut data);
        data
    }
}

/// What a person has not provided yet, and where to provide it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    pub connection_name: String,
    pub provision_url: String,
    pub expires_at: String,
}

/// A `block` guard matched: the call fails (or its stream ends) with this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filtered {
    pub stage: GuardStage,
    /// The guard's name.
    pub guard: String,
    /// What it found (`card_number`, `secret`, `keyword`, …).
    pub label: &'static str,
}

impl Filtered {
    /// The reason code callers see: `output_filtered` or `input_filtered`.
    pub fn code(&self) -> &'static str {
        match self.stage {
            GuardStage::LlmOutput | GuardStage::ToolResult => "output_filtered",
            GuardStage::LlmInput | GuardStage::ToolArguments => "input_filtered",
        }
    }
}

impl std::fmt::Display for Filtered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.stage {
            GuardStage::LlmOutput => "the model's answer",
            GuardStage::LlmInput => "the request to the model",
            GuardStage::ToolResult => "the tool's result",
            GuardStage::ToolArguments => "the tool call's arguments",
        };
        write!(
            f,
            "guard '{}' blocked {what}: it found {}",
            self.guard,
            self.label.replace('_', " ")
        )
    }
}

/// The strings to scrub from upstream replies: each secret value and, for `Bearer x` style
/// values, the token alone.
pub fn scrub_list<'a>(values: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut out = Vec::new();
    for v in values {
        out.push(v.clone());
        if let Some((_, token)) = v.rsplit_once(' ') {
            out.push(token.to_string());
        }
    }
    out.retain(|v| v.len() >= 8);
    out
}
