//! What Cedar itself makes of a bundle, in the plain reader's terms: the oracle the reader is
//! held to by its property test (`plain_tests.rs`) and its fuzz target (`fuzz/`). Not used by
//! the product.

use cedar_policy::{ActionConstraint, Effect, EntityUid, PrincipalConstraint, ResourceConstraint};

use super::{Permit, Principal};
use crate::policy::{parse_bundle, policy_set, validate, Action, Kind, PolicyError};

/// The bundle as Cedar reads it, one entry per policy: `None` for a policy that is not an
/// unconditional permit of the reader's subset; `Err` when Cedar does not parse it.
pub fn cedar_view(prefix: &str, text: &str) -> Result<Vec<Option<Permit>>, PolicyError> {
    let policies = parse_bundle(prefix, text)?;
    Ok(policies.iter().map(view).collect())
}

/// Whether Cedar parses and validates the bundle.
pub fn valid_in_cedar(prefix: &str, text: &str) -> bool {
    parse_bundle(prefix, text)
        .and_then(policy_set)
        .and_then(|set| validate(&set))
        .is_ok()
}

fn entity(uid: EntityUid) -> Option<(Kind, String)> {
    let name = uid.type_name().to_string();
    let kind = Kind::ALL.into_iter().find(|k| k.type_name() == name)?;
    Some((kind, uid.id().unescaped().to_string()))
}

fn action(uid: EntityUid) -> Option<Action> {
    let type_ok = uid.type_name().to_string() == "Svc::Action";
    let name = uid.id().unescaped().to_string();
    Action::ALL
        .into_iter()
        .find(|a| type_ok && a.name() == name)
}

fn view(p: &cedar_policy::Policy) -> Option<Permit> {
    if p.effect() != Effect::Permit || p.has_non_scope_constraint() {
        return None;
    }
    let principal = match p.principal_constraint() {
        PrincipalConstraint::Any => Principal::Any,
        PrincipalConstraint::Is(t) => Principal::Is(
            Kind::ALL
                .into_iter()
                .find(|k| k.type_name() == t.to_string())?,
        ),
        PrincipalConstraint::Eq(uid) => {
            let (kind, id) = entity(uid)?;
            Principal::Eq(kind, id)
        }
        _ => return None,
    };
    let actions = match p.action_constraint() {
        ActionConstraint::Eq(uid) => vec![action(uid)?],
        ActionConstraint::In(uids) => uids.into_iter().map(action).collect::<Option<_>>()?,
        ActionConstraint::Any => return None,
    };
    let ResourceConstraint::Eq(resource) = p.resource_constraint() else {
        return None;
    };
    Some(Permit {
        id: AsRef::<str>::as_ref(p.id()).to_string(),
        principal,
        actions,
        resource: entity(resource)?,
    })
}
