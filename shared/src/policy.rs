//! The Cedar side of authorization shared by the control plane (which validates bundles) and
//! the gateway (which evaluates them): the schema, entity and action ids, bundle parsing with
//! qualified policy ids, and the typed request context.

use std::str::FromStr;
use std::sync::OnceLock;

use std::collections::{HashMap, HashSet};

use cedar_policy::{
    Context, Entity, EntityId, EntityTypeName, EntityUid, Policy, PolicyId, PolicySet,
    RestrictedExpression, Schema, ValidationMode, Validator,
};

pub mod depth;
pub mod plain;

/// The schema text, shipped in `policies/schema.cedarschema`.
pub const SCHEMA_TEXT: &str = include_str!("../../policies/schema.cedarschema");

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("the shipped Cedar schema does not parse: {0}")]
    Schema(String),
    #[error("the policies do not parse: {0}")]
    Parse(String),
    #[error("the policies do not validate against the schema: {0}")]
    Invalid(String),
    #[error("policy templates are not supported in rule bundles")]
    Template,
    #[error("policy id {0} is used twice")]
    DuplicateId(String),
}

/// The parsed schema, built once.
pub fn schema() -> Result<&'static Schema, PolicyError> {
    static SCHEMA: OnceLock<Result<Schema, String>> = OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            Schema::from_cedarschema_str(SCHEMA_TEXT)
                .map(|(schema, _warnings)| schema)
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| PolicyError::Schema(e.clone()))
}

/// Entity types of the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Agent,
    Gateway,
    Model,
    Pool,
    ToolConnection,
    Tool,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::Agent,
        Kind::Gateway,
        Kind::Model,
        Kind::Pool,
        Kind::ToolConnection,
        Kind::Tool,
    ];

    pub fn type_name(self) -> &'static str {
        match self {
            Kind::Agent => "Svc::Agent",
            Kind::Gateway => "Svc::Gateway",
            Kind::Model => "Svc::Model",
            Kind::Pool => "Svc::Pool",
            Kind::ToolConnection => "Svc::ToolConnection",
            Kind::Tool => "Svc::Tool",
        }
    }

    /// The type as Cedar's name, parsed once.
    pub fn entity_type(self) -> EntityTypeName {
        type_name(self.type_name())
    }
}

/// Actions of the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    GatewayAccess,
    LlmInvoke,
    McpDiscover,
    McpCall,
}

impl Action {
    pub const ALL: [Action; 4] = [
        Action::GatewayAccess,
        Action::LlmInvoke,
        Action::McpDiscover,
        Action::McpCall,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Action::GatewayAccess => "gateway:access",
            Action::LlmInvoke => "llm:invoke",
            Action::McpDiscover => "mcp:discover",
            Action::McpCall => "mcp:call",
        }
    }

    /// The action as Cedar text: `Svc::Action::"llm:invoke"`.
    pub fn cedar(self) -> String {
        format!("Svc::Action::{}", quote(self.name()))
    }
}

/// Quotes a string as a Cedar string literal.
pub fn quote(s: &str) -> String {
    format!("\"{}\"", s.escape_default())
}

/// An entity reference as Cedar text: `Svc::Pool::"gpt"`.
pub fn cedar_ref(kind: Kind, id: &str) -> String {
    format!("{}::{}", kind.type_name(), quote(id))
}

/// An entity uid.
pub fn uid(kind: Kind, id: &str) -> EntityUid {
    EntityUid::from_type_name_and_id(type_name(kind.type_name()), EntityId::new(id))
}

/// An action uid.
pub fn action_uid(action: Action) -> EntityUid {
    EntityUid::from_type_name_and_id(type_name("Svc::Action"), EntityId::new(action.name()))
}

/// Parsed once per name; the names are this module's constants.
fn type_name(name: &'static str) -> EntityTypeName {
    static CACHE: OnceLock<std::sync::Mutex<HashMap<&'static str, EntityTypeName>>> =
        OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut map = cache.lock().unwrap_or_else(|e| e.into_inner());
    map.entry(name)
        .or_insert_with(|| parse_type_name(name))
        .clone()
}

#[allow(clippy::expect_used)] // constants of this module; `type_names_parse` checks each one
fn parse_type_name(name: &str) -> EntityTypeName {
    EntityTypeName::from_str(name).expect("the schema's type names parse")
}

