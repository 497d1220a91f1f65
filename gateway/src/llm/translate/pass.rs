//! Pass-through bodies: the caller's JSON object written again with `model` replaced (and, for
//! OpenAI streams, `stream_options.include_usage` set), without copying the rest of it; and
//! the usage of a reply passed back, read without building the rest of it.

use bytes::Bytes;
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::{Map, Value};

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

/// The body with its fields rewritten.
pub fn rewrite(body: &Value, edits: Rewrite<'_>) -> Result<Bytes, TranslateError> {
    let Value::Object(fields) = body else {
        return Err(TranslateError::invalid(
            "the request body must be a JSON object",
        ));
    };
    let mut out = Vec::with_capacity(256);
    Rewritten { fields, edits }
        .serialize(&mut serde_json::Serializer::new(&mut out))
        .map_err(|e| TranslateError::invalid(e.to_string()))?;
    Ok(Bytes::from(out))
}

struct Rewritten<'a> {
    fields: &'a Map<String, Value>,
    edits: Rewrite<'a>,
}

impl Serialize for Rewritten<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let e = &self.edits;
        let mut map = serializer.serialize_map(Some(self.fields.len() + 1))?;
        let mut options_written = false;
        for (key, value) in self.fields {
            match key.as_str() {
                "model" => {
                    if let Some(model) = e.model {
                        map.serialize_entry(key, model)?;
                    }
                }
                k if e.add.is_some_and(|(added, _)| added == k) => {}
                "stream_options" if e.include_usage => {
                    options_written = true;
                    map.serialize_entry(key, &WithUsage(value.as_object()))?;
                }
                _ => map.serialize_entry(key, value)?,
            }
        }
        if e.include_usage && !options_written {
            map.serialize_entry("stream_options", &WithUsage(None))?;
        }
        if let Some((key, value)) = e.add {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
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

    fn parsed(body: Value, usage: bool) -> Value {
        let edits = Rewrite {
            model: Some("up-model"),
            include_usage: usage,
            add: None,
        };
        serde_json::from_slice(&rewrite(&body, edits).unwrap()).unwrap()
    }

    #[test]
    fn vertex_bodies_lose_model_and_gain_a_version() {
        let edits = Rewrite {
            model: None,
            include_usage: false,
            add: Some(("anthropic_version", "vertex-2023-10-16")),
        };
        let body = json!({"model": "claude", "anthropic_version": "x", "max_tokens": 5});
        let got: Value = serde_json::from_slice(&rewrite(&body, edits).unwrap()).unwrap();
        assert_eq!(
            got,
            json!({"max_tokens": 5, "anthropic_version": "vertex-2023-10-16"})
        );
    }

    #[test]
    fn model_is_replaced_and_the_rest_kept() {
        let body = json!({"model": "gpt", "messages": [{"role": "user", "content": "hi"}], "x-custom": {"a": 1}});
        let mut want = body.clone();
        want["model"] = json!("up-model");
        assert_eq!(parsed(body, false), want);
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
