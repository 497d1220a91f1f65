//! The audit event catalog against what reads it: each payload type's JSON as it has always
//! been written, round trips, `IngestAudit`'s parse, the webhook types and `docs/events.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;

use portcullis_shared::api::guards::{GuardAction, GuardKind, GuardStage};
use portcullis_shared::audit::catalog::*;
use portcullis_shared::audit::{AuditEventV1, AuditPayload, IngestAuditRequest};
use portcullis_shared::snapshot::Charge;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::webhook_types::{self, TYPES};
use super::Incoming;

/// Checks samples, and keeps each type's JSON.
#[derive(Default)]
struct Catalog {
    payloads: BTreeMap<&'static str, Value>,
}

impl Catalog {
    /// `sample` serializes to `expected`, parses back to itself, and its event is taken by
    /// `IngestAudit` and read back as it was sent, whether its payload was a JSON value or
    /// written as it was serialized.
    fn check<P>(&mut self, sample: P, expected: Value)
    where
        P: AuditPayload + DeserializeOwned + PartialEq + Debug + Clone,
    {
        let kind = P::EVENT_TYPE;
        let value = serde_json::to_value(&sample).unwrap();
        assert_eq!(value, expected, "{kind}");
        let text = serde_json::to_string(&sample).unwrap();
        assert_eq!(serde_json::from_str::<P>(&text).unwrap(), sample, "{kind}");
        assert_eq!(serde_json::from_value::<P>(value.clone()).unwrap(), sample);

        let envelope = envelope();
        let event = with_payload(envelope.clone(), &sample);
        assert_eq!(event.event_type, kind);
        let batch = IngestAuditRequest {
            workspace_id: None,
            events: vec![event.clone()],
        };
        let body = serde_json::to_vec(&batch).unwrap();
        let parsed: IngestAuditRequest<Incoming> = serde_json::from_slice(&body).unwrap();
        let incoming = &parsed.events[0];
        assert_eq!(incoming.event.event_type, kind);
        let stored = incoming.to_event().unwrap();
        assert_eq!(stored, event, "{kind}");
        assert_eq!(serde_json::from_value::<P>(stored.payload).unwrap(), sample);
        let (operation, charges) = incoming.operation_and_charges();
        assert_eq!(operation, value["operation"].as_str().unwrap_or_default());
        let sent: Vec<Charge> =
            serde_json::from_value(value["charges"].clone()).unwrap_or_default();
        assert_eq!(charges, sent, "{kind}");

        let typed = envelope.typed(sample);
        let made_here = Incoming::from_event(&typed).unwrap().to_event().unwrap();
        assert_eq!(made_here, event, "{kind}");
        assert!(self.payloads.insert(kind, value).is_none(), "{kind} twice");
    }
}

fn envelope() -> AuditEventV1 {
    let mut e = AuditEventV1 {
        event_id: "0199f5a0-0000-7000-8000-000000000001".into(),
        time: "2026-11-27T10:00:00.000Z".into(),
        result: portcullis_shared::audit::results::ALLOWED.into(),
        ..Default::default()
    };
    e.scope.workspace_id = "w1".into();
    e
}

fn guard() -> GuardRecord {
    GuardRecord {
        guard_id: "gd1".into(),
        guard: "no-secrets".into(),
        stage: GuardStage::LlmOutput,
        kind: GuardKind::Secrets,
        action: GuardAction::Redact,
        matches: 2,
    }
}

fn guard_json() -> Value {
    json!({"guard_id": "gd1", "guard": "no-secrets", "stage": "llm_output", "kind": "secrets",
           "action": "redact", "matches": 2})
}

/// The filtered events: the guard's record and the gateway.
fn filtered(catalog: &mut Catalog) {
    let mut expected = guard_json();
    expected["gateway_id"] = json!("g1");
    let (guard, gateway_id) = (guard(), String::from("g1"));
    let (g, id) = (guard.clone(), gateway_id.clone());
    catalog.check(
        LlmOutputFiltered {
            guard: g,
            gateway_id: id,
        },
        expected.clone(),
    );
    let (g, id) = (guard.clone(), gateway_id.clone());
    catalog.check(
        LlmInputFiltered {
            guard: g,
            gateway_id: id,
        },
        expected.clone(),
    );
    let (g, id) = (guard.clone(), gateway_id.clone());
    catalog.check(
        ToolResultFiltered {
            guard: g,
            gateway_id: id,
        },
        expected.clone(),
    );
    catalog.check(ToolArgumentsFiltered { guard, gateway_id }, expected);
}

