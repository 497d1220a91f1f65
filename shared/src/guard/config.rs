//! A guard's `kind`, `action` and `config` as the API takes them (DESIGN §16), checked into
//! what the detector runs. The control plane refuses a guard whose config does not pass; the
//! gateway compiles the same config from its snapshot.
//!
//! `regex` `{patterns: [...]}`, `keywords` `{keywords: [...], case_sensitive}`, `pii`
//! `{types: [...]}` (empty = all), `secrets` `{}`. Unknown fields are refused.

use serde_json::{Map, Value};

use super::schema::SchemaGuard;
use super::{max_len, Action, CompileError, Detector, Finds, GuardSpec, Pii};
use crate::api::guards::{GuardKind, GuardStage};

const MAX_PATTERNS: usize = 64;
const MAX_PATTERN_TEXT: usize = 1024;
const MAX_KEYWORDS: usize = 1000;
const MAX_KEYWORD: usize = 256;

fn bad(msg: impl Into<String>) -> CompileError {
    CompileError(msg.into())
}

/// The config object, refusing fields other than `allowed`.
fn fields<'a>(
    kind: &str,
    config: &'a Value,
    allowed: &[&str],
) -> Result<&'a Map<String, Value>, CompileError> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    let map = match config {
        Value::Null => EMPTY.get_or_init(Map::new),
        Value::Object(map) => map,
        _ => return Err(bad(format!("config of a {kind} guard must be an object"))),
    };
    if let Some(unknown) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(bad(format!(
            "config.{unknown} is not a setting of a {kind} guard{}",
            if allowed.is_empty() {
                " (it takes none)".to_string()
            } else {
                format!(" (it takes {})", allowed.join(", "))
            }
        )));
    }
    Ok(map)
}

/// A list of non-empty strings of at most `max_len` bytes, at most `max` of them.
fn strings(
    map: &Map<String, Value>,
    field: &str,
    max: usize,
    max_len: usize,
) -> Result<Vec<String>, CompileError> {
    let Some(Value::Array(items)) = map.get(field) else {
        return Err(bad(format!("config.{field} must be a list of strings")));
    };
    if items.is_empty() || items.len() > max {
        return Err(bad(format!("config.{field} must hold 1 to {max} entries")));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, v)| match v.as_str() {
            Some(s) if !s.is_empty() && s.len() <= max_len => Ok(s.to_string()),
            _ => Err(bad(format!(
                "config.{field}[{i}] must be a string of 1 to {max_len} bytes"
            ))),
        })
        .collect()
}

/// What a guard of `kind` with `config` looks for.
pub fn finds(kind: GuardKind, config: &Value) -> Result<Finds, CompileError> {
    let name = kind.as_str();
    match kind {
        GuardKind::Regex => {
            let map = fields(name, config, &["patterns"])?;
            let patterns = strings(map, "patterns", MAX_PATTERNS, MAX_PATTERN_TEXT)?;
            for p in &patterns {
                max_len(p)?;
            }
            Ok(Finds::Patterns(patterns))
        }
        GuardKind::Keywords => {
            let map = fields(name, config, &["keywords", "case_sensitive"])?;
            let words = strings(map, "keywords", MAX_KEYWORDS, MAX_KEYWORD)?;
            let case_sensitive = match map.get("case_sensitive") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err(bad("config.case_sensitive must be true or false")),
            };
            Ok(Finds::Keywords {
                words,
                case_sensitive,
            })
        }
        GuardKind::Pii => {
            let map = fields(name, config, &["types"])?;
            let types = match map.get("types") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|v| v.as_str().and_then(Pii::parse))
                    .collect::<Option<Vec<Pii>>>()
                    .ok_or_else(|| {
                        let names: Vec<&str> = Pii::ALL.iter().map(|p| p.as_str()).collect();
                        bad(format!("config.types may hold {}", names.join(", ")))
                    })?,
                Some(_) => return Err(bad("config.types must be a list")),
            };
            Ok(Finds::Pii(types))
        }
        GuardKind::Secrets => {
            fields(name, config, &[])?;
            Ok(Finds::Secrets)
        }
        GuardKind::JsonSchema => Err(bad(
            "a json_schema guard checks a tool's result against a schema, not text",
        )),
    }
}

