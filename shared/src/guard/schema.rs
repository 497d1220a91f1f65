//! `json_schema` guards: a tool's result must conform to a JSON Schema. The schema is
//! compiled once; its `pattern` keywords run on the linear-time `regex` engine (never a
//! backtracking one) and it may not reach outside itself (no remote or file `$ref`). What
//! does not conform is where the guard matches: a `block` guard fails the call, a `redact`
//! guard replaces each offending part with `[REDACTED:json_schema]`.

use serde_json::Value;

use super::{Action, CompileError};

/// The largest schema a guard may hold, serialized.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;

/// What a redacted part becomes.
pub const REDACTED: &str = "[REDACTED:json_schema]";

pub struct SchemaGuard {
    pub id: String,
    pub name: String,
    pub action: Action,
    /// The operations whose results the schema is for; empty: every operation in scope.
    operations: Vec<String>,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for SchemaGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaGuard")
            .field("id", &self.id)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl SchemaGuard {
    /// Compiles `config`: `{"schema": {...}, "operations": [...]}` (`operations` optional).
    pub fn compile(
        id: &str,
        name: &str,
        action: Action,
        config: &Value,
    ) -> Result<Self, CompileError> {
        let bad = |m: String| CompileError(m);
        let Some(map) = config.as_object() else {
            return Err(bad("config of a json_schema guard must be an object".into()));
        };
        if let Some(unknown) = map.keys().find(|k| *k != "schema" && *k != "operations") {
            return Err(bad(format!(
                "config.{unknown} is not a setting of a json_schema guard (it takes schema, \
                 operations)"
            )));
        }
        let operations = match map.get("operations") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) if items.len() <= 100 => items
                .iter()
                .map(|v| v.as_str().filter(|s| !s.is_empty()).map(str::to_string))
                .collect::<Option<Vec<String>>>()
                .ok_or_else(|| bad("config.operations must hold operation names".into()))?,
            Some(_) => {
                return Err(bad(
                    "config.operations must be a list of at most 100 operation names".into(),
                ))
            }
        };
        let schema = match map.get("schema") {
            Some(s @ (Value::Object(_) | Value::Bool(_))) => s,
            _ => return Err(bad("config.schema must be a JSON Schema (an object)".into())),
        };
        if schema.to_string().len() > MAX_SCHEMA_BYTES {
            return Err(bad(format!(
                "config.schema is larger than {MAX_SCHEMA_BYTES} bytes"
            )));
        }
        let validator = jsonschema::options()
            .with_pattern_options(jsonschema::PatternOptions::regex())
            .build(schema)
            .map_err(|e| bad(format!("config.schema is not a usable JSON Schema: {e}")))?;
        Ok(Self {
            id: id.to_string(),
            name: name.to_string(),
            action,
            operations,
            validator,
        })
    }

    /// Whether the schema is for results of `operation`.
    pub fn covers(&self, operation: &str) -> bool {
        self.operations.is_empty() || self.operations.iter().any(|o| o == operation)
    }

    /// Where `value` does not conform, as JSON pointers, outermost first; a part inside one
    /// already listed is left out. Empty when it conforms.
    pub fn violations(&self, value: &Value) -> Vec<String> {
        if self.validator.is_valid(value) {
            return Vec::new();
        }
        let mut paths: Vec<String> = self
            .validator
            .iter_errors(value)
            .map(|e| e.instance_path().to_string())
            .collect();
        paths.sort_by_key(|p| (p.matches('/').count(), p.clone()));
        paths.dedup();
        let mut outermost: Vec<String> = Vec::new();
        for p in paths {
            let inside = outermost
                .iter()
                .any(|o| o.is_empty() || p.starts_with(&format!("{o}/")));
            if !inside {
                outermost.push(p);
            }
        }
        outermost
    }

    /// Replaces every part of `value` that does not conform; how many parts were replaced.
    pub fn redact(&self, value: &mut Value) -> usize {
        let paths = self.violations(value);
        for p in &paths {
            let target = if p.is_empty() {
                Some(&mut *value)
            } else {
                value.pointer_mut(p)
            };
            if let Some(part) = target {
                *part = Value::String(REDACTED.to_string());
            }
        }
        paths.len()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn guard(schema: Value) -> SchemaGuard {
        SchemaGuard::compile("g", "g", Action::Redact, &json!({ "schema": schema })).unwrap()
    }

    #[test]
    fn the_parts_that_do_not_conform_are_found_and_redacted() {
        let g = guard(json!({"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 10},
            "items": {"type": "array", "items": {"type": "integer"}}},
            "additionalProperties": false}));
        let mut v = json!({"name": "a much too long name", "items": [1, "two", 3]});
        assert_eq!(g.violations(&v), ["/name", "/items/1"]);
        assert_eq!(g.redact(&mut v), 2);
        assert_eq!(v, json!({"name": REDACTED, "items": [1, REDACTED, 3]}));
        let mut extra = json!({"name": "ok", "ssn": "123-45-6789"});
        assert_eq!(
            g.violations(&extra),
            [""],
            "an extra field fails the whole object"
        );
        g.redact(&mut extra);
        assert_eq!(extra, json!(REDACTED));
        assert!(g.violations(&json!({"name": "ok", "items": []})).is_empty());
    }

    #[test]
    fn bad_schemas_and_settings_are_refused() {
        let err = |config: Value| {
            SchemaGuard::compile("g", "g", Action::Block, &config)
                .unwrap_err()
                .0
        };
        assert!(err(json!({"schema": {"type": "nonsense"}})).contains("not a usable"));
        assert!(err(json!({"schema": "x"})).contains("must be a JSON Schema"));
        assert!(err(json!({"schema": {}, "strict": true})).contains("config.strict"));
        assert!(
            err(json!({"schema": {"$ref": "https://example.com/s.json"}})).contains("not a usable")
        );
        assert!(err(json!({"schema": {"pattern": "(a"}})).contains("not a usable"));
    }
}
