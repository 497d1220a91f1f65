//! Classified fields of structured tool results (`field_classifications` on the connection):
//! a `tool_result` guard that covers a field's class acts on the field whole, whatever it
//! holds — `block` fails the call, `redact` replaces the value with `[REDACTED:<class>]`. A
//! field is named anywhere in the result (`"ssn"`), or by a JSON pointer whose `*` segments
//! stand for every member (`"/customers/*/email"`).

use serde_json::Value;

use super::each_json;
use crate::guard::detect::Action;
use crate::guard::{Filtered, Tally};

/// Applies the classified fields to a result's `structuredContent` and its JSON text blocks;
/// whether anything was redacted.
pub fn apply(
    classified: &[(String, String)],
    result: &mut Value,
    tally: &mut Tally,
) -> Result<bool, Filtered> {
    let mut changed = false;
    for (field, class) in classified {
        let Some(guard) = covering(tally, class) else {
            continue;
        };
        let redacted = Value::String(format!("[REDACTED:{class}]"));
        let found = each_json(result, &mut |data: &mut Value| {
            let mut n = 0;
            each(data, field, &mut |v: &mut Value| {
                n += 1;
                *v = redacted.clone();
            });
            n
        });
        for _ in 0..found.unwrap_or(0) {
            tally.field(guard)?;
            changed = true;
        }
    }
    Ok(changed)
}

/// The guard that acts on fields of `class`: a blocking one first, as a block wins.
fn covering(tally: &Tally, class: &str) -> Option<usize> {
    let guards = &tally.detector.guards;
    let covers = |i: &usize| guards[*i].covers(class);
    let blocking = (0..guards.len()).find(|i| covers(i) && guards[*i].action == Action::Block);
    blocking.or_else(|| (0..guards.len()).find(covers))
}

/// Calls `act` on every value `field` names in `value`.
fn each(value: &mut Value, field: &str, act: &mut dyn FnMut(&mut Value)) {
    match field.strip_prefix('/') {
        Some(pointer) => {
            let segments: Vec<String> = pointer
                .split('/')
                .map(|s| s.replace("~1", "/").replace("~0", "~"))
                .collect();
            at_pointer(value, &segments, act);
        }
        None => named(value, field, act),
    }
}

fn at_pointer(value: &mut Value, segments: &[String], act: &mut dyn FnMut(&mut Value)) {
    let Some((first, rest)) = segments.split_first() else {
        return act(value);
    };
    match value {
        Value::Object(map) if first == "*" => {
            for item in map.values_mut() {
                at_pointer(item, rest, act);
            }
        }
        Value::Array(items) if first == "*" => {
            for item in items {
                at_pointer(item, rest, act);
            }
        }
        Value::Object(map) => {
            if let Some(item) = map.get_mut(first.as_str()) {
                at_pointer(item, rest, act);
            }
        }
        Value::Array(items) => {
            if let Some(item) = first.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                at_pointer(item, rest, act);
            }
        }
        _ => {}
    }
}

/// Every member called `name`, at any depth (not looking inside one once found).
fn named(value: &mut Value, name: &str, act: &mut dyn FnMut(&mut Value)) {
    match value {
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                if key == name {
                    act(item);
                } else {
                    named(item, name, act);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                named(item, name, act);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use portcullis_shared::api::guards::GuardStage;
    use serde_json::json;

    use super::*;
    use crate::guard::detect::{Detector, Finds, GuardSpec, Pii};

    fn tally(action: Action) -> Tally {
        let d = Detector::compile(vec![
            GuardSpec {
                id: "p".into(),
                name: "personal".into(),
                action,
                finds: Finds::Pii(vec![Pii::Email]),
            },
            GuardSpec {
                id: "w".into(),
                name: "weather".into(),
                action: Action::Redact,
                finds: Finds::Keywords {
                    words: vec!["unused".into()],
                    case_sensitive: false,
                },
            },
        ])
        .unwrap()
        .unwrap();
        Tally::new(GuardStage::ToolResult, Arc::new(d))
    }

    fn fields(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(f, c)| (f.to_string(), c.to_string()))
            .collect()
    }

    #[test]
    fn covered_fields_are_redacted_whole_by_name_and_pointer() {
        let mut t = tally(Action::Redact);
        let mut result = json!({
            "content": [{"type": "text", "text": "{\"owner\":{\"contact\":\"call me\"}}"}],
            "structuredContent": {"owner": {"contact": "call me", "notes": "x"},
                "rows": [{"temp": 3}, {"temp": 4}]}});
        let classified = fields(&[
            ("contact", "email"),
            ("/rows/*/temp", "weather"),
            ("/owner/notes", "unguarded-class"),
        ]);
        assert!(apply(&classified, &mut result, &mut t).unwrap());
        let s = &result["structuredContent"];
        assert_eq!(s["owner"]["contact"], "[REDACTED:email]");
        assert_eq!(
            s["rows"],
            json!([{"temp": "[REDACTED:weather]"}, {"temp": "[REDACTED:weather]"}])
        );
        assert_eq!(s["owner"]["notes"], "x", "no guard covers this class");
        let text = result["content"][0]["text"].as_str().unwrap();
        let text: Value = serde_json::from_str(text).unwrap();
        assert_eq!(text["owner"]["contact"], "[REDACTED:email]");
    }

    #[test]
    fn a_blocking_guard_fails_the_call_on_a_covered_field() {
        let mut t = tally(Action::Block);
        let mut result = json!({"structuredContent": {"contact": "anything"}});
        let err = apply(&fields(&[("contact", "pii")]), &mut result, &mut t).unwrap_err();
        assert_eq!(
            (err.guard.as_str(), err.label),
            ("personal", "classified_field")
        );
    }
}