/// Parses a bundle's Cedar text and gives every policy a qualified id:
/// `{prefix}/{@id annotation}` when it has one, else `{prefix}/{position}`.
pub fn parse_bundle(prefix: &str, text: &str) -> Result<Vec<Policy>, PolicyError> {
    let parsed = PolicySet::from_str(text).map_err(|e| PolicyError::Parse(render(&e)))?;
    if parsed.templates().next().is_some() {
        return Err(PolicyError::Template);
    }
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    // `policies()` does not promise source order; sort by the parser's ids (policy0, policy1…).
    let mut policies: Vec<&Policy> = parsed.policies().collect();
    policies.sort_by_key(|p| {
        p.id()
            .to_string()
            .trim_start_matches("policy")
            .parse::<u64>()
            .ok()
    });
    for (i, policy) in policies.into_iter().enumerate() {
        let local = policy
            .annotation("id")
            .map_or_else(|| i.to_string(), str::to_string);
        let id = format!("{prefix}/{local}");
        if !seen.insert(id.clone()) {
            return Err(PolicyError::DuplicateId(id));
        }
        out.push(policy.new_id(PolicyId::new(id)));
    }
    Ok(out)
}

/// Builds a policy set from already-parsed policies.
pub fn policy_set(policies: impl IntoIterator<Item = Policy>) -> Result<PolicySet, PolicyError> {
    let mut set = PolicySet::new();
    for policy in policies {
        let id = policy.id().to_string();
        set.add(policy).map_err(|_| PolicyError::DuplicateId(id))?;
    }
    Ok(set)
}

/// A bundle parsed and validated.
pub enum Checked {
    /// Wholly unconditional permits, read by [`plain`] without Cedar's parser.
    Permits(Vec<plain::Permit>),
    /// Cedar's policy set, and its qualified ids in source order.
    Cedar {
        set: Box<PolicySet>,
        ids: Vec<String>,
    },
}

impl Checked {
    /// The qualified policy ids in source order, as Cedar displays them.
    pub fn ids(&self) -> Vec<String> {
        match self {
            Checked::Permits(permits) => permits
                .iter()
                .map(|p| PolicyId::new(&p.id).to_string())
                .collect(),
            Checked::Cedar { ids, .. } => ids.clone(),
        }
    }
}

/// Parses a bundle with qualified ids and validates it against the schema: a bundle of
/// unconditional permits through [`plain`], any other through Cedar's parser, once its nesting
/// is known to be within [`depth`]'s bounds, on a thread with room for Cedar's recursion.
pub fn check_bundle(prefix: &str, text: &str) -> Result<Checked, PolicyError> {
    if let Some(permits) = plain::read_valid(prefix, text) {
        return Ok(Checked::Permits(permits));
    }
    depth::check(text).map_err(PolicyError::Parse)?;
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("cedar-check".into())
            .stack_size(CEDAR_STACK_BYTES)
            .spawn_scoped(scope, || check_with_cedar(prefix, text))
            .map_err(|e| PolicyError::Invalid(format!("checking the bundle failed: {e}")))?
            .join()
            .unwrap_or_else(|_| Err(PolicyError::Invalid("checking the bundle failed".into())))
    })
}

/// Stack for Cedar's parser and validator: far more than text within [`depth`]'s bounds
/// needs, and only touched as it is used.
const CEDAR_STACK_BYTES: usize = 64 * 1024 * 1024;

fn check_with_cedar(prefix: &str, text: &str) -> Result<Checked, PolicyError> {
    let policies = parse_bundle(prefix, text)?;
    let ids = policies.iter().map(|p| p.id().to_string()).collect();
    let set = policy_set(policies)?;
    validate(&set)?;
    Ok(Checked::Cedar {
        set: Box::new(set),
        ids,
    })
}

/// Validates a policy set against the schema in strict mode.
pub fn validate(set: &PolicySet) -> Result<(), PolicyError> {
    let result = validator()?.validate(set, ValidationMode::Strict);
    if result.validation_passed() {
        return Ok(());
    }
    let messages: Vec<String> = result.validation_errors().map(render).collect();
    Err(PolicyError::Invalid(messages.join("; ")))
}

