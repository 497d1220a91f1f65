//! How replies and errors are printed: raw JSON with `--json`, otherwise a readable summary.
//! The one place a failure becomes the message on standard error.

use portcullis_client::ClientError;
use serde_json::Value;

/// The message for a failed command.
pub fn describe(err: &anyhow::Error) -> String {
    match err.downcast_ref::<ClientError>() {
        Some(ClientError::Admin {
            error: Some(e),
            status_code,
            ..
        }) => {
            format!("{} ({}, HTTP {status_code})", e.message, e.code)
        }
        Some(ClientError::Admin {
            status_code, body, ..
        }) => format!("HTTP {status_code}: {body}"),
        Some(other) => other.to_string(),
        None => format!("{err:#}"),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Array(items)
            if items.iter().all(|i| i.get("name").is_some()) && !items.is_empty() =>
        {
            items
                .iter()
                .map(|i| text(&i["name"]))
                .collect::<Vec<_>>()
                .join(", ")
        }
        Value::Array(items) => items.iter().map(text).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

/// Prints a reply: JSON, or `label: value` lines for the given JSON pointers.
pub fn show(json: bool, reply: &Value, fields: &[(&str, &str)]) {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(reply).unwrap_or_default()
        );
        return;
    }
    for (label, pointer) in fields {
        if let Some(v) = reply.pointer(pointer) {
            println!("{label:<18} {}", text(v));
        }
    }
}

/// Prints a list: JSON, or one line per item with the given fields.
pub fn list(json: bool, reply: &Value, key: &str, fields: &[&str]) {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(reply).unwrap_or_default()
        );
        return;
    }
    let items = reply[key].as_array().cloned().unwrap_or_default();
    if items.is_empty() {
        println!("(none)");
    }
    for item in items {
        let cells: Vec<String> = fields
            .iter()
            .map(|f| text(item.pointer(f).unwrap_or(&Value::Null)))
            .collect();
        println!("{}", cells.join("  "));
    }
}

/// Prints a freshly issued secret, labelled as shown once.
pub fn secret(json: bool, reply: &Value, label: &str, pointer: &str) {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(reply).unwrap_or_default()
        );
        return;
    }
    if let Some(v) = reply.pointer(pointer).and_then(Value::as_str) {
        println!("{label} (shown once): {v}");
    }
}
