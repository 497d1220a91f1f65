//! What a gateway request carries through its steps once it is authenticated.

use std::sync::Arc;

use cedar_policy::EntityUid;
use portcullis_shared::api::gateways::GatewayState;
use portcullis_shared::audit;

use crate::authn::AgentEntry;
use crate::authz::{LazyContext, Scope};
use crate::guard::scope::GatewayGuards;
use crate::spend::QuotaEntry;

/// A UUIDv4 from the thread's seeded generator, for request and event ids: no system call
/// per id, where `Uuid::new_v4` asks the OS each time.
pub fn random_uuid() -> String {
    use rand::Rng;
    let bytes: [u8; 16] = rand::thread_rng().gen();
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string()
}

/// The gateway a request came through, as audit and Cedar name it.
pub struct GatewayIdentity {
    pub id: String,
    pub name: String,
    pub state: GatewayState,
    pub uid: EntityUid,
    /// This gateway's `gateway:access` decision slot (llm surface).
    pub slot: usize,
    /// This gateway's `gateway:access` decision slot on the MCP surface.
    pub mcp_slot: usize,
}

/// An authenticated request: who calls, through which gateway, at which revision, and the
/// tables of the steps every surface shares (rules, guards, quotas). Each surface's own table
/// (models, tools) is handed to its step beside this.
pub struct RequestCtx<'a> {
    pub request_id: &'a str,
    pub workspace_id: &'a str,
    pub revision: u64,
    pub agent: &'a AgentEntry,
    pub gateway: &'a GatewayIdentity,
    /// The rules this agent is held to on this gateway.
    pub rules: Scope<'a>,
    /// The guards that apply to this gateway's models and tools.
    pub guards: &'a GatewayGuards,
    /// The workspace's enabled quotas.
    pub quotas: &'a [Arc<QuotaEntry>],
    pub context: LazyContext,
    /// Whether tool decisions may be memoized (no act-as identity on this request).
    pub memoize: bool,
    /// Surface, route, client and correlation ids, for audit (the activity id is echoed back).
    pub origin: Origin,
    /// The verified `X-Svc-Act-As` assertion as sent, for tools that forward it.
    pub act_as_raw: Option<String>,
}

impl<'a> RequestCtx<'a> {
    /// Headers every response of this request carries: the member that served and the
    /// caller's activity id.
    pub fn echo_headers<'b>(&'b self, model: &'b str) -> Vec<(&'static str, &'b str)> {
        let mut out = Vec::with_capacity(2);
        if !model.is_empty() {
            out.push(("x-portcullis-model", model));
        }
        if let Some(a) = &self.origin.activity_id {
            out.push(("x-svc-activity-id", a.as_str()));
        }
        out
    }
}

/// Where a request came from and how it is correlated, read once from its headers.
#[derive(Debug, Clone, Default)]
pub struct Origin {
    /// `mcp` or `llm`.
    pub surface: &'static str,
    /// The route's template, e.g. `/gateways/{gateway_id}/v1/chat/completions`.
    pub http_route: &'static str,
    /// The caller's client family from `User-Agent` (e.g. `openai-python`), at most 40 chars.
    pub user_agent_class: String,
    /// From a W3C `traceparent` header.
    pub trace_id: Option<String>,
    /// `X-Svc-Activity-Id` as the caller sent it.
    pub activity_id: Option<String>,
    /// `Idempotency-Key` as the caller sent it.
    pub idempotency_key: Option<String>,
}

impl Origin {
    pub fn surface(&self) -> audit::RequestSurface {
        audit::RequestSurface {
            surface: if self.surface == "mcp" {
                audit::surfaces::GATEWAY_MCP
            } else {
                audit::surfaces::GATEWAY_LLM
            }
            .into(),
            http_route: self.http_route.into(),
            user_agent_class: self.user_agent_class.clone(),
            ..Default::default()
        }
    }

    pub fn correlation(&self, request_id: &str) -> audit::Correlation {
        audit::Correlation {
            request_id: request_id.to_string(),
            trace_id: self.trace_id.clone().unwrap_or_default(),
            activity_id: self.activity_id.clone().unwrap_or_default(),
            activity_trust: if self.activity_id.is_some() {
                "ACTIVITY_TRUST_CALLER_ASSERTED".into()
            } else {
                String::new()
            },
            idempotency_key: self.idempotency_key.clone().unwrap_or_default(),
            ..Default::default()
        }
    }
}

/// The client family: the first product token of `User-Agent`, lowercased, with a `/version`
/// dropped (`OpenAI/Python 1.2` → `openai`, `python-httpx/0.27` → `python-httpx`).
pub fn user_agent_class(ua: Option<&str>) -> String {
    let Some(ua) = ua else {
        return String::new();
    };
    let token = ua.split_whitespace().next().unwrap_or_default();
    let name = token.split('/').next().unwrap_or_default();
    name.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(40)
        .collect::<String>()
        .to_ascii_lowercase()
}

/// The trace id of a W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`).
pub fn trace_id(traceparent: Option<&str>) -> Option<String> {
    let mut parts = traceparent?.trim().split('-');
    let (_version, trace) = (parts.next()?, parts.next()?);
    (trace.len() == 32 && trace.bytes().all(|b| b.is_ascii_hexdigit()) && trace != "0".repeat(32))
        .then(|| trace.to_ascii_lowercase())
}