/// The validator for the schema, built once.
fn validator() -> Result<&'static Validator, PolicyError> {
    static VALIDATOR: OnceLock<Result<Validator, PolicyError>> = OnceLock::new();
    VALIDATOR
        .get_or_init(|| Ok(Validator::new(schema()?.clone())))
        .as_ref()
        .map_err(Clone::clone)
}

/// Renders a Cedar error on one line.
fn render(e: &impl std::fmt::Display) -> String {
    e.to_string().replace('\n', " ")
}

fn attrs<const N: usize>(
    pairs: [(&str, RestrictedExpression); N],
) -> HashMap<String, RestrictedExpression> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn entity_error(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// An agent, with its parent agent when it has one.
pub fn agent_entity(id: &str, name: &str, parent: Option<&str>) -> Result<Entity, String> {
    let parents: HashSet<EntityUid> = parent.map(|p| uid(Kind::Agent, p)).into_iter().collect();
    let attrs = attrs([("name", RestrictedExpression::new_string(name.to_string()))]);
    Entity::new(uid(Kind::Agent, id), attrs, parents).map_err(entity_error)
}

pub fn gateway_entity(id: &str, name: &str) -> Result<Entity, String> {
    let attrs = attrs([("name", RestrictedExpression::new_string(name.to_string()))]);
    Entity::new(uid(Kind::Gateway, id), attrs, HashSet::new()).map_err(entity_error)
}

/// A model connection, by name; its `attributes` become tags.
pub fn model_entity<'a>(
    name: &str,
    provider: &str,
    tags: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Result<Entity, String> {
    let attrs = attrs([
        ("name", RestrictedExpression::new_string(name.to_string())),
        (
            "provider",
            RestrictedExpression::new_string(provider.to_string()),
        ),
    ]);
    let tags = tags
        .into_iter()
        .map(|(k, v)| (k.clone(), RestrictedExpression::new_string(v.clone())));
    Entity::new_with_tags(uid(Kind::Model, name), attrs, HashSet::new(), tags).map_err(entity_error)
}

pub fn pool_entity(name: &str) -> Result<Entity, String> {
    let attrs = attrs([("name", RestrictedExpression::new_string(name.to_string()))]);
    Entity::new(uid(Kind::Pool, name), attrs, HashSet::new()).map_err(entity_error)
}

/// A tool connection, by name.
pub fn tool_connection_entity(connection: &str) -> Result<Entity, String> {
    let conn_attrs = attrs([(
        "name",
        RestrictedExpression::new_string(connection.to_string()),
    )]);
    Entity::new(
        uid(Kind::ToolConnection, connection),
        conn_attrs,
        HashSet::new(),
    )
    .map_err(entity_error)
}

/// One operation of a tool connection, `connection/tool`, inside its connection.
pub fn tool_entity(
    connection: &str,
    tool: &str,
    status: &str,
    write: bool,
) -> Result<Entity, String> {
    let tool_attrs = attrs([
        ("name", RestrictedExpression::new_string(tool.to_string())),
        (
            "status",
            RestrictedExpression::new_string(status.to_string()),
        ),
        ("write", RestrictedExpression::new_bool(write)),
    ]);
    let parents = [uid(Kind::ToolConnection, connection)]
        .into_iter()
        .collect();
    Entity::new(
        uid(Kind::Tool, &format!("{connection}/{tool}")),
        tool_attrs,
        parents,
    )
    .map_err(entity_error)
}

/// A tool connection and one of its operations.
pub fn tool_entities(
    connection: &str,
    tool: &str,
    status: &str,
    write: bool,
) -> Result<[Entity; 2], String> {
    Ok([
        tool_connection_entity(connection)?,
        tool_entity(connection, tool, status, write)?,
    ])
}

/// Who the agent acts for on this request, as Cedar sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ActAs {
    pub present: bool,
    pub verified: bool,
    pub method: String,
    pub sub: String,
    pub email: String,
    pub groups: Vec<String>,
}

impl ActAs {
    /// The person a key is bound to (act-as `bound`): set on the server, so verified.
    pub fn bound(subject: crate::api::agents::BoundSubject) -> Self {
        Self {
            present: true,
            verified: true,
            method: "bound".into(),
            sub: subject.sub,
            email: subject.email,
            groups: subject.groups,
        }
    }