fn model_call(catalog: &mut Catalog) {
    let sample = ModelCall {
        model: "chat".into(),
        api: "openai.chat_completions".into(),
        gateway_id: "g1".into(),
        stream: true,
        status: 200,
        latency_ms: 12.345,
        attempts: 2,
        upstream_status: Some(200),
        served_by: Some("m1".into()),
        provider: Some("openai".into()),
        upstream_model: Some("gpt-4o-mini".into()),
        translated: Some(false),
        usage: Some(UsageRecord {
            prompt_tokens: 10,
            completion_tokens: 5,
            total_tokens: 15,
            cached_tokens: 4,
            cache_write_tokens: 1,
        }),
        cost_micros: Some(7),
        price_source: Some("override".into()),
        charges: vec![Charge {
            quota_id: "q1".into(),
            day: 20_000,
            caller: "a1".into(),
            micros: 7,
        }],
        guards: vec![guard()],
        delivered: Some("redacted".into()),
        error: Some("upstream failed".into()),
        reason_code: Some("upstream_error".into()),
    };
    let expected = json!({"model": "chat", "api": "openai.chat_completions", "gateway_id": "g1",
        "stream": true, "status": 200, "latency_ms": 12.345, "attempts": 2,
        "upstream_status": 200, "served_by": "m1", "provider": "openai",
        "upstream_model": "gpt-4o-mini", "translated": false,
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
                  "cached_tokens": 4, "cache_write_tokens": 1},
        "cost_micros": 7, "price_source": "override",
        "charges": [{"quota_id": "q1", "day": 20_000, "caller": "a1", "micros": 7}],
        "guards": [guard_json()], "delivered": "redacted",
        "error": "upstream failed", "reason_code": "upstream_error"});
    catalog.check(sample, expected);
    let bare = ModelCall {
        model: "chat".into(),
        api: "anthropic.messages".into(),
        ..Default::default()
    };
    let value = serde_json::to_value(&bare).unwrap();
    assert_eq!(
        value,
        json!({"model": "chat", "api": "anthropic.messages", "gateway_id": "", "stream": false,
               "status": 0, "latency_ms": 0.0, "attempts": 0})
    );
}

/// The gateway's MCP events.
fn mcp(catalog: &mut Catalog) {
    let failure = RpcFailure {
        code: -32001,
        message: "refused".into(),
    };
    let call = ToolCall {
        tool: "github/create_issue".into(),
        connection_id: "c1".into(),
        gateway_id: "g1".into(),
        latency_ms: 3.5,
        is_error: Some(false),
        error: Some(failure.clone()),
        guards: vec![guard()],
        delivered: Some("as_answered".into()),
    };
    let expected = json!({"tool": "github/create_issue", "connection_id": "c1",
        "gateway_id": "g1", "latency_ms": 3.5, "is_error": false,
        "error": {"code": -32001, "message": "refused"}, "guards": [guard_json()],
        "delivered": "as_answered"});
    catalog.check(call, expected);
    let list = ToolList {
        gateway_id: "g1".into(),
        tools: 3,
        failed_connections: vec!["c2".into()],
        latency_ms: 1.0,
    };
    let expected = json!({"gateway_id": "g1", "tools": 3, "failed_connections": ["c2"],
        "latency_ms": 1.0});
    catalog.check(list, expected);
    let request = McpRequest {
        method: "tools/nothing".into(),
        gateway_id: "g1".into(),
        error: failure,
        reason_code: "method_not_found".into(),
    };
    let expected = json!({"method": "tools/nothing", "gateway_id": "g1",
        "error": {"code": -32001, "message": "refused"}, "reason_code": "method_not_found"});
    catalog.check(request, expected);
}

