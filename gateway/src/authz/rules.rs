//! A rule bundle as the gateway evaluates it. Most policies the control plane compiles from an
//! agent's allow lists are unconditional permits of one principal on one resource: kept as
//! Cedar policies they take about 3.5 KB each (their syntax tree, annotations, text and the
//! policy set's maps), 20,000 of them at 10,000 agents — most of a large gateway's memory.
//! Such permits become [`Grant`]s of a few hundred bytes, matched by comparing ids; every other
//! policy stays in the bundle's Cedar policy set. The decision is the one Cedar reaches on the
//! whole bundle: a permit without `when` or `unless` is satisfied exactly when its scope
//! matches, and its scope cannot error.

use cedar_policy::{
    ActionConstraint, Authorizer, Decision, Effect, Entities, EntityTypeName, EntityUid, Policy,
    PolicyId, PolicySet, PrincipalConstraint, Request, ResourceConstraint,
};
use portcullis_shared::policy::{self, PolicyError};

/// One validated bundle: its grants and a Cedar set of its other policies.
pub struct Rules {
    /// The policies that are not grants; `None` when every policy is one.
    cedar: Option<PolicySet>,
    grants: Box<[Grant]>,
}

/// `permit (principal …, action == A | action in [A, …], resource == R);`
struct Grant {
    id: PolicyId,
    principal: Principal,
    /// The actions it names. The schema declares no action groups, so `action in [A, B]`
    /// is satisfied by A and B alone (a test holds the schema to that).
    actions: Box<[EntityUid]>,
    resource: EntityUid,
}

enum Principal {
    Any,
    Is(EntityTypeName),
    Eq(EntityUid),
}

impl Rules {
    /// Splits a validated bundle's policies into grants and the rest.
    pub fn new(set: PolicySet) -> Result<Self, PolicyError> {
        let (mut grants, mut rest) = (Vec::new(), Vec::new());
        for p in set.policies() {
            match grant(p) {
                Some(g) => grants.push(g),
                None => rest.push(p),
            }
        }
        let cedar = match (grants.is_empty(), rest.is_empty()) {
            (true, _) => Some(set),
            (false, true) => None,
            (false, false) => Some(policy::policy_set(rest.into_iter().cloned())?),
        };
        Ok(Self {
            cedar,
            grants: grants.into(),
        })
    }

    /// A bundle [`policy::plain`] read: grants alone.
    pub fn from_permits(permits: Vec<policy::plain::Permit>) -> Self {
        use policy::plain::Principal as Plain;
        let grants = permits.into_iter().map(|p| Grant {
            id: PolicyId::new(p.id),
            principal: match p.principal {
                Plain::Any => Principal::Any,
                Plain::Is(kind) => Principal::Is(kind.entity_type()),
                Plain::Eq(kind, id) => Principal::Eq(policy::uid(kind, &id)),
            },
            actions: p.actions.into_iter().map(policy::action_uid).collect(),
            resource: policy::uid(p.resource.0, &p.resource.1),
        });
        Self {
            cedar: None,
            grants: grants.collect(),
        }
    }

    /// The policies Cedar evaluates, if any.
    pub fn cedar(&self) -> Option<&PolicySet> {
        self.cedar.as_ref()
    }

    /// Every policy's id, grants first.
    pub fn ids(&self) -> impl Iterator<Item = &PolicyId> {
        let cedar = self
            .cedar
            .iter()
            .flat_map(|set| set.policies().map(Policy::id));
        self.grants.iter().map(|g| &g.id).chain(cedar)
    }

    /// Whether a grant permits this request.
    pub fn grants(&self, principal: &EntityUid, action: &EntityUid, resource: &EntityUid) -> bool {
        self.grants.iter().any(|g| {
            g.resource == *resource
                && g.actions.contains(action)
                && match &g.principal {
                    Principal::Any => true,
                    Principal::Is(type_name) => principal.type_name() == type_name,
                    Principal::Eq(uid) => uid == principal,
                }
        })
    }
}

/// How a request fares against several bundles.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Permitted,
    /// A forbid matched: its id.
    Forbidden(String),
    NoPermit,
}

