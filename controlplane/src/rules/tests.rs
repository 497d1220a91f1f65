//! Runs every case in `policies/tests/*.yaml`: the agent's compiled bundle, the all-agents
//! grants and any admin policies, validated against the schema, then each case's request
//! through Cedar, checking the decision and the determining policies.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cedar_policy::{Authorizer, Decision, Entities, Entity, PolicySet, Request, Schema};
use portcullis_shared::policy::{self, ActAs, Action, Kind, RequestContext};
use serde::Deserialize;

use super::{check, compile};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    agent: AgentSpec,
    #[serde(default)]
    all_agents_gateways: Vec<String>,
    #[serde(default)]
    models: Vec<ModelSpec>,
    #[serde(default)]
    admin_policies: Option<String>,
    cases: Vec<Case>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentSpec {
    id: String,
    #[serde(default)]
    parent: Option<String>,
    #[serde(default)]
    allowed_gateway_ids: Vec<String>,
    #[serde(default)]
    allowed_pool_names: Vec<String>,
    #[serde(default)]
    allowed_direct_model_names: Vec<String>,
    #[serde(default)]
    allowed_tools: Vec<String>,
    #[serde(default)]
    actas_allowed_groups: Vec<String>,
    #[serde(default)]
    actas_allowed_emails: Vec<String>,
    #[serde(default)]
    actas_allowed_subjects: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelSpec {
    name: String,
    provider: String,
    #[serde(default)]
    tags: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Resource {
    #[serde(rename = "type")]
    kind: String,
    id: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ActAsSpec {
    verified: bool,
    method: String,
    sub: String,
    email: String,
    groups: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    #[serde(default)]
    principal: Option<String>,
    action: String,
    resource: Resource,
    #[serde(default)]
    act_as: Option<ActAsSpec>,
    #[serde(default)]
    gateway_id: Option<String>,
    expect: String,
    #[serde(default)]
    determining: Option<Vec<String>>,
}

fn action(name: &str) -> Action {
    match name {
        "gateway:access" => Action::GatewayAccess,
        "llm:invoke" => Action::LlmInvoke,
        "mcp:discover" => Action::McpDiscover,
        "mcp:call" => Action::McpCall,
        other => panic!("unknown action {other}"),
    }
}

fn resource_entities(file: &CaseFile, r: &Resource) -> (Kind, Vec<Entity>) {
    match r.kind.as_str() {
        "Gateway" => (
            Kind::Gateway,
            vec![policy::gateway_entity(&r.id, &r.id).unwrap()],
        ),
        "Pool" => (Kind::Pool, vec![policy::pool_entity(&r.id).unwrap()]),
        "Model" => {
            let spec = file.models.iter().find(|m| m.name == r.id);
            let (provider, tags) = spec.map_or(("openai", BTreeMap::new()), |m| {
                (m.provider.as_str(), m.tags.clone())
            });
            (
                Kind::Model,
                vec![policy::model_entity(&r.id, provider, &tags).unwrap()],
            )
        }
        "Tool" => {
            let (conn, tool) = r.id.split_once('/').expect("tool ids are connection/tool");
            (
                Kind::Tool,
                policy::tool_entities(conn, tool, "active", false)
                    .unwrap()
                    .to_vec(),
            )
        }
        other => panic!("unknown resource type {other}"),
    }
}

fn run_file(path: &PathBuf) {
    let text = std::fs::read_to_string(path).unwrap();
    let file: CaseFile =
        serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let set = policy_set(&file, path);
    let schema = policy::schema().unwrap();
    for case in &file.cases {
        run_case(&file, case, &set, schema, path);
    }
}

/// The file's policies, validated: the agent's compiled bundle, the all-agents grants and
/// any admin policies.
fn policy_set(file: &CaseFile, path: &Path) -> PolicySet {
    let a = &file.agent;
    let agent_text = compile::agent_policies(&compile::AgentRules {
        agent_id: &a.id,
        gateway_ids: &a.allowed_gateway_ids,
        pools: &a.allowed_pool_names,
        models: &a.allowed_direct_model_names,
        tools: &a.allowed_tools,
        groups: &a.actas_allowed_groups,
        emails: &a.actas_allowed_emails,
        subjects: &a.actas_allowed_subjects,
    });
    let mut policies = Vec::new();
    let agent_prefix = compile::agent_prefix(&a.id);
    check(&agent_prefix, &agent_text)
        .unwrap_or_else(|e| panic!("{}: agent bundle: {e}", path.display()));
    policies.extend(policy::parse_bundle(&agent_prefix, &agent_text).unwrap());
    let gateways_text = compile::all_agents_policies(&file.all_agents_gateways);
    policies.extend(policy::parse_bundle(compile::GATEWAY_PREFIX, &gateways_text).unwrap());
    if let Some(admin) = &file.admin_policies {
        check("bundle/test", admin)
            .unwrap_or_else(|e| panic!("{}: admin policies: {e}", path.display()));
        policies.extend(policy::parse_bundle("bundle/test", admin).unwrap());
    }
    let set = policy::policy_set(policies).unwrap();
    policy::validate(&set).unwrap();
    set
}

/// The case's request through Cedar: no evaluation errors, the expected decision and, when
/// the case names them, the expected determining policies.
fn run_case(file: &CaseFile, case: &Case, set: &PolicySet, schema: &Schema, path: &Path) {
    let (request, entities) = request(file, case, schema, path);
    let response = Authorizer::new().is_authorized(&request, set, &entities);
    let errors: Vec<String> = response
        .diagnostics()
        .errors()
        .map(|e| e.to_string())
        .collect();
    assert!(
        errors.is_empty(),
        "{}: {}: evaluation errors {errors:?}",
        path.display(),
        case.name
    );
    let got = if response.decision() == Decision::Allow {
        "allow"
    } else {
        "deny"
    };
    assert_eq!(got, case.expect, "{}: {}", path.display(), case.name);
    if let Some(expected) = &case.determining {
        let mut ids: Vec<String> = response
            .diagnostics()
            .reason()
            .map(|p| p.to_string())
            .collect();
        ids.sort();
        let mut expected = expected.clone();
        expected.sort();
        assert_eq!(
            ids,
            expected,
            "{}: {}: determining policies",
            path.display(),
            case.name
        );
    }
}

/// The case's Cedar request and its entities: the principal (the file's agent unless the case
/// names another, with the agent's parent), the resource and the request context.
fn request(file: &CaseFile, case: &Case, schema: &Schema, path: &Path) -> (Request, Entities) {
    let a = &file.agent;
    let principal = case.principal.clone().unwrap_or_else(|| a.id.clone());
    let parent = if principal == a.id {
        a.parent.as_deref()
    } else {
        None
    };
    let mut entities = vec![policy::agent_entity(&principal, &principal, parent).unwrap()];
    if let Some(p) = parent {
        entities.push(policy::agent_entity(p, p, None).unwrap());
    }
    let (kind, resource) = resource_entities(file, &case.resource);
    entities.extend(resource);
    let entities = Entities::from_entities(entities, Some(schema)).unwrap();
    let act = action(&case.action);
    let act_as = case.act_as.as_ref().map_or_else(ActAs::default, |s| ActAs {
        present: true,
        verified: s.verified,
        method: s.method.clone(),
        sub: s.sub.clone(),
        email: s.email.clone(),
        groups: s.groups.clone(),
    });
    let surface = if matches!(act, Action::McpCall | Action::McpDiscover) {
        "mcp"
    } else {
        "llm"
    };
    let context = RequestContext {
        act_as,
        gateway_id: case.gateway_id.clone().unwrap_or_else(|| "g1".into()),
        surface,
    }
    .to_cedar()
    .unwrap();
    let request = Request::new(
        policy::uid(Kind::Agent, &principal),
        policy::action_uid(act),
        policy::uid(kind, &case.resource.id),
        context,
        Some(schema),
    )
    .unwrap_or_else(|e| panic!("{}: {}: {e}", path.display(), case.name));
    (request, entities)
}

#[test]
fn policy_cases() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../policies/tests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 3,
        "policy cases missing in {}",
        dir.display()
    );
    for file in &files {
        run_file(file);
    }
}