/// The gateway's refusals, drops and quota events.
fn refusals(catalog: &mut Catalog) {
    let denied = AccessDenied {
        action: Some("mcp:call".into()),
        reason: "forbidden by rule".into(),
        reason_code: "forbidden".into(),
        determining_policy: Some("p1".into()),
        gateway_id: "g1".into(),
        status: Some(403),
        unrecorded_before: Some(4),
    };
    let expected = json!({"action": "mcp:call", "reason": "forbidden by rule",
        "reason_code": "forbidden", "determining_policy": "p1", "gateway_id": "g1",
        "status": 403, "unrecorded_before": 4});
    catalog.check(denied, expected);
    let dropped = AuditDropped {
        dropped: 1,
        reason: "the control plane refused the event".into(),
        event_id: Some("e1".into()),
        event_type: Some("model.call".into()),
        refusal: Some("400: too large".into()),
        bytes: Some(70_000),
    };
    let expected = json!({"dropped": 1, "reason": "the control plane refused the event",
        "event_id": "e1", "event_type": "model.call", "refusal": "400: too large",
        "bytes": 70_000});
    catalog.check(dropped, expected);
    let threshold = QuotaThreshold {
        quota_id: "q1".into(),
        percent: 80,
        spent_micros: 800,
        limit_micros: 1000,
        window: "day".into(),
        caller: String::new(),
        resets_at: "2026-11-28T00:00:00Z".into(),
    };
    let expected = json!({"quota_id": "q1", "percent": 80, "spent_micros": 800,
        "limit_micros": 1000, "window": "day", "caller": "",
        "resets_at": "2026-11-28T00:00:00Z"});
    catalog.check(threshold, expected);
    let exceeded = QuotaExceeded {
        quota_id: "q1".into(),
        reason: "no room".into(),
        reason_code: "quota_exceeded".into(),
        resets_at: "2026-11-28T00:00:00Z".into(),
    };
    let expected = json!({"quota_id": "q1", "reason": "no room",
        "reason_code": "quota_exceeded", "resets_at": "2026-11-28T00:00:00Z"});
    catalog.check(exceeded, expected);
}

/// The control plane's management events.
fn management(catalog: &mut Catalog) {
    let unreadable = AuditUnreadable {
        error: "EOF".into(),
    };
    catalog.check(unreadable, json!({"error": "EOF"}));
    let operation = MgmtOperation {
        operation: "CallTool".into(),
        code: "ok".into(),
        surface: Some("mcp".into()),
        tool: Some("create_agent".into()),
    };
    let expected = json!({"operation": "CallTool", "code": "ok", "surface": "mcp",
        "tool": "create_agent"});
    catalog.check(operation, expected);
    let suspended = AgentSuspended {
        agent_id: "a2".into(),
        agent_name: "child".into(),
        cascade: true,
        suspended_by: "a1".into(),
        reason: None,
    };
    let expected = json!({"agent_id": "a2", "agent_name": "child", "cascade": true,
        "suspended_by": "a1", "reason": null});
    catalog.check(suspended, expected);
    let deployed = RuleBundleDeployed {
        bundle_id: "b1".into(),
        bundle_name: "base".into(),
        scope: "workspace".into(),
        scope_id: "w1".into(),
        policies: 2,
        replaced: false,
    };
    let expected = json!({"bundle_id": "b1", "bundle_name": "base", "scope": "workspace",
        "scope_id": "w1", "policies": 2, "replaced": false});
    catalog.check(deployed, expected);
}

/// The control plane's credential and OAuth events.
fn credentials(catalog: &mut Catalog) {
    let grant = ConnectionGrant {
        connection_id: "c1".into(),
        connection_name: "github".into(),
        subject: "sub-1".into(),
    };
    let fields = json!({"connection_id": "c1", "connection_name": "github", "subject": "sub-1"});
    let with = |key: &str, value: Value| {
        let mut v = fields.clone();
        v[key] = value;
        v
    };
    let method = Some("oauth".to_string());
    let provisioned = CredentialProvisioned {
        grant: grant.clone(),
        method,
    };
    catalog.check(provisioned, with("method", json!("oauth")));
    let refused = CredentialProvisionRefused {
        connection_id: "c1".into(),
        subject: "sub-1".into(),
        agent_id: "a1".into(),
        signed_in_subject: "sub-2".into(),
        signed_in_email: "b@example.com".into(),
    };
    let expected = json!({"connection_id": "c1", "subject": "sub-1", "agent_id": "a1",
        "signed_in_subject": "sub-2", "signed_in_email": "b@example.com"});
    catalog.check(refused, expected);
    let method = "oauth".to_string();
    let connected = OauthConnected {
        grant: grant.clone(),
        method,
    };
    catalog.check(connected, with("method", json!("oauth")));
    let grants = 2;
    let disconnected = OauthDisconnected {
        grant: grant.clone(),
        grants,
    };
    catalog.check(disconnected, with("grants", json!(2)));
    let reason = "invalid_grant".to_string();
    catalog.check(
        OauthRefreshFailed { grant, reason },
        with("reason", json!("invalid_grant")),
    );
    let by_form = CredentialProvisioned::default();
    let value = serde_json::to_value(by_form).unwrap();
    assert_eq!(
        value.get("method"),
        None,
        "a provision link's form has no method"
    );
}

