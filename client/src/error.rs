//! Client errors. Every class the spec names derives from [`ClientError`]; the admin error
//! carries the operation path, the HTTP status and the server's body; a gateway's refusal is
//! a [`GatewayError`] whose [`GatewayErrorKind`] says which class it is.

use portcullis_wire::ConnectError;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The client was configured with something unusable (a bad URL, an empty key).
    #[error("configuration error: {0}")]
    Configuration(String),
    /// The gateway URL is not one a gateway serves: missing, bare, ending in a protocol
    /// path (`/mcp`, `/v1`), not scoped to a gateway, or naming another gateway than the one
    /// selected.
    #[error("gateway configuration error: {gateway_url:?}: {message}")]
    GatewayConfiguration {
        gateway_url: String,
        message: String,
    },
    /// The gateway refused or could not complete the call.
    #[error(transparent)]
    Gateway(Box<GatewayError>),
    /// The control plane answered with an error.
    #[error("{path}: {status_code} {}", .error.as_ref().map_or_else(|| .body.clone(), |e| e.to_string()))]
    Admin {
        path: String,
        status_code: u16,
        /// The Connect error, when the body was one.
        error: Option<ConnectError>,
        /// The raw body.
        body: String,
    },
    /// The request did not complete (connection refused, timeout, TLS).
    #[error("could not reach {url}: {source}")]
    Transport {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// An argument cannot be used as given (an act-as identity without `sub`, a malformed
    /// token).
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// A wait ran out (e.g. no audit event matched in time).
    #[error("timed out: {0}")]
    Timeout(String),
    /// An [`crate::AgentRuntime`] was used before `start`.
    #[error("not initialized: start the agent runtime first")]
    NotInitialized,
    /// An [`crate::AgentRuntime`] was started twice.
    #[error("already started")]
    AlreadyStarted,
    /// An [`crate::AgentRuntime`] was used after `shutdown`.
    #[error("shut down: this agent runtime was stopped")]
    Shutdown,
    /// An [`crate::AgentRuntime`] was asked about its policy before a snapshot of it was
    /// loaded, or after the last one grew too old to trust (its gateway could not be asked
    /// for three sync intervals).
    #[error(
        "no policy bundle loaded: the runtime has no current snapshot of what this agent may use"
    )]
    NoBundleLoaded,
    /// The [`crate::AgentRuntime`]'s policy snapshot does not let this agent use `resource`
    /// (checked locally; nothing was sent).
    #[error("denied: {resource}: {reason}")]
    Denied { resource: String, reason: String },
    /// A provider's API was called in a build of the SDK without that provider's feature,
    /// named as the provider (`openai`, `anthropic`; both on by default).
    #[error("missing provider dependency: calling {provider} models needs the SDK's `{provider}` feature")]
    MissingProviderDependency { provider: &'static str },
    /// The reply was not the JSON the operation promises.
    #[error("{path}: unexpected reply: {message}")]
    Decode { path: String, message: String },
}

impl ClientError {
    /// The Connect code, for errors the server reported.
    pub fn code(&self) -> Option<portcullis_wire::Code> {
        match self {
            ClientError::Admin { error: Some(e), .. } => Some(e.code),
            _ => None,
        }
    }

    /// The HTTP status, for errors the server reported.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            ClientError::Admin { status_code, .. } => Some(*status_code),
            ClientError::Gateway(g) => Some(g.status_code),
            _ => None,
        }
    }

    /// The gateway's refusal, when this is one.
    pub fn gateway(&self) -> Option<&GatewayError> {
        match self {
            ClientError::Gateway(g) => Some(g),
            _ => None,
        }
    }
}

/// A gateway's refusal or failure, with what identifies the call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{} ({status_code}): {message}", kind.class())]
pub struct GatewayError {
    pub kind: GatewayErrorKind,
    pub message: String,
    /// The HTTP status (200 for an in-band JSON-RPC error or a tool's own error).
    pub status_code: u16,
    pub request_id: Option<String>,
    pub activity_id: Option<String>,
    pub gateway_id: Option<String>,
}

/// The spec's gateway error classes.
#[derive(Debug, Clone, PartialEq)]
pub enum GatewayErrorKind {
    /// Any other failure of the gateway or its upstream.
    Gateway { reason_code: Option<String> },
    /// The gateway could not be reached, or its upstream failed or timed out.
    Unavailable,
    /// The gateway is starting and has no configuration yet; retry shortly.
    NotReady,
    /// The gateway has not reached its control plane for longer than it is allowed to serve
    /// its rules without: retry once the control plane is back.
    PolicyStale,
    /// The key or token was refused, or the agent may not use this gateway.
    AuthorizationDenied { reason_code: Option<String> },
    /// A rule, a blocked catalog entry or a guard refused the call.
    Denied {
        reason: String,
        reason_code: String,
        determining_policy: Option<String>,
    },
    /// The end user has no credential for a per-user connection yet: send them to
    /// `provision_url` (short-lived) and retry.
    CredentialRequired {
        connection_name: String,
        provision_url: String,
        expires_at: String,
    },
    /// The tool is not offered to this agent (or does not exist).
    ToolNotFound { tool: String },
    /// The tool ran and reported an error (`isError`): its content says what.
    ToolExecution {
        tool: String,
        content: Vec<serde_json::Value>,
        structured_content: Option<serde_json::Value>,
    },
    /// The agent must act for a verified end user and sent no (or a refused) identity.
    ActAsRequired { reason_code: String },
    /// A spend quota is used up, or the upstream limited the rate.
    RateLimited {
        retry_after_secs: Option<u64>,
        quota_id: Option<String>,
        resets_at: Option<String>,
    },
    /// No model or pool of that name is offered to this agent.
    ModelNotFound { model: String },
}

impl GatewayErrorKind {
    /// The class name, as the spec words it.
    pub fn class(&self) -> &'static str {
        match self {
            GatewayErrorKind::Gateway { .. } => "gateway error",
            GatewayErrorKind::Unavailable => "gateway unavailable",
            GatewayErrorKind::NotReady => "gateway not ready",
            GatewayErrorKind::PolicyStale => "policy stale",
            GatewayErrorKind::AuthorizationDenied { .. } => "authorization denied",
            GatewayErrorKind::Denied { .. } => "denied",
            GatewayErrorKind::CredentialRequired { .. } => "credential required",
            GatewayErrorKind::ToolNotFound { .. } => "tool not found",
            GatewayErrorKind::ToolExecution { .. } => "tool execution error",
            GatewayErrorKind::ActAsRequired { .. } => "act-as required",
            GatewayErrorKind::RateLimited { .. } => "rate limited",
            GatewayErrorKind::ModelNotFound { .. } => "model not found",
        }
    }
}
