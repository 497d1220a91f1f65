//! Catalog adapters, the engine's half: the definition types are the wire crate's
//! ([`portcullis_wire::adapter`]); checking a definition as the registry loads it, and
//! validating an operation's arguments against its JSON Schema, are here.

use serde_json::Value;

pub use portcullis_wire::adapter::*;

/// Checks a definition as the registry loads it.
pub fn check(definition: &Definition) -> Result<(), String> {
    let slug_ok = !definition.slug.is_empty()
        && definition.slug.len() <= 64
        && definition
            .slug
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !slug_ok {
        return Err(format!(
            "slug {:?} must be lowercase letters, digits and -",
            definition.slug
        ));
    }
    base_url(&definition.base_url)?;
    match definition.auth.method.as_str() {
        "none" => {}
        "api-key" if !definition.auth.header.is_empty() => {
            http::HeaderName::from_bytes(definition.auth.header.as_bytes()).map_err(|_| {
                format!(
                    "auth.header {:?} is not a header name",
                    definition.auth.header
                )
            })?;
        }
        other => {
            return Err(format!(
                "auth.method {other:?} must be none or api-key (with a header)"
            ))
        }
    }
    if definition.operations.is_empty() || definition.operations.len() > MAX_OPERATIONS {
        return Err(format!(
            "an adapter defines 1 to {MAX_OPERATIONS} operations"
        ));
    }
    let mut names = std::collections::HashSet::new();
    for op in &definition.operations {
        if !names.insert(op.name.as_str()) {
            return Err(format!("operation {} is defined twice", op.name));
        }
        check_operation(op).map_err(|e| format!("operation {}: {e}", op.name))?;
    }
    Ok(())
}

fn check_operation(op: &Operation) -> Result<(), String> {
    let name_ok = !op.name.is_empty()
        && op
            .name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !name_ok {
        return Err("the name must be letters, digits, _ and -".into());
    }
    if !matches!(
        op.method.as_str(),
        "GET" | "POST" | "PATCH" | "PUT" | "DELETE"
    ) {
        return Err(format!(
            "method {} is not one of GET, POST, PATCH, PUT, DELETE",
            op.method
        ));
    }
    if !op.path.starts_with('/') {
        return Err("path must start with /".into());
    }
    validator(&op.input_schema)?;
    let properties = op.input_schema["properties"].as_object();
    for arg in op
        .path_params()
        .chain(op.query.iter().map(String::as_str))
        .chain(op.body.iter().map(String::as_str))
    {
        if !properties.is_some_and(|p| p.contains_key(arg)) {
            return Err(format!("argument {arg} is not in input_schema.properties"));
        }
    }
    Ok(())
}

/// The validator of an operation's arguments.
pub fn validator(schema: &Value) -> Result<jsonschema::Validator, String> {
    if schema["type"] != "object" {
        return Err("input_schema must be an object schema".into());
    }
    jsonschema::options()
        .with_pattern_options(jsonschema::PatternOptions::regex())
        .build(schema)
        .map_err(|e| format!("input_schema is not a usable JSON Schema: {e}"))
}

/// Where arguments break the schema, as one message (empty when they conform).
pub fn violations(validator: &jsonschema::Validator, args: &Value) -> String {
    validator
        .iter_errors(args)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests;