/// The interactive sign-in events.
fn interactive(catalog: &mut Catalog) {
    let sign_in = InteractiveSignIn {
        agent_id: "a1".into(),
        gateway_id: "g1".into(),
        client_id: "client".into(),
        subject: "sub-1".into(),
        email: "a@example.com".into(),
    };
    let fields = json!({"agent_id": "a1", "gateway_id": "g1", "client_id": "client",
        "subject": "sub-1", "email": "a@example.com"});
    let mut expected = fields.clone();
    expected["grant_id"] = json!("gr1");
    let grant_id = "gr1".to_string();
    let granted = InteractiveGranted {
        grant_id,
        sign_in: sign_in.clone(),
    };
    catalog.check(granted, expected);
    let mut expected = fields;
    expected["grant_id"] = Value::Null;
    let refused = InteractiveRefused {
        grant_id: None,
        sign_in,
    };
    catalog.check(refused, expected);
}

/// Every type of the catalog, checked.
fn all() -> Catalog {
    let mut catalog = Catalog::default();
    model_call(&mut catalog);
    mcp(&mut catalog);
    refusals(&mut catalog);
    filtered(&mut catalog);
    management(&mut catalog);
    credentials(&mut catalog);
    interactive(&mut catalog);
    catalog
}

#[test]
fn every_payload_keeps_its_json_round_trips_and_is_ingested() {
    let catalog = all();
    let checked: BTreeSet<&str> = catalog.payloads.keys().copied().collect();
    let listed: BTreeSet<&str> = ALL_TYPES.iter().copied().collect();
    assert_eq!(checked, listed, "one sample per type of the catalog");
}

#[test]
fn webhook_types_are_derived_from_catalog_types() {
    for (webhook, audit) in TYPES {
        match *webhook {
            webhook_types::TEST => assert!(audit.is_empty()),
            _ => assert!(ALL_TYPES.contains(audit), "{webhook} from {audit}"),
        }
    }
}

/// `docs/events.md`'s table of types: each row's type and the fields (in backquotes) of its
/// "its own fields" column.
fn documented() -> Vec<(String, Vec<String>)> {
    let doc = include_str!("../../../docs/events.md");
    let table = doc.split("\n## Types\n").nth(1).unwrap();
    let table = table.split("\n## ").next().unwrap();
    let quoted = |cell: &str| -> Vec<String> {
        cell.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    };
    table
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|row| {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let kind = quoted(cells[1]).remove(0);
            (kind, quoted(cells[3]))
        })
        .collect()
}

#[test]
fn the_documented_types_are_the_webhook_types_with_their_fields() {
    let rows = documented();
    let in_docs: BTreeSet<&str> = rows.iter().map(|(t, _)| t.as_str()).collect();
    let webhooks: BTreeSet<&str> = TYPES.iter().map(|(t, _)| *t).collect();
    assert_eq!(
        in_docs, webhooks,
        "docs/events.md's table against webhook_types::TYPES"
    );
    let catalog = all();
    for (webhook, fields) in &rows {
        let Some(audit) = webhook_types::TYPES
            .iter()
            .find(|(t, a)| t == webhook && !a.is_empty())
            .map(|(_, a)| *a)
        else {
            continue;
        };
        let payload = &catalog.payloads[audit];
        // A field is its name, as in `error {code, message}`; a type (`llm.output.filtered`)
        // stands for that type's fields.
        for field in fields.iter().filter(|f| !f.contains('.')) {
            let name = field.split([' ', '{']).next().unwrap();
            assert!(
                payload.get(name).is_some(),
                "{webhook}: {name} is not in {audit}"
            );
        }
    }
}
