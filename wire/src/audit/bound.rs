//! Bounds on what one event may carry (DESIGN §24), so that no caller can make an event too
//! large to ship and take its neighbours down with it: a caller-supplied string is cut to
//! [`MAX_CALLER_CHARS`] characters plus `…#` and the first hex digits of the whole string's
//! SHA-256 (so equal long values still compare equal), and a serialized event is at most
//! [`MAX_EVENT_BYTES`], its payload left out when cutting strings is not enough.

use std::borrow::Cow;

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::AuditEventV1;

/// Characters of a caller-supplied string an event keeps.
pub const MAX_CALLER_CHARS: usize = 256;
/// The largest serialized event.
pub const MAX_EVENT_BYTES: usize = 64 * 1024;
/// A serialized event at most this long holds no string worth cutting; longer ones are looked
/// at string by string.
pub const LOOK_CLOSER_BYTES: usize = 4 * 1024;
/// Deepest payload nesting an event may have.
pub const MAX_PAYLOAD_DEPTH: usize = 64;

/// `s` cut to [`MAX_CALLER_CHARS`] characters and marked with its hash, when longer.
pub fn clip(s: &str) -> Cow<'_, str> {
    if s.len() <= MAX_CALLER_CHARS {
        return Cow::Borrowed(s);
    }
    match s.char_indices().nth(MAX_CALLER_CHARS) {
        None => Cow::Borrowed(s),
        Some((end, _)) => {
            let digest = hex::encode(Sha256::digest(s.as_bytes()));
            Cow::Owned(format!("{}…#{}", &s[..end], &digest[..16]))
        }
    }
}

/// Cuts `s` in place; whether it was cut.
pub fn clip_in_place(s: &mut String) -> bool {
    match clip(s) {
        Cow::Borrowed(_) => false,
        Cow::Owned(cut) => {
            *s = cut;
            true
        }
    }
}

/// Cuts every string and object key in `v`; whether anything was cut.
pub fn clip_value(v: &mut Value) -> bool {
    match v {
        Value::String(s) => clip_in_place(s),
        Value::Array(items) => items.iter_mut().fold(false, |cut, i| clip_value(i) | cut),
        Value::Object(map) => {
            let mut cut = false;
            let long_key = map.keys().any(|k| k.len() > MAX_CALLER_CHARS);
            if long_key {
                let old = std::mem::take(map);
                *map = old
                    .into_iter()
                    .map(|(k, v)| (clip(&k).into_owned(), v))
                    .collect::<Map<String, Value>>();
                cut = true;
            }
            map.values_mut().fold(cut, |cut, v| clip_value(v) | cut)
        }
        _ => false,
    }
}

/// How deeply the JSON text `json` nests (a scalar is 0), read in one pass without building
/// it; for well-formed JSON only (the parser has checked it).
pub fn depth(json: &[u8]) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in json {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// A serialized event (one JSON line, without its newline) within the bounds: returned as it
/// is when short; otherwise every string in it is cut, and if that is not enough its payload is
/// replaced by a note of its size. `None` when the line is not an event at all.
pub fn bounded_line(line: Vec<u8>) -> Option<Vec<u8>> {
    if line.len() <= LOOK_CLOSER_BYTES {
        return Some(line);
    }
    let mut event: AuditEventV1 = serde_json::from_slice(&line).ok()?;
    let envelope_cut = clip_envelope(&mut event);
    let payload_cut = clip_value(&mut event.payload);
    if envelope_cut || payload_cut {
        event
            .data_handling
            .truncated
            .push(if payload_cut { "payload" } else { "envelope" }.to_string());
    }
    let mut out = serde_json::to_vec(&event).ok()?;
    if out.len() > MAX_EVENT_BYTES {
        event.payload = json!({"omitted_bytes": out.len()});
        event.data_handling.omitted.push("payload".to_string());
        out = serde_json::to_vec(&event).ok()?;
    }
    Some(out)
}

/// Cuts the envelope's free-text fields; whether any was cut.
pub fn clip_envelope<P>(e: &mut super::AuditEvent<P>) -> bool {
    let mut cut = false;
    for s in [
        &mut e.event_type,
        &mut e.resource.id,
        &mut e.resource.name,
        &mut e.resource.kind,
        &mut e.actor.id,
        &mut e.actor.email,
        &mut e.actor.display,
        &mut e.correlation.activity_id,
        &mut e.correlation.idempotency_key,
        &mut e.correlation.trace_id,
        &mut e.correlation.operation_id,
        &mut e.request.user_agent_class,
        &mut e.scope.agent_id,
    ] {
        cut |= clip_in_place(s);
    }
    if let Some(person) = &mut e.on_behalf_of {
        for s in [&mut person.id, &mut person.email, &mut person.display] {
            cut |= clip_in_place(s);
        }
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_strings_are_cut_at_a_character_and_keep_a_hash_of_the_whole() {
        assert_eq!(clip("gpt-4o"), "gpt-4o");
        let exact = "é".repeat(MAX_CALLER_CHARS);
        assert_eq!(clip(&exact), exact.as_str());
        let long = format!("{}tail-a", "é".repeat(MAX_CALLER_CHARS));
        let other = format!("{}tail-b", "é".repeat(MAX_CALLER_CHARS));
        let (a, b) = (clip(&long), clip(&other));
        assert!(a.starts_with(&exact) && a.contains("…#"), "{a}");
        assert_eq!(a.chars().count(), MAX_CALLER_CHARS + 2 + 16);
        assert_ne!(a, b, "different values stay different");
        assert_eq!(clip(&long), a, "the same value is cut the same way");
    }

    #[test]
    fn an_oversized_event_is_cut_then_left_without_its_payload() {
        let mut e = AuditEventV1 {
            event_id: "e1".into(),
            ..Default::default()
        };
        e.resource.name = "m".repeat(2_500_000);
        e.payload = json!({"model": "m".repeat(100_000), "k".repeat(300): 1});
        let line = serde_json::to_vec(&e).unwrap();
        let out: AuditEventV1 = serde_json::from_slice(&bounded_line(line).unwrap()).unwrap();
        assert_eq!(out.event_id, "e1");
        assert!(out.resource.name.len() < 400);
        assert!(out.payload["model"].as_str().unwrap().len() < 400);
        assert_eq!(out.data_handling.truncated, ["payload"]);

        let wide = AuditEventV1 {
            payload: json!((0..1000)
                .map(|i| format!("{i}{}", "x".repeat(250)))
                .collect::<Vec<_>>()),
            ..Default::default()
        };
        let line = serde_json::to_vec(&wide).unwrap();
        let out = bounded_line(line).unwrap();
        assert!(out.len() <= MAX_EVENT_BYTES);
        let out: AuditEventV1 = serde_json::from_slice(&out).unwrap();
        assert_eq!(out.data_handling.omitted, ["payload"]);
        assert!(out.payload["omitted_bytes"].as_u64().unwrap() > MAX_EVENT_BYTES as u64);
    }

    #[test]
    fn short_events_pass_untouched_and_depth_is_measured() {
        let line = br#"{"not":"an event"}"#.to_vec();
        assert_eq!(bounded_line(line.clone()), Some(line));
        assert_eq!(depth(b"1"), 0);
        assert_eq!(depth(br#"{"a": [1, {"b": []}], "c": "[[[[\"{{"}"#), 4);
        assert_eq!(depth(&[b'['; 200]), 200);
    }
}
