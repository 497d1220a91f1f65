//! The audit event catalog: one payload type per event type, each naming its type string
//! ([`AuditPayload::EVENT_TYPE`], also [`types`]), and [`ALL_TYPES`]. A payload serializes to
//! exactly the fields its event carries: an optional field is left out when it is `None` unless
//! its doc says it is written as `null`.
//!
//! Emitters build the payload and let it name the event: [`AuditEvent::typed`] (serialized as
//! it is written) or [`with_payload`] (as a JSON value).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{AuditEvent, AuditEventV1};
use crate::api::guards::{GuardAction, GuardKind, GuardStage};
use crate::snapshot::Charge;

/// A payload of the catalog: the fields of one event type.
pub trait AuditPayload: Serialize {
    /// The event type (the envelope's `type`) this payload is carried by.
    const EVENT_TYPE: &'static str;
}

/// Declares each event type once: its constant in [`types`], the payload type that carries
/// it, and its place in [`ALL_TYPES`].
macro_rules! catalog {
    ($($name:ident = $text:literal => $payload:ident,)*) => {
        /// Each event type's string (the envelope's `type`), one per payload type.
        pub mod types {
            $(
                #[doc = concat!("`", $text, "`: see [`", stringify!($payload), "`](super::",
                    stringify!($payload), ").")]
                pub const $name: &str = $text;
            )*
        }

        $(impl AuditPayload for $payload {
            const EVENT_TYPE: &'static str = types::$name;
        })*

        /// Every event type of the catalog.
        pub const ALL_TYPES: &[&str] = &[$(types::$name),*];
    };
}

catalog! {
    MODEL_CALL = "model.call" => ModelCall,
    TOOL_CALL = "tool.call" => ToolCall,
    TOOL_LIST = "tool.list" => ToolList,
    MCP_REQUEST = "mcp.request" => McpRequest,
    ACCESS_DENIED = "access.denied" => AccessDenied,
    AUDIT_DROPPED = "audit.dropped" => AuditDropped,
    AUDIT_UNREADABLE = "audit.unreadable" => AuditUnreadable,
    MGMT_OPERATION = "mgmt.operation" => MgmtOperation,
    QUOTA_THRESHOLD = "quota.threshold" => QuotaThreshold,
    QUOTA_EXCEEDED = "quota.exceeded" => QuotaExceeded,
    LLM_OUTPUT_FILTERED = "llm.output.filtered" => LlmOutputFiltered,
    LLM_INPUT_FILTERED = "llm.input.filtered" => LlmInputFiltered,
    TOOL_RESULT_FILTERED = "mcp.tool_result.filtered" => ToolResultFiltered,
    TOOL_ARGUMENTS_FILTERED = "mcp.tool_arguments.filtered" => ToolArgumentsFiltered,
    AGENT_SUSPENDED = "agent.suspended" => AgentSuspended,
    RULE_BUNDLE_DEPLOYED = "authorization.rule_bundle.deployed" => RuleBundleDeployed,
    CREDENTIAL_PROVISIONED = "credential.provisioned" => CredentialProvisioned,
    CREDENTIAL_PROVISION_REFUSED = "credential.provision_refused" => CredentialProvisionRefused,
    OAUTH_CONNECTED = "oauth.connected" => OauthConnected,
    OAUTH_DISCONNECTED = "oauth.disconnected" => OauthDisconnected,
    OAUTH_REFRESH_FAILED = "oauth.refresh_failed" => OauthRefreshFailed,
    INTERACTIVE_GRANTED = "agent.interactive_grant.issued" => InteractiveGranted,
    INTERACTIVE_REFUSED = "agent.interactive_grant.refused" => InteractiveRefused,
}

impl<P> AuditEvent<P> {
    /// The same envelope as the event of `payload`: `Q`'s type, and `payload` serialized as
    /// it is written (no JSON tree built).
    pub fn typed<Q: AuditPayload>(self, payload: Q) -> AuditEvent<Q> {
        let mut event = self.with_payload(payload);
        event.event_type = Q::EVENT_TYPE.to_string();
        event
    }
}

