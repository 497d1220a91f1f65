//! LLM quotas over the real API: every rule of create, update, list and delete, each on SQLite
//! and on PostgreSQL.

use portcullis_tests::controlplane::{AGENTS, MGMT};
use portcullis_tests::{on_both_backends, ControlPlane};
use serde_json::{json, Value};

use crate::models::create_model;

on_both_backends!(
    subjects_defaults_and_listing,
    subject_rules,
    one_quota_per_subject_and_window,
    updates_keep_omitted_fields_and_never_move_the_subject,
    delete_and_cascades,
    the_free_plan_creates_none,
    gateway_variants_touch_gateway_quotas_only,
    limits_reach_two_to_the_53
);

/// No cap beyond what every JSON client holds exactly: 2⁵³ − 1 micro-USD.
async fn limits_reach_two_to_the_53(cp: &ControlPlane) {
    let i = ids(cp).await;
    const MAX: u64 = (1 << 53) - 1;
    let big = create(
        cp,
        json!({"subject_type": "workspace", "limit_micros": 5_000_000_000_000u64}),
    )
    .await;
    assert_eq!(
        big["limit_micros"], 5_000_000_000_000u64,
        "5,000,000 USD is a budget"
    );
    let id = big["quota_id"].as_str().unwrap();
    let u = cp
        .ok(
            MGMT,
            "UpdateLLMQuota",
            cp.body(json!({"quota_id": id, "limit_micros": MAX})),
        )
        .await;
    assert_eq!(u["quota"]["limit_micros"], MAX);
    for body in [
        json!({"quota_id": id, "limit_micros": MAX + 1}),
        json!({"quota_id": id, "limit_micros": -1}),
        json!({"quota_id": id, "limit_micros": 1.5}),
    ] {
        cp.call(MGMT, "UpdateLLMQuota", cp.body(body))
            .await
            .expect_error("invalid_argument", 400)
            .mentions("limit_micros");
    }
    cp.call(
        MGMT,
        "CreateLLMQuota",
        cp.body(json!({"subject_type": "agent", "subject_id": i.agent, "limit_micros": MAX + 1})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("9007199254740991");
    let listed = list(cp).await;
    assert_eq!(listed.len(), 1, "refused requests created nothing");
    assert_eq!(listed[0]["limit_micros"], MAX, "and changed nothing");
}

struct Ids {
    agent: String,
    pool: String,
    model: String,
    gateway: String,
}

async fn ids(cp: &ControlPlane) -> Ids {
    let model = create_model(
        cp,
        json!({"name": "gpt", "provider": "openai", "provider_config": {"model": "gpt-4o-mini"}}),
    )
    .await["connection_id"]
        .as_str()
        .unwrap()
        .to_string();
    let pool = cp
        .ok(
            MGMT,
            "CreateLLMPool",
            cp.body(json!({"name": "p", "members": [{"connection_id": model}]})),
        )
        .await["pool"]["pool_id"]
        .as_str()
        .unwrap()
        .to_string();
    let agent = cp
        .ok(AGENTS, "RegisterAgent", cp.body(json!({"name": "bot"})))
        .await["agent"]["agent_id"]
        .as_str()
        .unwrap()
        .to_string();
    Ids {
        agent,
        pool,
        model,
        gateway: cp.default_gateway_id.clone(),
    }
}

async fn create(cp: &ControlPlane, fields: Value) -> Value {
    cp.ok(MGMT, "CreateLLMQuota", cp.body(fields)).await["quota"].clone()
}

async fn list(cp: &ControlPlane) -> Vec<Value> {
    cp.ok(MGMT, "ListLLMQuotas", cp.body(json!({}))).await["quotas"]
        .as_array()
        .unwrap()
        .clone()
}

async fn subjects_defaults_and_listing(cp: &ControlPlane) {
    let i = ids(cp).await;
    let ws = create(
        cp,
        json!({"subject_type": "workspace", "limit_micros": 5_000_000}),
    )
    .await;
    assert_eq!(ws["window"], "monthly", "monthly is the default window");
    assert_eq!(ws["scope"], "total", "total is the default scope");
    assert_eq!(
        (ws["enabled"].as_bool(), ws["per_caller"].as_bool()),
        (Some(true), Some(false))
    );
    assert_eq!(ws["subject_id"], cp.workspace_id);
    assert_eq!(ws["limit_micros"], 5_000_000);
    let agent = create(cp, json!({"subject_type": "agent", "subject_id": i.agent, "limit_micros": 1, "window": "daily", "name": "bot daily"})).await;
    assert_eq!(
        (
            agent["subject_id"].as_str(),
            agent["window"].as_str(),
            agent["name"].as_str()
        ),
        (Some(i.agent.as_str()), Some("daily"), Some("bot daily"))
    );
    let person = create(
        cp,
        json!({"subject_type": "act-as", "subject_key": "oidc|u-7", "limit_micros": 2}),
    )
    .await;
    assert_eq!(
        (
            person["subject_type"].as_str(),
            person["subject_key"].as_str()
        ),
        (Some("act_as"), Some("oidc|u-7"))
    );
    assert!(person.get("subject_id").is_none());
    create(
        cp,
        json!({"subject_type": "pool", "subject_id": i.pool, "limit_micros": 3}),
    )
    .await;
    let scoped = create(cp, json!({"subject_type": "model", "subject_id": i.model, "pool_id": i.pool, "per_caller": true, "limit_micros": 4})).await;
    assert_eq!(
        (scoped["pool_id"].as_str(), scoped["per_caller"].as_bool()),
        (Some(i.pool.as_str()), Some(true))
    );
    create(
        cp,
        json!({"subject_type": "gateway", "subject_id": i.gateway, "limit_micros": 6}),
    )
    .await;
    let disabled = create(cp, json!({"subject_type": "model", "subject_id": i.model, "limit_micros": 7, "disabled": true})).await;
    assert_eq!(
        disabled["enabled"], false,
        "created disabled, stored without enforcement"
    );
    let all = list(cp).await;
    assert_eq!(all.len(), 7, "the list holds disabled quotas too");
    assert!(all.iter().all(|q| q["quota_id"].is_string()
        && q["limit_micros"].is_u64()
        && q["window"].is_string()
        && q["enabled"].is_boolean()));
}

async fn subject_rules(cp: &ControlPlane) {
    let i = ids(cp).await;
    let missing = uuid::Uuid::new_v4().to_string();
    let refused = refused_subjects(&i, &missing)
        .into_iter()
        .chain(refused_kinds_limits_and_windows());
    for (body, code, field) in refused {
        let r = cp.call(MGMT, "CreateLLMQuota", cp.body(body.clone())).await;
        assert!(
            r.status >= 400 && r.code() == code,
            "{body} → {} {}",
            r.status,
            r.text
        );
        assert!(
            r.message().contains(field),
            "{body}: the message names {field}: {}",
            r.message()
        );
    }
    assert!(list(cp).await.is_empty(), "a refused create stores nothing");
}

/// Creates with a subject that is missing, of another kind, or qualified where it may not
/// be: each body, the code it is refused with and the field the message names.
fn refused_subjects(i: &Ids, missing: &str) -> Vec<(Value, &'static str, &'static str)> {
    vec![
        (
            json!({"subject_type": "agent", "limit_micros": 1}),
            "invalid_argument",
            "subject_id",
        ),
        (
            json!({"subject_type": "agent", "subject_id": missing, "limit_micros": 1}),
            "not_found",
            "agent",
        ),
        (
            json!({"subject_type": "pool", "subject_id": i.model, "limit_micros": 1}),
            "not_found",
            "pool",
        ),
        (
            json!({"subject_type": "model", "subject_id": i.pool, "limit_micros": 1}),
            "not_found",
            "model",
        ),
        (
            json!({"subject_type": "gateway", "subject_id": missing, "limit_micros": 1}),
            "not_found",
            "gateway",
        ),
        (
            json!({"subject_type": "act_as", "limit_micros": 1}),
            "invalid_argument",
            "subject_key",
        ),
        (
            json!({"subject_type": "act_as", "subject_id": i.agent, "subject_key": "u", "limit_micros": 1}),
            "invalid_argument",
            "subject_key",
        ),
        (
            json!({"subject_type": "agent", "subject_id": i.agent, "subject_key": "u", "limit_micros": 1}),
            "invalid_argument",
            "subject_key",
        ),
        (
            json!({"subject_type": "agent", "subject_id": i.agent, "pool_id": i.pool, "limit_micros": 1}),
            "invalid_argument",
            "pool_id",
        ),
        (
            json!({"subject_type": "model", "subject_id": i.model, "pool_id": missing, "limit_micros": 1}),
            "not_found",
            "pool",
        ),
        (
            json!({"subject_type": "gateway", "subject_id": i.gateway, "per_caller": true, "limit_micros": 1}),
            "invalid_argument",
            "per_caller",
        ),
        (
            json!({"subject_type": "workspace", "subject_id": i.agent, "limit_micros": 1}),
            "invalid_argument",
            "subject_id",
        ),
    ]
}

/// Creates with an unknown subject type, a limit out of range or missing, or an unknown
/// window or scope: as [`refused_subjects`].
fn refused_kinds_limits_and_windows() -> Vec<(Value, &'static str, &'static str)> {
    vec![
        (
            json!({"subject_type": "team", "limit_micros": 1}),
            "invalid_argument",
            "subject_type",
        ),
        (
            json!({"subject_type": "workspace"}),
            "invalid_argument",
            "limit_micros",
        ),
        (
            json!({"subject_type": "workspace", "limit_micros": -5}),
            "invalid_argument",
            "limit_micros",
        ),
        (
            json!({"subject_type": "workspace", "limit_micros": 9_007_199_254_740_992u64}),
            "invalid_argument",
            "limit_micros",
        ),
        (
            json!({"subject_type": "workspace", "limit_micros": 1, "window": "weekly"}),
            "invalid_argument",
            "window",
        ),
        (
            json!({"subject_type": "workspace", "limit_micros": 1, "scope": "input"}),
            "invalid_argument",
            "scope",
        ),
    ]
}

async fn one_quota_per_subject_and_window(cp: &ControlPlane) {
    let i = ids(cp).await;
    let first = create(
        cp,
        json!({"subject_type": "agent", "subject_id": i.agent, "limit_micros": 10}),
    )
    .await;
    let again = cp.call(MGMT, "CreateLLMQuota", cp.body(json!({"subject_type": "agent", "subject_id": i.agent, "limit_micros": 99, "window": "monthly"}))).await;
    again.expect_error("already_exists", 409);
    assert!(
        again
            .message()
            .contains(first["quota_id"].as_str().unwrap()),
        "the conflict names the quota: {}",
        again.message()
    );
    // Another window, another scope or per-caller flag is another identity.
    create(cp, json!({"subject_type": "agent", "subject_id": i.agent, "limit_micros": 1, "window": "daily"})).await;
    create(
        cp,
        json!({"subject_type": "model", "subject_id": i.model, "limit_micros": 1}),
    )
    .await;
    create(cp, json!({"subject_type": "model", "subject_id": i.model, "pool_id": i.pool, "limit_micros": 1})).await;
    create(cp, json!({"subject_type": "model", "subject_id": i.model, "per_caller": true, "limit_micros": 1})).await;
    cp.call(MGMT, "CreateLLMQuota", cp.body(json!({"subject_type": "model", "subject_id": i.model, "pool_id": i.pool, "limit_micros": 5})))
        .await
        .expect_error("already_exists", 409);
    create(
        cp,
        json!({"subject_type": "act_as", "subject_key": "alice", "limit_micros": 1}),
    )
    .await;
    cp.call(
        MGMT,
        "CreateLLMQuota",
        cp.body(json!({"subject_type": "act_as", "subject_key": "alice", "limit_micros": 1})),
    )
    .await
    .expect_error("already_exists", 409);
    assert_eq!(list(cp).await.len(), 6);
    assert_eq!(
        list(cp).await[0]["limit_micros"],
        10,
        "the conflicting create changed nothing"
    );
}

async fn updates_keep_omitted_fields_and_never_move_the_subject(cp: &ControlPlane) {
    let i = ids(cp).await;
    let q = create(
        cp,
        json!({"subject_type": "agent", "subject_id": i.agent, "limit_micros": 10, "name": "n"}),
    )
    .await;
    let id = q["quota_id"].as_str().unwrap();
    updates_keep_what_they_omit(cp, id).await;
    the_subject_and_its_qualifiers_never_move(cp, &i, id).await;
    cp.call(
        MGMT,
        "UpdateLLMQuota",
        cp.body(json!({"quota_id": uuid::Uuid::new_v4().to_string(), "limit_micros": 1})),
    )
    .await
    .expect_error("not_found", 404);
}

async fn updates_keep_what_they_omit(cp: &ControlPlane, id: &str) {
    let u = cp
        .ok(
            MGMT,
            "UpdateLLMQuota",
            cp.body(json!({"quota_id": id, "limit_micros": 20})),
        )
        .await["quota"]
        .clone();
    assert_eq!(
        (
            u["limit_micros"].as_u64(),
            u["name"].as_str(),
            u["window"].as_str(),
            u["enabled"].as_bool()
        ),
        (Some(20), Some("n"), Some("monthly"), Some(true))
    );
    let u = cp
        .ok(
            MGMT,
            "UpdateLLMQuota",
            cp.body(
                json!({"quota_id": id, "enabled": false, "window": "daily", "name": "renamed"}),
            ),
        )
        .await["quota"]
        .clone();
    assert_eq!(
        (
            u["limit_micros"].as_u64(),
            u["name"].as_str(),
            u["window"].as_str(),
            u["enabled"].as_bool()
        ),
        (Some(20), Some("renamed"), Some("daily"), Some(false))
    );
    let u = cp
        .ok(
            MGMT,
            "UpdateLLMQuota",
            cp.body(json!({"quota_id": id, "enabled": true})),
        )
        .await["quota"]
        .clone();
    assert_eq!(u["enabled"], true, "the flag changes by update");
}

async fn the_subject_and_its_qualifiers_never_move(cp: &ControlPlane, i: &Ids, id: &str) {
    for field in [
        json!({"subject_id": i.model}),
        json!({"subject_type": "model"}),
        json!({"subject_key": "x"}),
        json!({"pool_id": i.pool}),
        json!({"per_caller": true}),
    ] {
        let mut body = field.clone();
        body["quota_id"] = json!(id);
        let r = cp.call(MGMT, "UpdateLLMQuota", cp.body(body)).await;
        r.expect_error("invalid_argument", 400)
            .mentions("cannot change");
    }
    // Moving into a window another quota of the subject holds conflicts.
    create(cp, json!({"subject_type": "agent", "subject_id": i.agent, "limit_micros": 1, "window": "monthly"})).await;
    cp.call(
        MGMT,
        "UpdateLLMQuota",
        cp.body(json!({"quota_id": id, "window": "monthly"})),
    )
    .await
    .expect_error("already_exists", 409);
    let stored = list(cp)
        .await
        .into_iter()
        .find(|q| q["quota_id"] == id)
        .unwrap();
    assert_eq!(
        (
            stored["subject_id"].as_str(),
            stored["window"].as_str(),
            stored["limit_micros"].as_u64()
        ),
        (Some(i.agent.as_str()), Some("daily"), Some(20))
    );
}

async fn delete_and_cascades(cp: &ControlPlane) {
    let i = ids(cp).await;
    let q = create(cp, json!({"subject_type": "workspace", "limit_micros": 1})).await;
    cp.ok(
        MGMT,
        "DeleteLLMQuota",
        cp.body(json!({"quota_id": q["quota_id"]})),
    )
    .await;
    cp.call(
        MGMT,
        "DeleteLLMQuota",
        cp.body(json!({"quota_id": q["quota_id"]})),
    )
    .await
    .expect_error("not_found", 404);
    create(cp, json!({"subject_type": "model", "subject_id": i.model, "pool_id": i.pool, "limit_micros": 1})).await;
    create(
        cp,
        json!({"subject_type": "pool", "subject_id": i.pool, "limit_micros": 1}),
    )
    .await;
    let kept = create(
        cp,
        json!({"subject_type": "model", "subject_id": i.model, "limit_micros": 1}),
    )
    .await;
    // Deleting the pool drops its quota and the model quota scoped to it.
    cp.ok(MGMT, "DeleteLLMPool", cp.body(json!({"pool_id": i.pool})))
        .await;
    let left: Vec<Value> = list(cp).await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["quota_id"], kept["quota_id"]);
    create(
        cp,
        json!({"subject_type": "agent", "subject_id": i.agent, "limit_micros": 1}),
    )
    .await;
    cp.ok(AGENTS, "RevokeAgent", cp.body(json!({"agent_id": i.agent})))
        .await;
    cp.ok(AGENTS, "DeleteAgent", cp.body(json!({"agent_id": i.agent})))
        .await;
    assert_eq!(list(cp).await.len(), 1, "an agent's quotas go with it");
}

async fn the_free_plan_creates_none(cp: &ControlPlane) {
    let w = cp
        .ok(MGMT, "UpdateWorkspace", cp.body(json!({"plan": "free"})))
        .await;
    assert_eq!(w["workspace"]["plan"], "free");
    let r = cp
        .call(
            MGMT,
            "CreateLLMQuota",
            cp.body(json!({"subject_type": "workspace", "limit_micros": 1})),
        )
        .await;
    r.expect_error("failed_precondition", 400)
        .mentions("free plan");
    assert!(list(cp).await.is_empty());
    cp.call(MGMT, "UpdateWorkspace", cp.body(json!({"plan": "gold"})))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("plan");
    cp.ok(MGMT, "UpdateWorkspace", cp.body(json!({"plan": "pro"})))
        .await;
    create(cp, json!({"subject_type": "workspace", "limit_micros": 1})).await;
}

/// The gateway variants (what the MCP tools `svc_gateway_quota_*` call) create gateway quotas
/// and refuse the ids of any other quota, changing nothing.
async fn gateway_variants_touch_gateway_quotas_only(cp: &ControlPlane) {
    let i = ids(cp).await;
    let other_gateway = cp
        .ok(MGMT, "CreateGateway", cp.body(json!({"name": "edge"})))
        .await["gateway"]["gateway_id"]
        .as_str()
        .unwrap()
        .to_string();
    let gw_quota = set_gateway_quota_makes_one_per_gateway_and_window(cp, &i, &other_gateway).await;
    let agent_quota = create(
        cp,
        json!({"subject_type": "agent", "subject_id": i.agent, "limit_micros": 10}),
    )
    .await["quota_id"]
        .as_str()
        .unwrap()
        .to_string();

    // Another subject's id: refused by update and remove, naming the field; nothing changes.
    another_subjects_quota_is_refused_and_unchanged(cp, &agent_quota).await;

    // Its own quotas: updated (omitted fields keep) and removed.
    gateway_quotas_are_updated_listed_and_removed(cp, &i, &gw_quota).await;
}

/// Sets a daily quota on `i.gateway` (once) and a disabled one on `other_gateway`: the
/// first's id.
async fn set_gateway_quota_makes_one_per_gateway_and_window(
    cp: &ControlPlane,
    i: &Ids,
    other_gateway: &str,
) -> String {
    let set = cp
        .ok(
            MGMT,
            "SetGatewayQuota",
            cp.body(json!({"gateway_id": i.gateway, "limit_micros": 9_000_000, "window": "daily", "name": "edge spend"})),
        )
        .await["quota"]
        .clone();
    assert_eq!(
        (
            set["subject_type"].as_str(),
            set["subject_id"].as_str(),
            set["window"].as_str(),
            set["enabled"].as_bool()
        ),
        (
            Some("gateway"),
            Some(i.gateway.as_str()),
            Some("daily"),
            Some(true)
        )
    );
    let gw_quota = set["quota_id"].as_str().unwrap().to_string();
    cp.call(
        MGMT,
        "SetGatewayQuota",
        cp.body(json!({"gateway_id": i.gateway, "limit_micros": 1, "window": "daily"})),
    )
    .await
    .expect_error("already_exists", 409);
    cp.call(
        MGMT,
        "SetGatewayQuota",
        cp.body(json!({"gateway_id": uuid::Uuid::new_v4().to_string(), "limit_micros": 1})),
    )
    .await
    .expect_error("not_found", 404);
    cp.ok(
        MGMT,
        "SetGatewayQuota",
        cp.body(json!({"gateway_id": other_gateway, "limit_micros": 5, "disabled": true})),
    )
    .await;
    gw_quota
}

async fn another_subjects_quota_is_refused_and_unchanged(cp: &ControlPlane, agent_quota: &str) {
    for (op, body) in [
        (
            "UpdateGatewayQuota",
            json!({"quota_id": agent_quota, "limit_micros": 1}),
        ),
        ("RemoveGatewayQuota", json!({"quota_id": agent_quota})),
    ] {
        let r = cp.call(MGMT, op, cp.body(body)).await;
        r.expect_error("invalid_argument", 400);
        assert!(
            r.message().contains("quota_id") && r.message().contains("not a gateway quota"),
            "{op}: {}",
            r.message()
        );
    }
    let agent_row = list(cp)
        .await
        .into_iter()
        .find(|q| q["quota_id"] == agent_quota)
        .expect("the agent quota is still there");
    assert_eq!(agent_row["limit_micros"], 10, "unchanged");
}

/// The ids of the gateway quotas `ListGatewayQuotas` lists, of one gateway or all.
async fn listed_gateway_quotas(cp: &ControlPlane, gateway: Option<&str>) -> Vec<String> {
    let body = match gateway {
        Some(g) => json!({"gateway_id": g}),
        None => json!({}),
    };
    cp.ok(MGMT, "ListGatewayQuotas", cp.body(body)).await["quotas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["quota_id"].as_str().unwrap().to_string())
        .collect::<Vec<_>>()
}

async fn gateway_quotas_are_updated_listed_and_removed(cp: &ControlPlane, i: &Ids, gw_quota: &str) {
    let u = cp
        .ok(
            MGMT,
            "UpdateGatewayQuota",
            cp.body(json!({"quota_id": gw_quota, "limit_micros": 7_000_000})),
        )
        .await["quota"]
        .clone();
    assert_eq!(
        (
            u["limit_micros"].as_u64(),
            u["window"].as_str(),
            u["name"].as_str()
        ),
        (Some(7_000_000), Some("daily"), Some("edge spend"))
    );
    assert_eq!(
        listed_gateway_quotas(cp, None).await.len(),
        2,
        "gateway quotas only, disabled included"
    );
    assert_eq!(
        listed_gateway_quotas(cp, Some(&i.gateway)).await,
        vec![gw_quota.to_string()]
    );
    cp.ok(
        MGMT,
        "RemoveGatewayQuota",
        cp.body(json!({"quota_id": gw_quota})),
    )
    .await;
    assert!(listed_gateway_quotas(cp, Some(&i.gateway)).await.is_empty());
    assert_eq!(
        list(cp).await.len(),
        2,
        "the agent quota and the other gateway's remain"
    );
}
