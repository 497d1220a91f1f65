//! Webhook events, derived from stored audit events: which audit types become which webhook
//! types, and each event's `data` (documented per type in `docs/events.md`). A body is
//! `{"type", "timestamp", "data"}`; `data` never carries a secret or content the audit record
//! itself left out.

use portcullis_shared::audit::{self, AuditEventV1};
use serde_json::{json, Map, Value};

/// The event's `data`: who, on what, and the audit payload's own fields. Filters match on
/// its top-level fields (`agent_id`, `agent_name`, `connection_name`, `tool_name`, and each
/// type's own).
pub fn data(event: &AuditEventV1) -> Map<String, Value> {
    let mut data = Map::new();
    data.insert("event_id".into(), json!(event.event_id));
    data.insert("time".into(), json!(event.time));
    data.insert("result".into(), json!(result_name(&event.result)));
    if !event.scope.agent_id.is_empty() {
        data.insert("agent_id".into(), json!(event.scope.agent_id));
    }
    if event.actor.kind == audit::actors::AGENT && !event.actor.display.is_empty() {
        data.insert("agent_name".into(), json!(event.actor.display));
    }
    if let Some(person) = &event.on_behalf_of {
        data.insert("on_behalf_of".into(), json!(person.id));
    }
    let r = &event.resource;
    data.insert(
        "resource".into(),
        json!({"kind": r.kind, "id": r.id, "name": r.name}),
    );
    if r.kind == "tool" {
        if let Some((connection, _)) = r.name.split_once('/') {
            data.insert("connection_name".into(), json!(connection));
            data.insert("tool_name".into(), json!(r.name));
        }
    }
    if let Value::Object(payload) = &event.payload {
        for (k, v) in payload {
            data.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    data
}

fn result_name(result: &str) -> &str {
    match result {
        audit::results::ALLOWED => "allowed",
        audit::results::DENIED => "denied",
        audit::results::ERROR => "error",
        other => other,
    }
}

/// The body sent for an event.
pub fn body(event_type: &str, timestamp: &str, data: Map<String, Value>) -> Value {
    json!({"type": event_type, "timestamp": timestamp, "data": data})
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::audit::webhook_types::{is_known, webhook_type, TEST};

    #[test]
    fn a_tool_call_names_its_agent_connection_and_tool() {
        let event = AuditEventV1 {
            event_id: "e1".into(),
            event_type: audit::types::TOOL_CALL.into(),
            time: "2026-11-25T10:00:00.000Z".into(),
            result: audit::results::ALLOWED.into(),
            scope: audit::Scope {
                workspace_id: "w".into(),
                agent_id: "a1".into(),
                ..Default::default()
            },
            actor: audit::Actor {
                kind: audit::actors::AGENT.into(),
                id: "a1".into(),
                display: "billing".into(),
                ..Default::default()
            },
            resource: audit::ResourceRef {
                kind: "tool".into(),
                id: "c1".into(),
                name: "github/create_issue".into(),
                ..Default::default()
            },
            payload: json!({"latency_ms": 12, "is_error": false, "result": "overridden?"}),
            ..Default::default()
        };
        assert_eq!(
            webhook_type(&event.event_type),
            Some("mcp.tool_call.completed")
        );
        let data = data(&event);
        assert_eq!(data["agent_name"], "billing");
        assert_eq!(data["connection_name"], "github");
        assert_eq!(data["tool_name"], "github/create_issue");
        assert_eq!(data["latency_ms"], 12);
        // The envelope's fields win over a payload field of the same name.
        assert_eq!(data["result"], "allowed");
        assert_eq!(webhook_type(audit::types::MODEL_CALL), None);
        assert!(is_known(TEST) && !is_known("model.call"));
    }
}
