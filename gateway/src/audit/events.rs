//! Building audit events for gateway decisions: each from its payload in the catalog
//! (`portcullis_shared::audit::catalog`), which names its type.

use portcullis_shared::audit::catalog::{AccessDenied, AuditDropped};
use portcullis_shared::audit::{self, AuditEvent, AuditPayload};

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

/// The event of `payload` about an authenticated request; the caller may fill
/// `data_handling` and the request's method.
pub fn event<P: AuditPayload>(
    rc: &RequestCtx<'_>,
    result: &str,
    resource: audit::ResourceRef,
    payload: P,
) -> AuditEvent<P> {
    let act_as = &rc.context.typed().act_as;
    AuditEvent {
        event_id: audit::new_event_id(),
        event_type: P::EVENT_TYPE.to_string(),
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
        payload,
    }
}

/// `access.denied` for a policy denial.
pub fn denial_event(
    rc: &RequestCtx<'_>,
    resource: audit::ResourceRef,
    action: &str,
    d: &Denial,
) -> AuditEvent<AccessDenied> {
    let payload = AccessDenied {
        action: Some(action.to_string()),
        reason: d.reason.clone(),
        reason_code: d.reason_code.to_string(),
        determining_policy: Some(d.determining_policy.clone()),
        gateway_id: rc.gateway.id.clone(),
        ..Default::default()
    };
    event(rc, audit::results::DENIED, resource, payload)
}

/// `access.denied` for a request refused before its agent was known or allowed (bad key,
/// suspended agent, disabled gateway, act-as failure); `unrecorded_before` counts the
/// refusals of unidentified callers left unrecorded since the last one that was.
pub fn refused_event(
    pre: &PreAuth<'_>,
    err: &GatewayError,
    unrecorded_before: u64,
) -> AuditEvent<AccessDenied> {
    let (_, code) = err.openai_type_and_code();
    let denial = match err {
        GatewayError::Denied(d) => Some(d),
        _ => None,
    };
    let payload = AccessDenied {
        action: None,
        reason: err.to_string(),
        reason_code: denial.map_or(code, |d| d.reason_code).to_string(),
        determining_policy: denial.map(|d| d.determining_policy.clone()),
        gateway_id: pre.gateway.id.clone(),
        status: Some(err.status()),
        unrecorded_before: (unrecorded_before > 0).then_some(unrecorded_before),
    };
    AuditEvent {
        event_id: audit::new_event_id(),
        event_type: AccessDenied::EVENT_TYPE.into(),
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
        payload,
    }
}

/// `audit.dropped` for `count` events dropped for the reason `why`.
pub fn dropped_event(count: u64, why: &str) -> AuditEvent<AuditDropped> {
    dropped(AuditDropped {
        dropped: count,
        reason: why.to_string(),
        ..Default::default()
    })
}

/// `audit.dropped`, recorded by the gateway itself (the control plane files it under the
/// gateway's workspace).
fn dropped(payload: AuditDropped) -> AuditEvent<AuditDropped> {
    AuditEvent {
        event_id: audit::new_event_id(),
        event_type: AuditDropped::EVENT_TYPE.into(),
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
        payload,
    }
}

/// `audit.dropped` for one event the control plane refused, naming it (its id and type, as
/// far as the line can be read) and saying why, both cut to the caller-string bound.
pub fn refused_line_event(line: &[u8], why: &str) -> AuditEvent<AuditDropped> {
    #[derive(serde::Deserialize, Default)]
    #[serde(default)]
    struct Named {
        event_id: String,
        #[serde(rename = "type")]
        event_type: String,
    }
    let named: Named = serde_json::from_slice(line).unwrap_or_default();
    let clip = |s: &str| audit::bound::clip(s).into_owned();
    dropped(AuditDropped {
        dropped: 1,
        reason: "the control plane refused the event".into(),
        event_id: Some(clip(&named.event_id)),
        event_type: Some(clip(&named.event_type)),
        refusal: Some(clip(why)),
        bytes: Some(line.len() as u64),
    })
}

/// A duration in milliseconds, to the microsecond.
pub fn millis(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 1_000_000.0).round() / 1000.0
}

/// A resource reference (the workspace is filled in by [`event`]).
pub fn resource(kind: &str, id: &str, name: &str) -> audit::ResourceRef {
    audit::ResourceRef {
        kind: kind.to_string(),
        id: id.to_string(),
        name: name.to_string(),
        ..Default::default()
    }
}