impl<P: AuditPayload> AuditEvent<P> {
    /// The event with its payload as a JSON value.
    pub fn into_v1(self) -> AuditEventV1 {
        let payload = to_value(&self.payload);
        self.with_payload(payload)
    }
}

/// `envelope` as the event of `payload`: `P`'s type, and `payload` as a JSON value.
pub fn with_payload<P: AuditPayload>(mut envelope: AuditEventV1, payload: &P) -> AuditEventV1 {
    envelope.event_type = P::EVENT_TYPE.to_string();
    envelope.payload = to_value(payload);
    envelope
}

/// A catalog payload as JSON. Payloads are structs of strings, numbers and lists, which
/// always serialize; `null` stands in should one ever not.
fn to_value<P: Serialize>(payload: &P) -> Value {
    serde_json::to_value(payload).unwrap_or(Value::Null)
}

/// A JSON-RPC error as an event records it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpcFailure {
    pub code: i64,
    /// The error's message, cut to 500 characters.
    pub message: String,
}

/// What one guard did to one call at one stage (never the matched text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuardRecord {
    pub guard_id: String,
    /// The guard's name.
    pub guard: String,
    pub stage: GuardStage,
    pub kind: GuardKind,
    pub action: GuardAction,
    /// How many matches (or, for `json_schema`, parts that did not conform).
    pub matches: u32,
}

/// Usage as recorded, whatever the provider: prompt tokens include those read from and
/// written to the provider's cache.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageRecord {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `model.call`: a model call ended — answered, failed, or cut off by the gateway stopping
/// (a policy denial is an `access.denied` instead).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelCall {
    /// The name the request sent as `model`.
    pub model: String,
    /// The API the caller spoke (`openai.chat_completions`, …).
    pub api: String,
    pub gateway_id: String,
    pub stream: bool,
    /// The status answered (0: nothing was written).
    pub status: u16,
    pub latency_ms: f64,
    /// Upstream calls made (members tried and retries).
    pub attempts: u32,
    /// The status the last upstream called answered with, when one answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_status: Option<u16>,
    /// The model connection that served the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_model: Option<String>,
    /// Whether the call was translated to the provider's API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub translated: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageRecord>,
    /// Metered usage at the serving model's price, in integer micro-USD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_micros: Option<u64>,
    /// `override`, `table <version>: <key>` or `unpriced`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_source: Option<String>,
    /// What the quotas that applied were charged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub charges: Vec<Charge>,
    /// One entry per guard that matched, per stage.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guards: Vec<GuardRecord>,
    /// What of the answer the caller received, when output guards applied: `as_answered`,
    /// `redacted`, `partial` or `nothing`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason_code: Option<String>,
}

/// `tool.call`: an allowed tool call ended, whatever its upstream made of it (arguments and
/// results are never recorded).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The tool as called: `connection/tool`.
    pub tool: String,
    pub connection_id: String,
    pub gateway_id: String,
    pub latency_ms: f64,
    /// Whether the tool's answer was an error (`isError`), when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// The JSON-RPC error the call failed with, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcFailure>,
    /// One entry per guard that matched, per stage.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guards: Vec<GuardRecord>,
    /// What of the result the caller received, when result guards applied: `as_answered`,
    /// `redacted` or `nothing`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered: Option<String>,
}

/// `tool.list`: an agent listed a gateway's tools.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolList {
    pub gateway_id: String,
    /// How many tools were listed.
    pub tools: u64,
    /// The connections whose tools could not be listed (written even when empty).
    #[serde(default)]
    pub failed_connections: Vec<String>,
    pub latency_ms: f64,
}

/// `mcp.request`: an MCP request failed outside a tool call or list (not JSON, not JSON-RPC,
/// an unknown method, bad parameters); never its parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpRequest {
    /// The JSON-RPC method, cut to 100 characters.
    pub method: String,
    pub gateway_id: String,
    pub error: RpcFailure,
    /// `parse_error`, `invalid_request`, `method_not_found`, `invalid_params` or
    /// `internal_error`.
    pub reason_code: String,
}

