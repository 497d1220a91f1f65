//! `AuditEventV1`: the envelope every audited decision is recorded in, and the audit service's
//! wire types. Enumerations use their proto JSON names (`RESULT_ALLOWED`, …). Each event
//! type and its payload are in the [`catalog`].

pub mod bound;
pub mod catalog;

pub use catalog::{types, with_payload, AuditPayload, ALL_TYPES};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::WorkspaceScoped;

pub mod results {
    pub const ALLOWED: &str = "RESULT_ALLOWED";
    pub const DENIED: &str = "RESULT_DENIED";
    pub const ERROR: &str = "RESULT_ERROR";
}

pub mod surfaces {
    pub const GATEWAY_LLM: &str = "INITIATOR_SURFACE_GATEWAY_LLM";
    pub const GATEWAY_MCP: &str = "INITIATOR_SURFACE_GATEWAY_MCP";
    pub const MANAGEMENT_API: &str = "INITIATOR_SURFACE_MANAGEMENT_API";
    pub const GATEWAY_INTERNAL: &str = "INITIATOR_SURFACE_GATEWAY_INTERNAL";
}

pub mod actors {
    pub const AGENT: &str = "ACTOR_KIND_AGENT";
    pub const USER: &str = "ACTOR_KIND_USER";
    pub const PLATFORM_KEY: &str = "ACTOR_KIND_PLATFORM_KEY";
    pub const SYSTEM: &str = "ACTOR_KIND_SYSTEM";
    /// A caller whose credential did not identify it.
    pub const UNKNOWN: &str = "ACTOR_KIND_UNSPECIFIED";
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    pub kind: String,
    #[serde(
        default,
        alias = "organization_id",
        skip_serializing_if = "String::is_empty"
    )]
    pub org_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant_id: String,
    pub workspace_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub agent_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    pub kind: String,
    pub id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub email: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceRef {
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub workspace_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Producer {
    pub service: String,
    pub instance_id: String,
    pub version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub region: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestSurface {
    pub surface: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rpc_service: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rpc_method: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub http_route: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user_agent_class: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Correlation {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub trace_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub request_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub operation_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub parent_event_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub idempotency_key: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub activity_id: String,
    /// `ACTIVITY_TRUST_CALLER_ASSERTED` when the caller sent the id; empty when none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub activity_trust: String,
}

/// What happened to content that could have been recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataHandling {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub omitted: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub summarized: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub truncated: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hashed: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub encrypted: Vec<String>,
    #[serde(default)]
    pub content_ref_used: bool,
}

/// A new event id: a UUID of version 7 (RFC 9562), whose first 48 bits are the Unix time in
/// milliseconds and the rest random. Ids made one after another sort together, so storing
/// events appends to the id index instead of touching a random page of it for every event —
/// which, with random ids, grows costlier as the audit table grows.
pub fn new_event_id() -> String {
    event_id_at(crate::unix_millis(), &rand::random())
}

fn event_id_at(millis: u64, random: &[u8; 10]) -> String {
    uuid::Builder::from_unix_timestamp_millis(millis, random)
        .into_uuid()
        .to_string()
}

/// An audit event whose payload is `P`. Everything outside the control plane's ingest uses
/// [`AuditEventV1`]; ingest reads the payload as text (`Box<RawValue>`) so that storing an event
/// never builds and serializes again what it only passes through.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditEvent<P = Value> {
    pub event_id: String,
    #[serde(rename = "type")]
    pub event_type: String,
    /// RFC 3339, millisecond precision, UTC.
    pub time: String,
    pub result: String,
    pub scope: Scope,
    pub actor: Actor,
    /// The verified person an agent acted for, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_behalf_of: Option<Actor>,
    pub resource: ResourceRef,
    pub producer: Producer,
    pub request: RequestSurface,
    pub correlation: Correlation,
    pub data_handling: DataHandling,
    pub payload: P,
}

/// The audit envelope with its payload as a JSON value.
pub type AuditEventV1 = AuditEvent<Value>;

impl<P> AuditEvent<P> {
    /// The same event with `payload` (a typed one, say, serialized as it is written).
    pub fn with_payload<Q>(self, payload: Q) -> AuditEvent<Q> {
        AuditEvent {
            event_id: self.event_id,
            event_type: self.event_type,
            time: self.time,
            result: self.result,
            scope: self.scope,
            actor: self.actor,
            on_behalf_of: self.on_behalf_of,
            resource: self.resource,
            producer: self.producer,
            request: self.request,
            correlation: self.correlation,
            data_handling: self.data_handling,
            payload,
        }
    }
}

/// Gateways ship spooled events in batches; re-sending is harmless.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IngestAuditRequest<E = AuditEventV1> {
    #[serde(default)]
    pub workspace_id: Option<String>,
    pub events: Vec<E>,
}

