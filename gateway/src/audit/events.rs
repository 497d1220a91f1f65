//! Building `AuditEventV1` envelopes for gateway decisions.

use portcullis_shared::audit::{self, AuditEventV1};
use serde_json::json;

use crate::authn::AgentEntry;
use crate::error::{Denial, GatewayError};
use crate::request::{GatewayIdentity, Origin, RequestCtx};

/// This process's id in events.
pub fn instance_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| uuid::Uuid::new_v4().to_string())
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn producer() -> audit::Producer {
    audit::Producer {
        service: "gateway".into(),
        instance_id: instance_id().to_string(),
        version: env!("CARGO_PKG_VERSION").into(),
        region: std::env::var("PORTCULLIS_REGION").unwrap_or_default(),
    }
}

/// What is known about a request refused before [`RequestCtx`] exists.
pub struct PreAuth<'a> {
    pub workspace_id: &'a str,
    pub gateway: &'a GatewayIdentity,
    pub agent: Option<&'a AgentEntry>,
    pub request_id: &'a str,
    pub origin: &'a Origin,
}

/// The envelope of an event about an authenticated request; the caller fills `payload` and
/// `data_handling`.
pub fn base(
    rc: &RequestCtx<'_>,
    event_type: &str,
    result: &str,
    resource: audit::ResourceRef,
) -> AuditEventV1 {
    let act_as = &rc.context.typed().act_as;
    AuditEventV1 {
        event_id: audit::new_event_id(),
        event_type: event_type.to_string(),
        time: now(),
        result: result.to_string(),
        scope: audit::Scope {
            kind: "agent".into(),
            workspace_id: rc.workspace_id.to_string(),
            agent_id: rc.agent.id.clone(),
            ..Default::default()
        },
        actor: audit::Actor {
            kind: audit::actors::AGENT.into(),
            id: rc.agent.id.clone(),
            display: rc.agent.name.clone(),
            ..Default::default()
        },
        on_behalf_of: act_as.present.then(|| audit::Actor {
            kind: audit::actors::USER.into(),
            id: act_as.sub.clone(),
            email: act_as.email.clone(),
            display: if act_as.verified {
                format!("verified by {}", act_as.method)
            } else {
                "asserted by the agent, not verified".into()
            },
        }),
        resource: audit::ResourceRef {
            workspace_id: rc.workspace_id.to_string(),
            ..resource
        },
        producer: producer(),
        request: rc.origin.surface(),
        correlation: rc.origin.correlation(rc.request_id),
        data_handling: audit::DataHandling::default(),
        payload: json!({}),
    }
}

/// `access.denied` for a policy denial.
pub fn denial_event(
    rc: &RequestCtx<'_>,
    resource: audit::ResourceRef,
    action: &str,
    d: &Denial,
) -> AuditEventV1 {
    let mut e = base(
        rc,
        audit::types::ACCESS_DENIED,
        audit::results::DENIED,
        resource,
    );
    e.payload = json!({
        "action": action,
        "reason": d.reason,
        "reason_code": d.reason_code,
        "determining_policy": d.determining_policy,
        "gateway_id": rc.gateway.id,
    });
    e
}

/// `access.denied` for a request refused before its agent was known or allowed (bad key,
/// suspended agent, disabled gateway, act-as failure).
pub fn refused_event(pre: &PreAuth<'_>, err: &GatewayError) -> AuditEventV1 {
    let (_, code) = err.openai_type_and_code();
    let mut e = AuditEventV1 {
        event_id: audit::new_event_id(),
        event_type: audit::types::ACCESS_DENIED.into(),
        time: now(),
        result: audit::results::DENIED.into(),
        scope: audit::Scope {
            kind: "workspace".into(),
            workspace_id: pre.workspace_id.to_string(),
            agent_id: pre.agent.map(|a| a.id.clone()).unwrap_or_default(),
            ..Default::default()
        },
        actor: match pre.agent {
            Some(a) => audit::Actor {
                kind: audit::actors::AGENT.into(),
                id: a.id.clone(),
                display: a.name.clone(),
                ..Default::default()
            },
            None => audit::Actor {
                kind: audit::actors::UNKNOWN.into(),
                id: String::new(),
                display: "unauthenticated caller".into(),
                ..Default::default()
            },
        },
        on_behalf_of: None,
        resource: audit::ResourceRef {
            kind: "gateway".into(),
            id: pre.gateway.id.clone(),
            name: pre.gateway.name.clone(),
            workspace_id: pre.workspace_id.to_string(),
            ..Default::default()
        },
        producer: producer(),
        request: pre.origin.surface(),
        correlation: pre.origin.correlation(pre.request_id),
        data_handling: audit::DataHandling::default(),
        payload: json!({"reason": err.to_string(), "reason_code": code, "status": err.status(), "gateway_id": pre.gateway.id}),
    };
    if let GatewayError::Denied(d) = err {
        e.payload["reason_code"] = json!(d.reason_code);
        e.payload["determining_policy"] = json!(d.determining_policy);
    }
    e
}

/// `audit.dropped`, recorded by the gateway itself (the control plane files it under the
/// gateway's workspace).
pub fn dropped_event(count: u64, why: &str) -> AuditEventV1 {
    AuditEventV1 {
        event_id: audit::new_event_id(),
        event_type: audit::types::AUDIT_DROPPED.into(),
        time: now(),
        result: audit::results::ERROR.into(),
        scope: audit::Scope {
            kind: "workspace".into(),
            ..Default::default()
        },
        actor: audit::Actor {
            kind: audit::actors::SYSTEM.into(),
            id: format!("gateway/{}", instance_id()),
            ..Default::default()
        },
        on_behalf_of: None,
        resource: audit::ResourceRef {
            kind: "audit_spool".into(),
            ..Default::default()
        },
        producer: producer(),
        request: audit::RequestSurface {
            surface: audit::surfaces::GATEWAY_INTERNAL.into(),
            ..Default::default()
        },
        correlation: audit::Correlation::default(),
        data_handling: audit::DataHandling::default(),
        payload: json!({"dropped": count, "reason": why}),
    }
}

/// `audit.dropped` for one event the control plane refused, naming it (its id and type, as
/// far as the line can be read) and saying why, both cut to the caller-string bound.
pub fn refused_line_event(line: &[u8], why: &str) -> AuditEventV1 {
    #[derive(serde::Deserialize, Default)]
    #[serde(default)]
    struct Named {
        event_id: String,
        #[serde(rename = "type")]
        event_type: String,
    }
    let named: Named = serde_json::from_slice(line).unwrap_or_default();
    let clip = audit::bound::clip;
    let mut e = dropped_event(1, "the control plane refused the event");
    e.payload["event_id"] = json!(clip(&named.event_id));
    e.payload["event_type"] = json!(clip(&named.event_type));
    e.payload["refusal"] = json!(clip(why));
    e.payload["bytes"] = json!(line.len());
    e
}

/// A duration in milliseconds, to the microsecond.
pub fn millis(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 1_000_000.0).round() / 1000.0
}

/// A resource reference (the workspace is filled in by [`base`]).
pub fn resource(kind: &str, id: &str, name: &str) -> audit::ResourceRef {
    audit::ResourceRef {
        kind: kind.to_string(),
        id: id.to_string(),
        name: name.to_string(),
        ..Default::default()
    }
}
