//! Why a gateway request failed. [`crate::respond`] is the one place that turns these into
//! responses in the caller's API shape.

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
    #[error("{0}")]
    NotFound(String),
    #[error("model '{0}' is not available on this gateway")]
    ModelNotFound(String),
    #[error("request body is larger than {0} bytes")]
    TooLarge(usize),
    #[error("the gateway has no configuration yet; retry shortly")]
    NotReady,
    #[error("{0}")]
    Unsupported(String),
    #[error("upstream failed: {0}")]
    Upstream(String),
    #[error("upstream timed out: {0}")]
    UpstreamTimeout(String),
    #[error("{message}")]
    QuotaExceeded {
        message: String,
        quota_id: String,
        resets_at: String,
    },
    /// A quota applies but the model has no price: it would be charged zero.
    #[error("{0}")]
    Unpriced(String),
    /// A quota applies but the spend counters are not loaded yet.
    #[error("{0}")]
    QuotaUnavailable(String),
    #[error("{0}")]
    Internal(String),
}

impl GatewayError {
    pub fn status(&self) -> u16 {
        match self {
            GatewayError::BadRequest(_)
            | GatewayError::Unsupported(_)
            | GatewayError::TooLarge(_) => 400,
            GatewayError::Unauthenticated(_) => 401,
            GatewayError::Forbidden(_) | GatewayError::Denied(_) | GatewayError::Unpriced(_) => 403,
            GatewayError::QuotaExceeded { .. } => 429,
            GatewayError::NotFound(_) | GatewayError::ModelNotFound(_) => 404,
            GatewayError::Upstream(_) => 502,
            GatewayError::NotReady | GatewayError::QuotaUnavailable(_) => 503,
            GatewayError::UpstreamTimeout(_) => 504,
            GatewayError::Internal(_) => 500,
        }
    }

    /// OpenAI's error `type` and `code`.
    pub fn openai_type_and_code(&self) -> (&'static str, &'static str) {
        match self {
            GatewayError::BadRequest(_) => ("invalid_request_error", "invalid_request"),
            GatewayError::Unsupported(_) => ("invalid_request_error", "unsupported"),
            GatewayError::Unauthenticated(_) => ("authentication_error", "invalid_api_key"),
            GatewayError::Forbidden(_) => ("permission_error", "forbidden"),
            GatewayError::Denied(_) => ("permission_error", "policy_denied"),
            GatewayError::NotFound(_) => ("invalid_request_error", "not_found"),
            GatewayError::ModelNotFound(_) => ("invalid_request_error", "model_not_found"),
            GatewayError::TooLarge(_) => ("invalid_request_error", "request_too_large"),
            GatewayError::NotReady => ("server_error", "not_ready"),
            GatewayError::Upstream(_) => ("upstream_error", "upstream_failed"),
            GatewayError::UpstreamTimeout(_) => ("upstream_error", "upstream_timeout"),
            GatewayError::QuotaExceeded { .. } => ("insufficient_quota", "quota_exceeded"),
            GatewayError::Unpriced(_) => ("permission_error", "unpriced_model"),
            GatewayError::QuotaUnavailable(_) => ("server_error", "quota_unavailable"),
            GatewayError::Internal(_) => ("server_error", "internal_error"),
        }
    }
}