impl<E> WorkspaceScoped for IngestAuditRequest<E> {
    fn workspace_id(&self) -> Option<&str> {
        self.workspace_id.as_deref()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngestAuditResponse {
    /// Events stored now (duplicates of stored events are not counted).
    pub stored: u64,
}

/// A `payload_filters` entry: the payload field (dotted path) must equal one of `values`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PayloadFilter {
    pub field: String,
    pub values: Vec<String>,
}

/// The filters of a query. `StreamEvents` refuses the query-only ones.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryEventsRequest {
    #[serde(default)]
    pub workspace_id: Option<String>,
    #[serde(default)]
    pub start_time: Option<String>,
    #[serde(default)]
    pub end_time: Option<String>,
    /// Actor id (agent id, platform key id, user sub).
    #[serde(default)]
    pub actor: Option<String>,
    #[serde(default)]
    pub producer_service: Option<String>,
    #[serde(default)]
    pub request_surface: Option<String>,
    /// `rpc_method` or the payload's `operation`.
    #[serde(default)]
    pub operation: Option<String>,
    /// Resource id or name.
    #[serde(default)]
    pub resource: Option<String>,
    #[serde(default)]
    pub event_types: Vec<String>,
    #[serde(default)]
    pub results: Vec<String>,
    #[serde(default)]
    pub agent_ids: Vec<String>,
    #[serde(default)]
    pub primary_resource_id: Option<String>,
    #[serde(default)]
    pub primary_resource_kind: Option<String>,
    #[serde(default)]
    pub trace_id: Option<String>,
    #[serde(default)]
    pub activity_id: Option<String>,
    #[serde(default)]
    pub payload_filters: Vec<PayloadFilter>,
    #[serde(default)]
    pub page_size: Option<u32>,
    #[serde(default)]
    pub page_token: Option<String>,
}

impl WorkspaceScoped for QueryEventsRequest {
    fn workspace_id(&self) -> Option<&str> {
        self.workspace_id.as_deref()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueryEventsResponse {
    pub events: Vec<AuditEventV1>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetEventRequest {
    pub workspace_id: String,
    pub event_id: String,
}

impl WorkspaceScoped for GetEventRequest {
    fn workspace_id(&self) -> Option<&str> {
        Some(&self.workspace_id)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GetEventResponse {
    pub event: AuditEventV1,
}

/// One message of the `StreamEvents` response stream.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamEventsResponse {
    pub event: AuditEventV1,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_are_uuids_of_version_7_that_sort_by_time() {
        let id = new_event_id();
        let parsed = uuid::Uuid::parse_str(&id).unwrap();
        assert_eq!(parsed.get_version_num(), 7);
        assert_ne!(new_event_id(), id);
        // Whatever the random part, an id of a later millisecond sorts after.
        let early = event_id_at(1_764_000_000_000, &[0xff; 10]);
        let later = event_id_at(1_764_000_000_001, &[0; 10]);
        assert!(early < later, "{early} < {later}");
        let (secs, _) = parsed.get_timestamp().unwrap().to_unix();
        assert!((crate::unix_millis() / 1000).abs_diff(secs) <= 1);
    }
}
