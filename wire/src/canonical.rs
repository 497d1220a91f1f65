//! Canonical JSON: the exact bytes a signature or hash over JSON is computed on. RFC 8785
//! (JSON Canonicalization Scheme): keys sorted, no insignificant whitespace, strings and
//! numbers in one fixed spelling. Never the order a parsed map happens to keep.

use serde::Serialize;

/// The RFC 8785 form of `value`.
pub fn to_vec<T: Serialize>(value: &T) -> serde_json::Result<Vec<u8>> {
    serde_json_canonicalizer::to_vec(value)
}

/// The same canonical text with every non-ASCII character written as a `\uXXXX` escape
/// (UTF-16 units, lowercase hex), as Python's `json.dumps` writes it by default; `None` when
/// the text is ASCII already. Both spellings are canonical JSON (sorted keys, no insignificant
/// whitespace); RFC 8785 picks the UTF-8 one.
pub fn escape_non_ascii(canonical: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(canonical).ok()?;
    if text.is_ascii() {
        return None;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
            continue;
        }
        let mut units = [0u16; 2];
        for unit in c.encode_utf16(&mut units) {
            out.push_str(&format!("\\u{unit:04x}"));
        }
    }
    Some(out.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_whatever_order_the_map_keeps() {
        let mut map = serde_json::Map::new();
        map.insert("ts".into(), json!(1));
        map.insert("sub".into(), json!("u"));
        map.insert("email".into(), json!("é@x"));
        map.insert("groups".into(), json!(["b", {"z": 1, "a": [2]}]));
        let bytes = to_vec(&serde_json::Value::Object(map)).unwrap();
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            r#"{"email":"é@x","groups":["b",{"a":[2],"z":1}],"sub":"u","ts":1}"#
        );
    }

    #[test]
    fn escapes_non_ascii_like_python_does() {
        let escaped = escape_non_ascii(r#"{"e":"zoë 日本 😀"}"#.as_bytes()).unwrap();
        assert_eq!(
            String::from_utf8(escaped).unwrap(),
            r#"{"e":"zo\u00eb \u65e5\u672c \ud83d\ude00"}"#
        );
        assert!(escape_non_ascii(br#"{"a":"b"}"#).is_none());
    }
}