/// `access.denied`: a gateway refused a call — a rule, a missing or bad key, a suspended
/// agent, a disabled gateway, an act-as failure.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessDenied {
    /// The action a rule refused (`llm:invoke`, `mcp:call`, `gateway:access`); absent when
    /// the caller was refused before its agent was known or allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    pub reason: String,
    pub reason_code: String,
    /// The forbid that matched, or `default-deny`, when a rule refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub determining_policy: Option<String>,
    pub gateway_id: String,
    /// The HTTP status answered, for a caller refused before its agent was known or allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Refusals of unidentified callers left unrecorded (over the rate) since the last one
    /// that was, when there were any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unrecorded_before: Option<u64>,
}

/// `audit.dropped`: a gateway dropped events (its spool or queue was full, or the control
/// plane refused one, which it then names).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditDropped {
    /// How many events were dropped.
    pub dropped: u64,
    pub reason: String,
    /// The refused event's id, when one was refused (cut to the caller-string bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    /// The refused event's type, when one was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    /// Why the control plane refused it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// The refused event's size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
}

/// `audit.unreadable`: what a query shows in place of a stored event that cannot be read
/// (never stored itself).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditUnreadable {
    /// Why it cannot be read.
    pub error: String,
}

/// `mgmt.operation`: a platform key made a change, or an agent ran its own operation
/// (exchanging its key), through the management API.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MgmtOperation {
    /// The RPC method (`CreateAgent`, …).
    pub operation: String,
    /// The outcome's code: `ok`, `permission_denied`, `invalid_argument`, ….
    pub code: String,
    /// The door the call came through: `connect`, `rest` or `mcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub surface: Option<String>,
    /// The management MCP tool, for a call through the MCP door.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

/// `quota.threshold`: a settled call took a quota past 80 % or 100 % of its limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaThreshold {
    pub quota_id: String,
    /// The threshold crossed: 80 or 100.
    pub percent: u64,
    pub spent_micros: u64,
    pub limit_micros: u64,
    /// `day`, `week` or `month`.
    pub window: String,
    /// The caller the quota counts for (empty: the quota is shared).
    pub caller: String,
    /// When the window resets (RFC 3339).
    pub resets_at: String,
}

/// `quota.exceeded`: a call or pool member was refused for want of room in a quota.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaExceeded {
    pub quota_id: String,
    pub reason: String,
    /// Always `quota_exceeded`.
    pub reason_code: String,
    /// When the window resets (RFC 3339).
    pub resets_at: String,
}

/// `llm.output.filtered`: a guard matched a model's answer (one event per guard and call).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmOutputFiltered {
    #[serde(flatten)]
    pub guard: GuardRecord,
    pub gateway_id: String,
}

/// `llm.input.filtered`: a guard matched what was sent to a model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmInputFiltered {
    #[serde(flatten)]
    pub guard: GuardRecord,
    pub gateway_id: String,
}

/// `mcp.tool_result.filtered`: a guard matched a tool's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResultFiltered {
    #[serde(flatten)]
    pub guard: GuardRecord,
    pub gateway_id: String,
}

/// `mcp.tool_arguments.filtered`: a guard matched a tool call's arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolArgumentsFiltered {
    #[serde(flatten)]
    pub guard: GuardRecord,
    pub gateway_id: String,
}

/// `agent.suspended`: an agent was suspended (one event per agent, cascades included).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentSuspended {
    pub agent_id: String,
    pub agent_name: String,
    /// Whether it was suspended with its parent.
    pub cascade: bool,
    /// The agent the suspension was asked for.
    pub suspended_by: String,
    /// The reason given; written as `null` when none was.
    pub reason: Option<String>,
}

/// `authorization.rule_bundle.deployed`: `DeployRuleBundle` deployed a bundle.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleBundleDeployed {
    pub bundle_id: String,
    pub bundle_name: String,
    /// `workspace`, `gateway` or `agent`.
    pub scope: String,
    pub scope_id: String,
    /// How many policies it holds.
    pub policies: u64,
    /// Whether a bundle of that name was replaced.
    pub replaced: bool,
}