/// A whole guard, checked: its config, and that its patterns compile together.
pub fn guard(
    id: &str,
    name: &str,
    kind: GuardKind,
    action: Action,
    config: &Value,
) -> Result<GuardSpec, CompileError> {
    let spec = GuardSpec {
        id: id.to_string(),
        name: name.to_string(),
        action,
        finds: finds(kind, config)?,
    };
    Detector::compile(vec![spec.clone()])?;
    Ok(spec)
}

/// A guard checked for its stage and compiled: a text guard into what the detector runs, a
/// `json_schema` guard into its validator.
pub enum Checked {
    Text(GuardSpec),
    Schema(SchemaGuard),
}

/// A whole guard of any kind at its stage, checked.
pub fn check(
    id: &str,
    name: &str,
    stage: GuardStage,
    kind: GuardKind,
    action: Action,
    config: &Value,
) -> Result<Checked, CompileError> {
    if kind == GuardKind::JsonSchema {
        if stage != GuardStage::ToolResult {
            return Err(bad(format!(
                "a json_schema guard checks tool results: its stage must be tool_result, not {}",
                stage.as_str()
            )));
        }
        return SchemaGuard::compile(id, name, action, config).map(Checked::Schema);
    }
    guard(id, name, kind, action, config).map(Checked::Text)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn each_kind_takes_its_settings() {
        let guard = |id, name, kind: &str, action: &str, config: &Value| {
            let kind = GuardKind::parse(kind).unwrap();
            let action = Action::parse(action).unwrap();
            super::guard(id, name, kind, action, config)
        };
        let g = guard(
            "g",
            "n",
            "regex",
            "block",
            &json!({"patterns": [r"TICKET-\d{4}"]}),
        );
        assert!(matches!(g.unwrap().finds, Finds::Patterns(p) if p.len() == 1));
        let g = guard(
            "g",
            "n",
            "keywords",
            "redact",
            &json!({"keywords": ["falcon"], "case_sensitive": true}),
        );
        assert!(matches!(
            g.unwrap().finds,
            Finds::Keywords {
                case_sensitive: true,
                ..
            }
        ));
        let g = guard(
            "g",
            "n",
            "pii",
            "redact",
            &json!({"types": ["email", "iban"]}),
        );
        assert!(matches!(g.unwrap().finds, Finds::Pii(t) if t == [Pii::Email, Pii::Iban]));
        assert!(
            matches!(guard("g", "n", "pii", "block", &Value::Null).unwrap().finds, Finds::Pii(t) if t.is_empty())
        );
        assert!(matches!(
            guard("g", "n", "secrets", "block", &json!({}))
                .unwrap()
                .finds,
            Finds::Secrets
        ));
    }

    #[test]
    fn bad_configs_say_what_is_wrong() {
        let err = |kind: &str, action: &str, config: Value| {
            let kind = GuardKind::parse(kind).unwrap();
            let action = Action::parse(action).unwrap();
            guard("g", "n", kind, action, &config).unwrap_err().0
        };
        assert!(err("regex", "block", json!({"patterns": []})).contains("1 to 64"));
        assert!(err("regex", "block", json!({"patterns": [r"\d+"]})).contains("any length"));
        assert!(err("regex", "block", json!({"patterns": ["("]})).contains("does not compile"));
        assert!(err("regex", "block", json!({"pattern": ["x"]})).contains("config.pattern"));
        assert!(err("keywords", "block", json!({"keywords": [""]})).contains("keywords[0]"));
        assert!(err(
            "keywords",
            "block",
            json!({"keywords": ["x"], "case_sensitive": "yes"})
        )
        .contains("true or false"));
        assert!(err("pii", "block", json!({"types": ["passport"]})).contains("email"));
        assert!(err("secrets", "block", json!({"x": 1})).contains("takes none"));
        assert!(err("regex", "block", json!("x")).contains("object"));
    }
}