/// Evaluates the bundles as their union would be: a matching forbid in any of them wins,
/// then any permit (a Cedar one or a grant); default deny.
pub fn decide<'a>(
    bundles: impl Iterator<Item = &'a Rules> + Clone,
    request: &Request,
    entities: &Entities,
) -> Verdict {
    let authorizer = Authorizer::new();
    let responses: Vec<_> = bundles
        .clone()
        .filter_map(Rules::cedar)
        .map(|set| authorizer.is_authorized(request, set, entities))
        .collect();
    for e in responses.iter().flat_map(|r| r.diagnostics().errors()) {
        tracing::debug!(error = %e, "A policy errored during evaluation and was skipped.");
    }
    // A deny with reasons is a matching forbid.
    let forbid = responses
        .iter()
        .filter(|r| r.decision() == Decision::Deny)
        .find_map(|r| r.diagnostics().reason().next());
    if let Some(id) = forbid {
        return Verdict::Forbidden(id.to_string());
    }
    let granted = match (request.principal(), request.action(), request.resource()) {
        (Some(p), Some(a), Some(r)) => bundles.clone().any(|rules| rules.grants(p, a, r)),
        _ => false,
    };
    if granted || responses.iter().any(|r| r.decision() == Decision::Allow) {
        Verdict::Permitted
    } else {
        Verdict::NoPermit
    }
}

