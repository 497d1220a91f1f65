//! Pass-through bodies: the caller's own bytes sent on with `model` replaced (and, for OpenAI
//! streams, `stream_options.include_usage` set), spliced around the values changed rather
//! than parsed and written again; and the usage of a reply passed back, read without building
//! the rest of it.

use std::ops::Range;

use bytes::Bytes;
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::body::Body;
use super::TranslateError;

/// The `usage` object of a whole reply, read without building the rest of it.
pub fn usage_of<U: serde::de::DeserializeOwned>(body: &[u8]) -> Option<U> {
    #[derive(serde::Deserialize)]
    struct UsageOnly<U> {
        #[serde(default = "Option::default")]
        usage: Option<U>,
    }
    serde_json::from_slice::<UsageOnly<U>>(body).ok()?.usage
}

/// What a pass-through changes in the caller's body.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rewrite<'a> {
    /// The upstream's model id; `None` leaves `model` out (Anthropic on Vertex names the model
    /// in the URL).
    pub model: Option<&'a str>,
    /// Sets `stream_options.include_usage` (the object created when absent, replaced when it
    /// is not an object).
    pub include_usage: bool,
    /// A field set (Vertex's `anthropic_version`), replacing the caller's.
    pub add: Option<(&'a str, &'a str)>,
}

/// The caller's body (a JSON object) with its fields rewritten. Every top-level entry is
/// matched by its decoded key, as the upstream reads it (`"mod\u0065l"` is `model`); the
/// entries kept are slices of `raw`, shared rather than copied.
pub fn splice(raw: &Bytes, edits: Rewrite<'_>) -> Result<Body, TranslateError> {
    let mut out = Spliced::default();
    let mut options_written = false;
    for entry in entries(raw)? {
        let value = match entry.key.as_str() {
            "model" => Some(edits.model.map(json)),
            k if edits.add.is_some_and(|(added, _)| added == k) => Some(None),
            "stream_options" if edits.include_usage => {
                options_written = true;
                let given: Option<Map<String, Value>> =
                    serde_json::from_slice(&raw[entry.value.clone()]).unwrap_or_default();
                Some(Some(json(&WithUsage(given.as_ref()))))
            }
            _ => None,
        };
        match value {
            None => out.entry(&[raw.slice(entry.key_at..entry.value.end)]),
            Some(None) => {}
            Some(Some(v)) => out.entry(&[raw.slice(entry.key_at..entry.value.start), v]),
        }
    }
    if edits.include_usage && !options_written {
        let options = Bytes::from_static(b"\"stream_options\":{\"include_usage\":true}");
        out.entry(&[options]);
    }
    if let Some((key, value)) = edits.add {
        out.entry(&[json(key), Bytes::from_static(b":"), json(value)]);
    }
    Ok(out.finish())
}

/// A value written as JSON.
fn json<T: Serialize + ?Sized>(value: &T) -> Bytes {
    Bytes::from(serde_json::to_vec(value).unwrap_or_default())
}

/// An object being written from entries.
#[derive(Default)]
struct Spliced {
    parts: Vec<Bytes>,
    entries: usize,
}

impl Spliced {
    fn entry(&mut self, parts: &[Bytes]) {
        let separator: &'static [u8] = if self.entries == 0 { b"{" } else { b"," };
        self.parts.push(Bytes::from_static(separator));
        self.parts.extend_from_slice(parts);
        self.entries += 1;
    }

    fn finish(mut self) -> Body {
        let end: &'static [u8] = if self.entries == 0 { b"{}" } else { b"}" };
        self.parts.push(Bytes::from_static(end));
        Body::of(self.parts)
    }
}

/// One top-level entry of an object: its decoded key, where its key's opening quote is, and
/// its value's bytes.
struct Entry {
    key: String,
    key_at: usize,
    value: Range<usize>,
}

/// The top-level entries of the JSON object `raw`, in order, duplicates included.
fn entries(raw: &[u8]) -> Result<Vec<Entry>, TranslateError> {
    struct Entries<'a>(Vec<(String, &'a RawValue)>);
    impl<'de> serde::Deserialize<'de> for Entries<'de> {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_map(EntriesVisitor)
        }
    }
    struct EntriesVisitor;
    impl<'de> serde::de::Visitor<'de> for EntriesVisitor {
        type Value = Entries<'de>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut entries = Vec::new();
            while let Some(entry) = map.next_entry::<String, &'de RawValue>()? {
                entries.push(entry);
            }
            Ok(Entries(entries))
        }
    }
    let found: Entries<'_> = serde_json::from_slice(raw).map_err(|e| {
        TranslateError::invalid(format!("the request body is not a JSON object: {e}"))
    })?;
    Ok(found
        .0
        .into_iter()
        .map(|(key, value)| {
            let start = value.get().as_ptr() as usize - raw.as_ptr() as usize;
            Entry {
                key,
                key_at: key_start(raw, start),
                value: start..start + value.get().len(),
            }
        })
        .collect())
}

