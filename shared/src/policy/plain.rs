//! The permits the control plane writes for allow lists, read without Cedar's parser.
//!
//! A workspace of 10,000 agents ships 10,000 managed bundles, each a few lines like
//!
//! ```text
//! @id("gateway/g1")
//! permit (principal == Svc::Agent::"a1", action == Svc::Action::"gateway:access", resource == Svc::Gateway::"g1");
//! ```
//!
//! and running Cedar's parser and validator on each was most of a gateway's first compile.
//! [`read`] accepts a strict subset of Cedar: whole bundles of such unconditional permits
//! (principal unconstrained, `is` a type or `==` one entity; `action ==` one action or `in`
//! a list; `resource ==` one entity; at most an `@id` annotation; string literals without
//! escapes), and gives up (`None`) on anything else, which then takes Cedar's own path. What
//! it accepts it reads as Cedar would; a property test holds the two to that.
//!
//! Strict validation of such a permit depends on its entity types and actions alone, not on
//! the entity ids (the schema has no enumerated entity types), so each shape is validated once,
//! as Cedar text with placeholder ids, and remembered ([`read_valid`]).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::{Action, Kind};

/// One unconditional permit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permit {
    /// The qualified id, as [`super::parse_bundle`] gives it.
    pub id: String,
    pub principal: Principal,
    pub actions: Vec<Action>,
    pub resource: (Kind, String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    Any,
    Is(Kind),
    Eq(Kind, String),
}

/// What strict validation of a permit depends on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Shape {
    principal: Option<(Kind, bool)>,
    actions: Vec<Action>,
    resource: Kind,
}

/// The bundle's permits when every policy in it is one and every shape validates against the
/// schema; `None` sends the bundle through Cedar's parser and validator.
pub fn read_valid(prefix: &str, text: &str) -> Option<Vec<Permit>> {
    let permits = read(prefix, text)?;
    permits
        .iter()
        .all(|p| shape_valid(shape(p)))
        .then_some(permits)
}

/// The bundle's permits when every policy in it is one, with [`super::parse_bundle`]'s ids;
/// `None` when anything in it is outside the subset, or an id repeats.
pub fn read(prefix: &str, text: &str) -> Option<Vec<Permit>> {
    let mut cursor = Cursor { rest: text };
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    cursor.space();
    while !cursor.rest.is_empty() {
        let (annotation, permit) = cursor.permit()?;
        let local = annotation.map_or_else(|| out.len().to_string(), str::to_string);
        let id = format!("{prefix}/{local}");
        if !seen.insert(id.clone()) {
            return None;
        }
        let (principal, actions, resource) = permit;
        out.push(Permit {
            id,
            principal,
            actions,
            resource,
        });
        cursor.space();
    }
    (!out.is_empty()).then_some(out)
}

fn shape(p: &Permit) -> Shape {
    Shape {
        principal: match &p.principal {
            Principal::Any => None,
            Principal::Is(kind) => Some((*kind, false)),
            Principal::Eq(kind, _) => Some((*kind, true)),
        },
        actions: p.actions.clone(),
        resource: p.resource.0,
    }
}

/// Whether Cedar's strict validation accepts this shape, asked once per shape.
fn shape_valid(shape: Shape) -> bool {
    static VALID: OnceLock<Mutex<HashMap<Shape, bool>>> = OnceLock::new();
    let cache = VALID.get_or_init(Default::default);
    if let Some(valid) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&shape) {
        return *valid;
    }
    let valid = super::parse_bundle("shape", &shape_text(&shape))
        .and_then(super::policy_set)
        .and_then(|set| super::validate(&set))
        .is_ok();
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(shape, valid);
    valid
}

/// The shape as a Cedar permit with placeholder ids.
fn shape_text(shape: &Shape) -> String {
    let principal = match shape.principal {
        None => "principal".to_string(),
        Some((kind, false)) => format!("principal is {}", kind.type_name()),
        Some((kind, true)) => format!("principal == {}", super::cedar_ref(kind, "x")),
    };
    let actions: Vec<String> = shape.actions.iter().map(|a| a.cedar()).collect();
    let action = match actions.as_slice() {
        [one] => format!("action == {one}"),
        many => format!("action in [{}]", many.join(", ")),
    };
    let resource = super::cedar_ref(shape.resource, "x");
    format!("permit ({principal}, {action}, resource == {resource});")
}