    /// The person who signed in from an MCP client under an interactive grant: verified by
    /// the agent's OpenID provider when they signed in.
    pub fn interactive(subject: crate::api::agents::BoundSubject) -> Self {
        Self {
            method: INTERACTIVE.into(),
            ..Self::bound(subject)
        }
    }

    pub fn is_interactive(&self) -> bool {
        self.method == INTERACTIVE
    }
}

/// The act-as method of a person signed in under an interactive grant.
pub const INTERACTIVE: &str = "interactive";

/// The request context of every authorization call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestContext {
    pub act_as: ActAs,
    pub gateway_id: String,
    /// `llm` or `mcp`.
    pub surface: &'static str,
}

impl RequestContext {
    /// Builds the Cedar context from typed values (no JSON round trip).
    pub fn to_cedar(&self) -> Result<Context, String> {
        let act_as = RestrictedExpression::new_record([
            (
                "present".to_string(),
                RestrictedExpression::new_bool(self.act_as.present),
            ),
            (
                "verified".to_string(),
                RestrictedExpression::new_bool(self.act_as.verified),
            ),
            (
                "method".to_string(),
                RestrictedExpression::new_string(self.act_as.method.clone()),
            ),
            (
                "sub".to_string(),
                RestrictedExpression::new_string(self.act_as.sub.clone()),
            ),
            (
                "email".to_string(),
                RestrictedExpression::new_string(self.act_as.email.clone()),
            ),
            (
                "groups".to_string(),
                RestrictedExpression::new_set(
                    self.act_as
                        .groups
                        .iter()
                        .cloned()
                        .map(RestrictedExpression::new_string),
                ),
            ),
        ])
        .map_err(|e| e.to_string())?;
        Context::from_pairs([
            ("act_as".to_string(), act_as),
            (
                "gateway_id".to_string(),
                RestrictedExpression::new_string(self.gateway_id.clone()),
            ),
            (
                "surface".to_string(),
                RestrictedExpression::new_string(self.surface.to_string()),
            ),
        ])
        .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_schema_parses() {
        assert!(schema().is_ok(), "{:?}", schema().err());
    }

    #[test]
    fn type_names_parse() {
        for kind in Kind::ALL {
            assert_eq!(uid(kind, "x").type_name().to_string(), kind.type_name());
        }
        assert_eq!(
            action_uid(Action::LlmInvoke).to_string(),
            r#"Svc::Action::"llm:invoke""#
        );
    }

    #[test]
    fn bundle_ids_use_annotations_or_positions() {
        let text = r#"
            @id("allow-gpt")
            permit(principal, action == Svc::Action::"llm:invoke", resource == Svc::Pool::"gpt");
            forbid(principal, action, resource) when { context.surface == "mcp" };
        "#;
        let policies = parse_bundle("bundle/b1", text).unwrap();
        let ids: Vec<String> = policies.iter().map(|p| p.id().to_string()).collect();
        assert_eq!(ids, ["bundle/b1/allow-gpt", "bundle/b1/1"]);
        validate(&policy_set(policies).unwrap()).unwrap();
    }

    #[test]
    fn unknown_entity_types_fail_validation_with_cedar_message() {
        let policies = parse_bundle(
            "b",
            r#"permit(principal == Svc::User::"x", action, resource);"#,
        )
        .unwrap();
        let err = validate(&policy_set(policies).unwrap()).unwrap_err();
        assert!(err.to_string().contains("Svc::User"), "{err}");
    }

    #[test]
    fn syntax_errors_are_parse_errors() {
        assert!(matches!(
            parse_bundle("b", "permit(principal"),
            Err(PolicyError::Parse(_))
        ));
    }

    #[test]
    fn duplicate_annotation_ids_are_refused() {
        let text = r#"@id("a") permit(principal, action, resource);
                      @id("a") forbid(principal, action, resource);"#;
        assert!(matches!(
            parse_bundle("b", text),
            Err(PolicyError::DuplicateId(_))
        ));
    }

    #[test]
    fn quoting_escapes_cedar_specials() {
        assert_eq!(quote(r#"a"b\c"#), r#""a\"b\\c""#);
    }
}