/// Where the key of the value at `value_start` begins (its opening quote): back over the
/// colon and whitespace to the key's closing quote, then back to the first quote not escaped.
fn key_start(raw: &[u8], value_start: usize) -> usize {
    let mut i = value_start;
    while i > 0 && matches!(raw[i - 1], b' ' | b'\t' | b'\n' | b'\r' | b':') {
        i -= 1;
    }
    // `raw[i - 1]` is the key's closing quote.
    i = i.saturating_sub(1);
    while i > 0 {
        i -= 1;
        if raw[i] == b'"' {
            let backslashes = raw[..i].iter().rev().take_while(|&&b| b == b'\\').count();
            if backslashes % 2 == 0 {
                return i;
            }
        }
    }
    0
}

/// A `stream_options` object with `include_usage: true`.
struct WithUsage<'a>(Option<&'a Map<String, Value>>);

impl Serialize for WithUsage<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in self.0.into_iter().flatten() {
            if key != "include_usage" {
                map.serialize_entry(key, value)?;
            }
        }
        map.serialize_entry("include_usage", &true)?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spliced(raw: &str, edits: Rewrite<'_>) -> Value {
        let body = splice(&Bytes::from(raw.to_string()), edits).unwrap();
        serde_json::from_slice(&body.contiguous()).unwrap()
    }

    fn parsed(body: Value, usage: bool) -> Value {
        let edits = Rewrite {
            model: Some("up-model"),
            include_usage: usage,
            add: None,
        };
        spliced(&body.to_string(), edits)
    }

    #[test]
    fn vertex_bodies_lose_model_and_gain_a_version() {
        let edits = Rewrite {
            model: None,
            include_usage: false,
            add: Some(("anthropic_version", "vertex-2023-10-16")),
        };
        let body = json!({"model": "claude", "anthropic_version": "x", "max_tokens": 5});
        assert_eq!(
            spliced(&body.to_string(), edits),
            json!({"max_tokens": 5, "anthropic_version": "vertex-2023-10-16"})
        );
        let only_model = spliced(r#"{"model": "claude"}"#, Rewrite { add: None, ..edits });
        assert_eq!(only_model, json!({}));
    }

    #[test]
    fn model_is_replaced_and_the_rest_kept() {
        let body = json!({"model": "gpt", "messages": [{"role": "user", "content": "hi"}], "x-custom": {"a": 1}});
        let mut want = body.clone();
        want["model"] = json!("up-model");
        assert_eq!(parsed(body, false), want);
    }

    #[test]
    fn keys_are_matched_as_the_upstream_reads_them() {
        let edits = Rewrite {
            model: Some("up-model"),
            ..Default::default()
        };
        // An escaped key, odd spacing, a key holding an escaped quote, and a repeated `model`:
        // no spelling smuggles another model past the rewrite.
        let raw = "{ \"mod\\u0065l\" :\n\"gpt-5\" , \"a\\\"b\\\\\":1,\"model\":\"x\"}";
        let got = splice(&Bytes::from(raw), edits).unwrap();
        let text = String::from_utf8(got.contiguous().into_owned()).unwrap();
        assert!(!text.contains("gpt-5") && !text.contains("\"x\""), "{text}");
        assert_eq!(text.matches("up-model").count(), 2, "{text}");
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value, json!({"model": "up-model", "a\"b\\": 1}));
    }

    #[test]
    fn a_large_prompt_is_shared_not_copied() {
        let prompt = "p".repeat(1 << 20);
        let raw = Bytes::from(
            json!({"model": "gpt", "messages": [{"role": "user", "content": prompt}]}).to_string(),
        );
        let edits = Rewrite {
            model: Some("up-model"),
            ..Default::default()
        };
        let body = splice(&raw, edits).unwrap();
        let inside = |p: &Bytes| {
            let at = p.as_ptr() as usize;
            at >= raw.as_ptr() as usize && at + p.len() <= raw.as_ptr() as usize + raw.len()
        };
        let shared: usize = body
            .parts()
            .iter()
            .filter(|p| inside(p))
            .map(Bytes::len)
            .sum();
        assert!(
            shared > prompt.len(),
            "{shared} of {} bytes shared",
            body.len()
        );
    }

    #[test]
    fn usage_is_always_asked_for_on_streams() {
        let got = parsed(json!({"model": "m", "stream": true}), true);
        assert_eq!(got["stream_options"], json!({"include_usage": true}));
        let got = parsed(
            json!({"model": "m", "stream_options": {"include_usage": false, "x": 1}}),
            true,
        );
        assert_eq!(
            got["stream_options"],
            json!({"x": 1, "include_usage": true})
        );
        let got = parsed(json!({"model": "m", "stream_options": null}), true);
        assert_eq!(got["stream_options"], json!({"include_usage": true}));
    }
}