type Scope = (Principal, Vec<Action>, (Kind, String));

/// What is left of the text, read front to back.
struct Cursor<'a> {
    rest: &'a str,
}

impl<'a> Cursor<'a> {
    /// `[@id("…")] permit ( principal…, action…, resource… ) ;`
    fn permit(&mut self) -> Option<(Option<&'a str>, Scope)> {
        let annotation = if self.token("@id(") {
            self.space();
            let value = self.string()?;
            self.space();
            self.expect(")")?;
            self.space();
            Some(value)
        } else {
            None
        };
        self.word("permit")?;
        self.punct("(")?;
        let principal = self.principal()?;
        self.punct(",")?;
        let actions = self.actions()?;
        self.punct(",")?;
        self.word("resource")?;
        self.punct("==")?;
        let resource = self.entity()?;
        self.punct(")")?;
        self.punct(";")?;
        Some((annotation, (principal, actions, resource)))
    }

    fn principal(&mut self) -> Option<Principal> {
        self.word("principal")?;
        if self.word("is").is_some() {
            return Some(Principal::Is(self.kind()?));
        }
        if self.punct("==").is_some() {
            let (kind, id) = self.entity()?;
            return Some(Principal::Eq(kind, id));
        }
        Some(Principal::Any)
    }

    fn actions(&mut self) -> Option<Vec<Action>> {
        self.word("action")?;
        if self.punct("==").is_some() {
            return Some(vec![self.action()?]);
        }
        self.word("in")?;
        self.punct("[")?;
        let mut out = vec![self.action()?];
        while self.punct(",").is_some() {
            out.push(self.action()?);
        }
        self.punct("]")?;
        Some(out)
    }

    fn action(&mut self) -> Option<Action> {
        self.space();
        self.token("Svc::Action::").then_some(())?;
        let name = self.string()?;
        Action::ALL.into_iter().find(|a| a.name() == name)
    }

    /// `Svc::Kind::"id"`
    fn entity(&mut self) -> Option<(Kind, String)> {
        let kind = self.kind()?;
        self.token("::").then_some(())?;
        Some((kind, self.string()?.to_string()))
    }

    fn kind(&mut self) -> Option<Kind> {
        self.space();
        let kind = Kind::ALL.into_iter().find(|k| {
            self.rest
                .strip_prefix(k.type_name())
                .is_some_and(|after| !after.starts_with(ident_char))
        })?;
        self.rest = &self.rest[kind.type_name().len()..];
        Some(kind)
    }

    /// A string literal without escapes or control characters; its content.
    fn string(&mut self) -> Option<&'a str> {
        let body = self.rest.strip_prefix('"')?;
        let end = body.find(['"', '\\'])?;
        let (content, after) = body.split_at(end);
        if !after.starts_with('"') || content.chars().any(char::is_control) {
            return None;
        }
        self.rest = &after[1..];
        Some(content)
    }

    /// A keyword or identifier, after optional space, not followed by an identifier character.
    fn word(&mut self, word: &str) -> Option<()> {
        self.space();
        let after = self.rest.strip_prefix(word)?;
        if after.starts_with(ident_char) {
            return None;
        }
        self.rest = after;
        Some(())
    }

    /// Punctuation, after optional space.
    fn punct(&mut self, p: &str) -> Option<()> {
        self.space();
        self.expect(p)
    }

    fn expect(&mut self, s: &str) -> Option<()> {
        self.token(s).then_some(())
    }

    fn token(&mut self, s: &str) -> bool {
        match self.rest.strip_prefix(s) {
            Some(after) => {
                self.rest = after;
                true
            }
            None => false,
        }
    }

    fn space(&mut self) {
        self.rest = self.rest.trim_start_matches([' ', '\t', '\n', '\r']);
    }
}

fn ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

#[doc(hidden)]
pub mod oracle;
#[cfg(test)]
#[path = "plain_tests.rs"]
mod tests;