/// Whose credential or grant of which connection an event is about.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionGrant {
    pub connection_id: String,
    pub connection_name: String,
    /// The person's `sub`; empty for the connection's shared grant.
    pub subject: String,
}

/// `credential.provisioned`: a person stored their own credential for a per-user connection,
/// through a provision link or OAuth consent (never the value).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialProvisioned {
    #[serde(flatten)]
    pub grant: ConnectionGrant,
    /// `oauth` when it was an OAuth consent; absent for a provision link's form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
}

/// `credential.provision_refused`: someone other than its person signed in to use a
/// provision link; nothing was stored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialProvisionRefused {
    pub connection_id: String,
    /// The person the link was made for.
    pub subject: String,
    /// The agent that asked for the credential.
    pub agent_id: String,
    pub signed_in_subject: String,
    pub signed_in_email: String,
}

/// `oauth.connected`: an administrator's consent stored a connection's shared OAuth grant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OauthConnected {
    #[serde(flatten)]
    pub grant: ConnectionGrant,
    /// Always `oauth`.
    pub method: String,
}

/// `oauth.disconnected`: a connection's OAuth grants were revoked and deleted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OauthDisconnected {
    #[serde(flatten)]
    pub grant: ConnectionGrant,
    /// How many grants there were.
    pub grants: u64,
}

/// `oauth.refresh_failed`: the provider refused to refresh a grant, so it was deleted (never
/// the token).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OauthRefreshFailed {
    #[serde(flatten)]
    pub grant: ConnectionGrant,
    /// What the provider answered.
    pub reason: String,
}

/// Who signed in from which MCP client to use which agent interactively.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InteractiveSignIn {
    pub agent_id: String,
    pub gateway_id: String,
    pub client_id: String,
    pub subject: String,
    pub email: String,
}

/// `agent.interactive_grant.issued`: a person signed in from an MCP client and was granted
/// interactive use of an agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InteractiveGranted {
    pub grant_id: String,
    #[serde(flatten)]
    pub sign_in: InteractiveSignIn,
}

/// `agent.interactive_grant.refused`: a person signed in from an MCP client and the agent
/// does not admit them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InteractiveRefused {
    /// No grant was made: `None`, written as `null` (as the issued event's field).
    pub grant_id: Option<String>,
    #[serde(flatten)]
    pub sign_in: InteractiveSignIn,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_type_is_named_once() {
        let mut names = ALL_TYPES.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL_TYPES.len());
        assert_eq!(ModelCall::EVENT_TYPE, types::MODEL_CALL);
        assert_eq!(types::TOOL_RESULT_FILTERED, "mcp.tool_result.filtered");
    }

    #[test]
    fn optional_fields_are_left_out_or_written_as_null_as_documented() {
        let denied = AccessDenied {
            reason: "no".into(),
            reason_code: "unauthenticated".into(),
            gateway_id: "g1".into(),
            status: Some(401),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&denied).unwrap(),
            json!({"reason": "no", "reason_code": "unauthenticated", "gateway_id": "g1",
                   "status": 401})
        );
        let suspended = AgentSuspended::default();
        assert_eq!(
            serde_json::to_value(&suspended).unwrap()["reason"],
            Value::Null
        );
        let refused = serde_json::to_value(InteractiveRefused::default()).unwrap();
        assert_eq!(refused.get("grant_id"), Some(&Value::Null));
        let listed = serde_json::to_value(ToolList::default()).unwrap();
        assert_eq!(listed["failed_connections"], json!([]));
    }

    #[test]
    fn a_typed_event_names_its_type() {
        let envelope = AuditEventV1::default();
        let payload = AuditUnreadable {
            error: "bad".into(),
        };
        let typed = envelope.clone().typed(payload.clone());
        assert_eq!(typed.event_type, "audit.unreadable");
        let v1 = with_payload(envelope, &payload);
        assert_eq!(v1, typed.into_v1());
        assert_eq!(v1.payload, json!({"error": "bad"}));
    }
}
