//! Compiling snapshots: what a good one yields, and that a bad one is refused whole while the
//! serving snapshot stays.

use std::collections::BTreeMap;

use portcullis_shared::api::agents::AgentStatus;
use portcullis_shared::api::gateways::GatewayState;
use portcullis_shared::api::rules::BundleScope;
use portcullis_shared::api::{AuthMethod, CredentialType};
use portcullis_shared::snapshot::*;
use serde_json::json;

use super::{compile, Runtime};
use crate::llm::table::{Credential, Endpoint, Target, FAILURES_TO_COOL_DOWN};

pub(super) fn snapshot(policies: &str) -> Snapshot {
    Snapshot {
        workspace_id: "w".into(),
        revision: 7,
        deployment_id: "d".into(),
        public_url: "http://gw".into(),
        generated_at: String::new(),
        actas_min_method: Default::default(),
        actas_providers: Vec::new(),
        guards: Vec::new(),
        interactive: Default::default(),
        filter_window_bytes: 0,
        filter_window_tokens: 0,
        gateways: vec![SnapGateway {
            gateway_id: "g1".into(),
            name: "default".into(),
            state: GatewayState::Active,
            is_default: true,
            all_agents: false,
            agent_ids: vec!["a1".into()],
            model_ids: vec!["m1".into()],
            pool_ids: vec!["p1".into()],
            tool_sources: Vec::new(),
            tools: Vec::new(),
        }],
        models: vec![model()],
        pools: vec![SnapPool {
            pool_id: "p1".into(),
            name: "fast".into(),
            strategy: portcullis_shared::api::pools::PoolStrategy::RoundRobin,
            members: vec![SnapPoolMember {
                connection_id: "m1".into(),
                weight: 1,
                priority: 0,
            }],
        }],
        agents: vec![agent()],
        bundles: vec![SnapBundle {
            bundle_id: "b1".into(),
            id_prefix: "bundle/b1".into(),
            scope: BundleScope::Workspace,
            scope_id: None,
            managed: false,
            policies: policies.into(),
        }],
        tools: Vec::new(),
        quotas: Vec::new(),
        token_keys: Vec::new(),
    }
}

/// `gpt`: an OpenAI model with a stored bearer key.
fn model() -> SnapModel {
    let secrets: BTreeMap<String, String> = [(
        "Authorization".to_string(),
        "Bearer sk-test-12345".to_string(),
    )]
    .into();
    SnapModel {
        connection_id: "m1".into(),
        name: "gpt".into(),
        provider: "openai".into(),
        provider_config: json!({"model": "gpt-4o"})
            .as_object()
            .cloned()
            .unwrap_or_default(),
        auth_method: AuthMethod::ApiKey,
        credential_type: CredentialType::Shared,
        secret_values: Secrets(secrets),
        attributes: BTreeMap::new(),
        filter_window_bytes: 0,
        filter_window_tokens: 0,
        oauth_grant: None,
    }
}

/// `bot`: an active agent with one key.
fn agent() -> SnapAgent {
    SnapAgent {
        agent_id: "a1".into(),
        name: "bot".into(),
        status: AgentStatus::Active,
        parent_id: None,
        key_hashes: vec!["abc".into()],
        token_ttl_secs: 600,
        actas_method: None,
        actas_required: false,
        actas_provider_id: None,
        actas_oidc_url: None,
        bound_keys: Vec::new(),
        actas_hmac_secret: None,
    }
}

#[test]
fn a_good_snapshot_compiles_into_routing_and_credentials() {
    let compiled = compile(
        &snapshot("permit (principal, action, resource);"),
        &Runtime::default(),
    )
    .unwrap();
    assert_eq!(compiled.revision, 7);
    let gateway = &compiled.gateways["g1"];
    assert_eq!(gateway.models.target_names, ["fast", "gpt"]);
    let Target::Model(model) = &gateway.models.targets["gpt"].0 else {
        panic!("gpt is a model")
    };
    let Endpoint::OpenAiChat(url) = &model.endpoint else {
        panic!(
            "an OpenAI model is called in OpenAI's shape: {:?}",
            model.endpoint
        )
    };
    assert_eq!(url.as_str(), "https://api.openai.com/v1/chat/completions");
    assert!(matches!(&model.credential, Credential::Headers(h) if h[0].0 == "authorization"));
    assert!(
        model.secret_values.contains(&"sk-test-12345".to_string()),
        "the bare token is scrubbed too"
    );
    assert_eq!(compiled.authn.keys["abc"], 0);
    assert_eq!(
        compiled.authz.slots, 4,
        "two slots for the gateway (llm, mcp), one per target"
    );
}