/// The policy as a grant, when it is an unconditional permit on one resource.
fn grant(p: &Policy) -> Option<Grant> {
    if p.effect() != Effect::Permit || p.has_non_scope_constraint() || !p.is_static() {
        return None;
    }
    let principal = match p.principal_constraint() {
        PrincipalConstraint::Any => Principal::Any,
        PrincipalConstraint::Is(type_name) => Principal::Is(type_name),
        PrincipalConstraint::Eq(uid) => Principal::Eq(uid),
        PrincipalConstraint::In(_) | PrincipalConstraint::IsIn(..) => return None,
    };
    let actions = match p.action_constraint() {
        ActionConstraint::Eq(uid) => vec![uid],
        ActionConstraint::In(uids) => uids,
        ActionConstraint::Any => return None,
    };
    let ResourceConstraint::Eq(resource) = p.resource_constraint() else {
        return None;
    };
    Some(Grant {
        id: p.id().clone(),
        principal,
        actions: actions.into(),
        resource,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use cedar_policy::Context;
    use portcullis_shared::policy::{action_uid, uid, Action, Kind};

    fn rules(text: &str) -> Rules {
        let set = policy::policy_set(policy::parse_bundle("b", text).unwrap()).unwrap();
        policy::validate(&set).unwrap();
        Rules::new(set).unwrap()
    }

    fn request(principal: &EntityUid, action: Action, resource: &EntityUid) -> Request {
        let action = action_uid(action);
        Request::new(
            principal.clone(),
            action,
            resource.clone(),
            Context::empty(),
            None,
        )
        .unwrap()
    }

    /// Cedar's own answer on the whole text, beside the split bundle's.
    fn both(
        text: &str,
        principal: &EntityUid,
        action: Action,
        resource: &EntityUid,
    ) -> (bool, bool) {
        let set = policy::policy_set(policy::parse_bundle("b", text).unwrap()).unwrap();
        let request = request(principal, action, resource);
        let cedar = Authorizer::new().is_authorized(&request, &set, &Entities::empty());
        let split = rules(text);
        let verdict = decide(std::iter::once(&split), &request, &Entities::empty());
        // A bundle read without Cedar's parser decides the same.
        if let Some(permits) = policy::plain::read_valid("b", text) {
            let plain = Rules::from_permits(permits);
            let plain = decide(std::iter::once(&plain), &request, &Entities::empty());
            assert_eq!(plain, verdict, "{text}");
        }
        (
            cedar.decision() == Decision::Allow,
            verdict == Verdict::Permitted,
        )
    }

    #[test]
    fn unconditional_permits_become_grants_and_decide_as_cedar_does() {
        let text = r#"
            @id("g") permit (principal == Svc::Agent::"a1", action == Svc::Action::"gateway:access", resource == Svc::Gateway::"g1");
            @id("m") permit (principal == Svc::Agent::"a1", action == Svc::Action::"llm:invoke", resource == Svc::Model::"m1");
            @id("t") permit (principal == Svc::Agent::"a1", action in [Svc::Action::"mcp:call", Svc::Action::"mcp:discover"], resource == Svc::Tool::"c/echo");
            @id("all") permit (principal is Svc::Agent, action == Svc::Action::"llm:invoke", resource == Svc::Pool::"p");
            @id("any") permit (principal, action == Svc::Action::"llm:invoke", resource == Svc::Model::"open");
        "#;
        let split = rules(text);
        assert!(split.cedar().is_none(), "every policy here is a grant");
        let plain = Rules::from_permits(policy::plain::read_valid("b", text).unwrap());
        assert!(plain.ids().eq(split.ids()));
        assert_eq!(
            split.ids().map(ToString::to_string).collect::<Vec<_>>(),
            ["b/g", "b/m", "b/t", "b/all", "b/any"]
        );
        let (a1, a2) = (uid(Kind::Agent, "a1"), uid(Kind::Agent, "a2"));
        let cases = [
            (&a1, Action::GatewayAccess, uid(Kind::Gateway, "g1"), true),
            (&a2, Action::GatewayAccess, uid(Kind::Gateway, "g1"), false),
            (&a1, Action::GatewayAccess, uid(Kind::Gateway, "g2"), false),
            (&a1, Action::LlmInvoke, uid(Kind::Model, "m1"), true),
            (&a1, Action::LlmInvoke, uid(Kind::Gateway, "g1"), false),
            (&a1, Action::McpCall, uid(Kind::Tool, "c/echo"), true),
            (&a1, Action::McpDiscover, uid(Kind::Tool, "c/echo"), true),
            (&a2, Action::McpCall, uid(Kind::Tool, "c/echo"), false),
            (&a2, Action::LlmInvoke, uid(Kind::Pool, "p"), true),
            (&a2, Action::LlmInvoke, uid(Kind::Model, "open"), true),
            (&a2, Action::McpCall, uid(Kind::Model, "open"), false),
        ];
        for (principal, action, resource, allowed) in cases {
            let (cedar, split) = both(text, principal, action, &resource);
            assert_eq!(cedar, allowed, "{principal} {action:?} {resource}");
            assert_eq!(split, cedar, "{principal} {action:?} {resource}");
        }
    }

    #[test]
    fn conditions_forbids_and_hierarchies_stay_with_cedar() {
        let text = r#"
            @id("grant") permit (principal == Svc::Agent::"a1", action == Svc::Action::"llm:invoke", resource == Svc::Model::"m1");
            @id("when") permit (principal == Svc::Agent::"a1", action == Svc::Action::"llm:invoke", resource == Svc::Model::"m2") when { context.surface == "llm" };
            @id("in") permit (principal in Svc::Agent::"parent", action == Svc::Action::"llm:invoke", resource == Svc::Model::"m3");
            @id("any-action") permit (principal == Svc::Agent::"a1", action, resource == Svc::Model::"m4");
            @id("any-resource") permit (principal == Svc::Agent::"a1", action == Svc::Action::"llm:invoke", resource);
            @id("forbid") forbid (principal == Svc::Agent::"a1", action == Svc::Action::"llm:invoke", resource == Svc::Model::"m5");
        "#;
        let split = rules(text);
        let kept: Vec<String> = split
            .cedar()
            .unwrap()
            .policies()
            .map(|p| p.id().to_string())
            .collect();
        assert_eq!(kept.len(), 5, "{kept:?}");
        assert!(!kept.contains(&"b/grant".to_string()), "{kept:?}");
        assert_eq!(split.ids().count(), 6);
    }

    #[test]
    fn a_bundle_without_grants_keeps_its_policy_set() {
        let split = rules(r#"@id("f") forbid (principal, action, resource);"#);
        assert_eq!(split.cedar().unwrap().policies().count(), 1);
        assert!(!split.grants(
            &uid(Kind::Agent, "a1"),
            &action_uid(Action::LlmInvoke),
            &uid(Kind::Model, "m1")
        ));
    }

    #[test]
    fn a_forbid_in_any_bundle_wins_over_a_grant() {
        let grant = rules(
            r#"@id("m") permit (principal == Svc::Agent::"a1", action == Svc::Action::"llm:invoke", resource == Svc::Model::"m1");"#,
        );
        let forbid =
            rules(r#"@id("no-m1") forbid (principal, action, resource == Svc::Model::"m1");"#);
        let (a1, m1, m2) = (
            uid(Kind::Agent, "a1"),
            uid(Kind::Model, "m1"),
            uid(Kind::Model, "m2"),
        );
        let ask = |resource: &EntityUid, bundles: &[&Rules]| {
            let request = request(&a1, Action::LlmInvoke, resource);
            decide(bundles.iter().copied(), &request, &Entities::empty())
        };
        assert_eq!(ask(&m1, &[&grant]), Verdict::Permitted);
        assert_eq!(
            ask(&m1, &[&grant, &forbid]),
            Verdict::Forbidden("b/no-m1".into())
        );
        assert_eq!(
            ask(&m1, &[&forbid, &grant]),
            Verdict::Forbidden("b/no-m1".into())
        );
        assert_eq!(ask(&m2, &[&grant, &forbid]), Verdict::NoPermit);
    }

    /// `action in [A, B]` is read as "A or B"; an action group in the schema would break that.
    #[test]
    fn the_schema_declares_no_action_groups() {
        let actions = policy::schema().unwrap().action_entities().unwrap();
        for entity in actions.iter() {
            let (uid, _, parents) = entity.clone().into_inner();
            assert!(parents.is_empty(), "action {uid} is in {parents:?}");
        }
    }
}
