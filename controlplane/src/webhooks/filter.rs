//! Subscription filters (SPEC "Filters"): `key=value` matches exactly, `key~=pattern` is a
//! glob (`*` any run, `?` one character) over the whole value. An event must satisfy every
//! key it carries; a key it does not carry does not constrain it. A key repeated ORs its
//! alternatives; distinct keys AND.

use serde_json::{Map, Value};

/// Most distinct keys in one subscription's filters.
pub const MAX_KEYS: usize = 16;
/// Most alternatives for one key.
pub const MAX_ALTERNATIVES: usize = 16;
/// Longest value or pattern, in bytes.
pub const MAX_PATTERN_BYTES: usize = 256;
/// Most wildcards in one pattern.
pub const MAX_WILDCARDS: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Test {
    Exact(String),
    Glob(Vec<char>),
}

/// A subscription's filters, grouped by key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filters {
    keys: Vec<(String, Vec<Test>)>,
}

impl Filters {
    /// Parses and checks filters; the error names the offending entry.
    pub fn parse(filters: &[String]) -> Result<Self, String> {
        let mut out = Filters::default();
        for (i, f) in filters.iter().enumerate() {
            let (key, test) = parse_one(f).map_err(|e| format!("filters[{i}] {f:?}: {e}"))?;
            let distinct = out.keys.len();
            match out.keys.iter_mut().find(|(k, _)| *k == key) {
                Some((_, tests)) if tests.len() >= MAX_ALTERNATIVES => {
                    return Err(format!(
                        "filters[{i}]: key {key:?} has more than {MAX_ALTERNATIVES} alternatives"
                    ));
                }
                Some((_, tests)) => tests.push(test),
                None if distinct >= MAX_KEYS => {
                    return Err(format!("filters[{i}]: more than {MAX_KEYS} distinct keys"));
                }
                None => out.keys.push((key, vec![test])),
            }
        }
        Ok(out)
    }

    /// Whether an event's data passes: each key it carries matches one of its alternatives.
    pub fn matches(&self, data: &Map<String, Value>) -> bool {
        self.keys.iter().all(|(key, tests)| match data.get(key) {
            None | Some(Value::Null) => true,
            Some(value) => {
                let text = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                tests.iter().any(|t| t.matches(&text))
            }
        })
    }
}

fn parse_one(filter: &str) -> Result<(String, Test), &'static str> {
    let (key, test) = if let Some((key, pattern)) = filter.split_once("~=") {
        if key.contains('=') {
            return Err("expected key=value or key~=pattern");
        }
        if pattern.chars().filter(|c| matches!(c, '*' | '?')).count() > MAX_WILDCARDS {
            return Err("a pattern has at most 8 wildcards");
        }
        (key, Test::Glob(pattern.chars().collect()))
    } else if let Some((key, value)) = filter.split_once('=') {
        (key, Test::Exact(value.to_string()))
    } else {
        return Err("expected key=value or key~=pattern");
    };
    if key.is_empty()
        || !key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    {
        return Err("the key is a field name: lowercase letters, digits and _");
    }
    let len = match &test {
        Test::Exact(v) => v.len(),
        Test::Glob(p) => p.iter().map(|c| c.len_utf8()).sum(),
    };
    if len > MAX_PATTERN_BYTES {
        return Err("a value or pattern is at most 256 bytes");
    }
    Ok((key.to_string(), test))
}

impl Test {
    fn matches(&self, text: &str) -> bool {
        match self {
            Test::Exact(v) => v == text,
            Test::Glob(p) => glob(p, &text.chars().collect::<Vec<_>>()),
        }
    }
}

/// Whole-value glob match, linear in practice: backtracks only to the last `*`.
fn glob(pattern: &[char], text: &[char]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, t));
                p += 1;
            }
            Some('?') => {
                p += 1;
                t += 1;
            }
            Some(c) if *c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn data(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn f(list: &[&str]) -> Filters {
        Filters::parse(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn same_key_ors_distinct_keys_and() {
        let filters = f(&[
            "agent_name=billing",
            "agent_name~=ops-*",
            "tool_name~=github/*",
        ]);
        let event = |agent: &str, tool: &str| data(json!({"agent_name": agent, "tool_name": tool}));
        assert!(filters.matches(&event("billing", "github/create_issue")));
        assert!(filters.matches(&event("ops-eu", "github/list")));
        assert!(!filters.matches(&event("ops-eu", "slack/post")));
        assert!(!filters.matches(&event("billing-2", "github/list")));
    }

    #[test]
    fn a_key_the_event_does_not_carry_does_not_constrain_it() {
        let filters = f(&["tool_name=github/create_issue"]);
        assert!(filters.matches(&data(json!({"agent_name": "a"}))));
        assert!(!filters.matches(&data(json!({"tool_name": "github/list"}))));
    }

    #[test]
    fn globs_match_the_whole_value() {
        let g = |p: &str, t: &str| {
            glob(
                &p.chars().collect::<Vec<_>>(),
                &t.chars().collect::<Vec<_>>(),
            )
        };
        assert!(g("a*c", "abbbc"));
        assert!(g("a?c", "abc"));
        assert!(!g("a?c", "abbc"));
        assert!(!g("a*", "ba"));
        assert!(g("*", ""));
        assert!(g("*x*y*", "axbxcy"));
        assert!(!g("é?", "é"));
    }

    #[test]
    fn numbers_and_booleans_compare_as_their_text() {
        let filters = f(&["is_error=true", "percent~=8?"]);
        assert!(filters.matches(&data(json!({"is_error": true, "percent": 80}))));
        assert!(!filters.matches(&data(json!({"is_error": false}))));
    }

    #[test]
    fn bad_filters_are_refused_with_the_entry_named() {
        let err = |list: Vec<String>| Filters::parse(&list).unwrap_err();
        assert!(err(vec!["agent_name".into()]).contains("filters[0]"));
        assert!(err(vec!["Agent=x".into()]).contains("field name"));
        assert!(err(vec![format!("a~={}", "*".repeat(9))]).contains("8 wildcards"));
        assert!(err(vec![format!("a={}", "x".repeat(257))]).contains("256 bytes"));
        assert!(err((0..17).map(|i| format!("k{i}=v")).collect()).contains("16 distinct"));
        assert!(err((0..17).map(|i| format!("k=v{i}")).collect()).contains("alternatives"));
        assert!(Filters::parse(&[format!("a={}", "x".repeat(256))]).is_ok());
    }
}