/// Decisions for people are memoized per person: one admitted, one refused, each answer
/// the same on the second call and never the other's.
#[test]
fn decisions_are_memoized_per_person() {
    use crate::authz::check_memo;
    use crate::authz::LazyContext;
    use portcullis_shared::policy::{ActAs, Action, RequestContext};
    let compiled = compile(
        &snapshot(
            "permit (principal, action, resource);\n\
             forbid (principal, action, resource) unless { context.act_as.sub == \"u1\" };",
        ),
        &Runtime::default(),
    )
    .unwrap();
    let agent = &compiled.authn.agents[0];
    let gateway = &compiled.gateways["g1"];
    let (target, slot) = &gateway.models.targets["gpt"];
    let decide = |sub: &str| {
        let context = LazyContext::new(RequestContext {
            act_as: ActAs {
                present: true,
                verified: true,
                method: "hmac".into(),
                sub: sub.into(),
                ..ActAs::default()
            },
            gateway_id: "g1".into(),
            surface: "llm",
        });
        check_memo(
            &gateway.rules(&compiled, agent),
            Action::LlmInvoke,
            target.uid(),
            &context,
            *slot,
        )
    };
    for _ in 0..2 {
        assert!(decide("u1").is_ok());
        assert!(decide("u2").is_err());
    }
    assert_eq!(agent.rules.identity_memo.read().unwrap().len(), 2);
}

/// An agent naming a provider the snapshot lacks refuses act-as calls itself; the snapshot
/// still applies for everyone else.
#[test]
fn a_missing_act_as_provider_fails_only_its_agent() {
    let mut snap = snapshot("permit (principal, action, resource);");
    snap.agents[0].actas_method = Some(portcullis_shared::api::agents::ActAsMethod::Oidc);
    snap.agents[0].actas_provider_id = Some("gone".into());
    let compiled = compile(&snap, &Runtime::default()).expect("the snapshot applies");
    assert!(compiled.authn.agents[0].act_as.oidc.is_none());
}

#[test]
fn a_bad_policy_refuses_the_whole_snapshot() {
    let errors = compile(
        &snapshot("permit (principal == Svc::User::\"x\", action, resource);"),
        &Runtime::default(),
    )
    .err()
    .expect("refused");
    assert!(errors.iter().any(|e| e.contains("Svc::User")), "{errors:?}");
    let mut dangling = snapshot("permit (principal, action, resource);");
    dangling.pools[0].members[0].connection_id = "missing".into();
    assert!(
        compile(&dangling, &Runtime::default()).is_err(),
        "a pool member outside the snapshot is refused"
    );
}

#[test]
fn health_survives_recompiles() {
    let runtime = Runtime::default();
    let first = compile(&snapshot("permit (principal, action, resource);"), &runtime).unwrap();
    let Target::Model(m) = &first.gateways["g1"].models.targets["gpt"].0 else {
        panic!()
    };
    for _ in 0..FAILURES_TO_COOL_DOWN {
        m.health.record_failure();
    }
    let second = compile(&snapshot("permit (principal, action, resource);"), &runtime).unwrap();
    let Target::Model(m2) = &second.gateways["g1"].models.targets["gpt"].0 else {
        panic!()
    };
    assert!(
        m2.health.is_cooling(),
        "a cooled-down member stays cooled down across snapshots"
    );
}

#[tokio::test]
async fn a_refused_snapshot_leaves_the_serving_one_in_place() {
    let dir = std::env::temp_dir().join(format!("pc-gw-test-{}", std::process::id()));
    let config = crate::Config {
        data_dir: dir,
        ..crate::Config::default()
    };
    let gateway = crate::Gateway::new(config);
    assert!(super::sync::apply(
        &gateway,
        &snapshot("permit (principal, action, resource);")
    ));
    let mut bad = snapshot("forbid (principal, action, resource) when { context.nope };");
    bad.revision = 8;
    assert!(!super::sync::apply(&gateway, &bad));
    assert_eq!(gateway.current().map(|s| s.revision), Some(7));
}

#[test]
fn bundles_are_checked_once_while_their_text_stays_the_same() {
    let runtime = Runtime::default();
    let a = "permit (principal, action, resource);";
    let b = "forbid (principal, action, resource);";
    let first = runtime
        .bundles
        .checked_bundles([("ws/a", a), ("ws/b", b)].into_iter());
    let again = runtime.bundles.checked_bundles(
        [
            ("ws/a", a),
            ("ws/b", "@id(\"x\") forbid (principal, action, resource);"),
        ]
        .into_iter(),
    );
    let (first_a, again_a) = (first[0].as_ref().unwrap(), again[0].as_ref().unwrap());
    assert!(
        std::sync::Arc::ptr_eq(first_a, again_a),
        "an unchanged bundle is not parsed again"
    );
    assert_eq!(
        again[1].as_ref().unwrap().ids().next().unwrap().to_string(),
        "ws/b/x",
        "a changed one is"
    );
    // A bundle the snapshot no longer has is forgotten; a bad one is an error, not cached.
    let later = runtime
        .bundles
        .checked_bundles([("ws/b", b), ("ws/c", "permit (")].into_iter());
    assert!(!std::sync::Arc::ptr_eq(
        later[0].as_ref().unwrap(),
        first[1].as_ref().unwrap()
    ));
    assert!(later[1].is_err());
    let last = runtime.bundles.checked_bundles([("ws/a", a)].into_iter());
    assert!(
        !std::sync::Arc::ptr_eq(last[0].as_ref().unwrap(), first_a),
        "ws/a was forgotten"
    );
}

/// A bundle the snapshot holds twice is checked once, and the bundles after it still get
/// their own policy sets.
#[test]
fn a_bundle_held_twice_does_not_shift_the_others() {
    let runtime = Runtime::default();
    let a = "@id(\"a\") permit (principal, action, resource);";
    let b = "@id(\"b\") forbid (principal, action, resource);";
    let sets = runtime
        .bundles
        .checked_bundles([("ws/a", a), ("ws/a", a), ("ws/b", b)].into_iter());
    let id = |i: usize| {
        let set = sets[i].as_ref().unwrap();
        set.ids().next().unwrap().to_string()
    };
    assert_eq!(
        (id(0), id(1), id(2)),
        ("ws/a/a".into(), "ws/a/a".into(), "ws/b/b".into())
    );
    assert!(std::sync::Arc::ptr_eq(
        sets[0].as_ref().unwrap(),
        sets[1].as_ref().unwrap()
    ));
}

/// A bundle of each scope: the workspace's, the agent's own, the gateway's.
fn scoped(bundle_id: &str, scope: BundleScope, scope_id: Option<&str>, text: &str) -> SnapBundle {
    SnapBundle {
        bundle_id: bundle_id.into(),
        id_prefix: format!("bundle/{bundle_id}"),
        scope,
        scope_id: scope_id.map(Into::into),
        managed: false,
        policies: text.into(),
    }
}

/// The workspace's, the agent's and the gateway's bundles are evaluated side by side and
/// decide as their union would: any matching forbid wins and is named; otherwise any permit
/// allows; otherwise default deny.
#[test]
fn bundles_of_every_scope_decide_as_one_set() {
    use crate::authz::check;
    use crate::authz::LazyContext;
    use portcullis_shared::policy::{Action, RequestContext};
    let decide = |workspace: &str, bundles: Vec<SnapBundle>| {
        let mut snap = snapshot(workspace);
        snap.bundles.extend(bundles);
        let compiled = compile(&snap, &Runtime::default()).unwrap();
        let gateway = &compiled.gateways["g1"];
        let context = LazyContext::new(RequestContext {
            act_as: Default::default(),
            gateway_id: "g1".into(),
            surface: "llm",
        });
        let uid = gateway.models.targets["gpt"].0.uid().clone();
        check(
            &gateway.rules(&compiled, &compiled.authn.agents[0]),
            Action::LlmInvoke,
            &uid,
            &context,
        )
        .map_err(|d| (d.reason_code, d.determining_policy))
    };
    let all = "@id(\"all\") permit (principal, action, resource);";
    let no_gpt =
        "@id(\"no-gpt\") forbid (principal, action == Svc::Action::\"llm:invoke\", resource);";
    assert_eq!(decide(all, Vec::new()), Ok(()));
    assert_eq!(
        decide(
            all,
            vec![scoped("mine", BundleScope::Agent, Some("a1"), no_gpt)]
        ),
        Err(("forbidden", "bundle/mine/no-gpt".to_string()))
    );
    assert_eq!(
        decide(
            all,
            vec![scoped("here", BundleScope::Gateway, Some("g1"), no_gpt)]
        ),
        Err(("forbidden", "bundle/here/no-gpt".to_string()))
    );
    // Another agent's or gateway's bundle does not apply.
    assert_eq!(
        decide(
            all,
            vec![
                scoped("other", BundleScope::Agent, Some("a2"), no_gpt),
                scoped("elsewhere", BundleScope::Gateway, Some("g2"), no_gpt),
            ]
        ),
        Ok(())
    );
    // Without the workspace's permit, the agent's own (or the gateway's) permits; with
    // neither, nothing does.
    let none = "@id(\"none\") forbid (principal, action, resource) when { false };";
    let permit = "permit (principal, action, resource);";
    assert_eq!(
        decide(
            none,
            vec![scoped("mine", BundleScope::Agent, Some("a1"), permit)]
        ),
        Ok(())
    );
    assert_eq!(
        decide(
            none,
            vec![scoped("here", BundleScope::Gateway, Some("g1"), permit)]
        ),
        Ok(())
    );
    assert_eq!(
        decide(none, Vec::new()),
        Err(("no_permit", "default-deny".to_string()))
    );
}

/// Two bundles may not give two policies the same id, even though each is valid alone.
#[test]
fn policy_ids_are_unique_across_bundles() {
    let mut snap = snapshot("@id(\"x\") permit (principal, action, resource);");
    let mut twin = scoped(
        "b1",
        BundleScope::Agent,
        Some("a1"),
        "@id(\"x\") forbid (principal, action, resource);",
    );
    twin.bundle_id = "b2".into();
    snap.bundles.push(twin);
    let errors = compile(&snap, &Runtime::default()).err().unwrap();
    assert!(
        errors.iter().any(|e| e.contains("bundle/b1/x")),
        "{errors:?}"
    );
}
