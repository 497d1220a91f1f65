//! Catalog adapters: declarative definitions of a REST service's operations (base URL, the
//! managed auth header, and per operation an HTTP method, a path template, which arguments go
//! to the query and which to the JSON body, a JSON Schema of the arguments and a projection of
//! the result). The control plane lists and installs them; the gateway serves each operation
//! as an MCP tool: arguments checked against the schema (the engine's `adapter::validator`),
//! one HTTP request built, and the JSON answer projected into the tool's `structuredContent`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Most operations one adapter defines.
pub const MAX_OPERATIONS: usize = 64;

/// One version of an adapter, as shipped in a definition file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Definition {
    pub slug: String,
    pub version: u32,
    /// A disabled version is never installed or upgraded to.
    #[serde(default = "yes")]
    pub enabled: bool,
    pub title: String,
    pub description: String,
    pub base_url: String,
    pub auth: Auth,
    /// Sent on every request (`Accept`, an API version header).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub operations: Vec<Operation>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Auth {
    /// `none` or `api-key`.
    pub method: String,
    /// The header the stored secret is sent in (the secret's key at install).
    #[serde(default)]
    pub header: String,
    /// Put before the secret when it does not start with it (`Bearer `).
    #[serde(default)]
    pub scheme: String,
    /// Whether each end user may bring their own key.
    #[serde(default)]
    pub supports_per_user: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Operation {
    pub name: String,
    pub description: String,
    /// `GET`, `POST`, `PATCH`, `PUT` or `DELETE`.
    pub method: String,
    /// `/repos/{owner}/{repo}/issues`: each `{name}` is a required string argument.
    pub path: String,
    /// Arguments sent as query parameters.
    #[serde(default)]
    pub query: Vec<String>,
    /// Arguments sent as members of the JSON body.
    #[serde(default)]
    pub body: Vec<String>,
    pub input_schema: Value,
    #[serde(default)]
    pub result: Projection,
    /// The operation changes things (for rules and `write_tools`).
    #[serde(default)]
    pub write: bool,
}

/// What of the answer becomes the result: the member at `root` (a JSON pointer), then of it
/// (or of each of its items) the `fields` (dotted paths), all when `fields` is empty.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Projection {
    #[serde(default)]
    pub root: String,
    #[serde(default)]
    pub fields: Vec<String>,
    /// A member that marks a failed call despite a 2xx status (Slack's `/ok` = false), and
    /// the member holding its message.
    #[serde(default)]
    pub failed_when_false: String,
    #[serde(default)]
    pub error_message: String,
}

/// What an installed (`rest`) connection stores as its protocol config: the adapter copied
/// whole at install or upgrade, pinned to its version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Installed {
    pub slug: String,
    pub version: u32,
    /// Replaces the adapter's base URL (a self-hosted service, such as GitHub Enterprise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The operations offered; all when empty.
    #[serde(default)]
    pub tool_filter: Vec<String>,
    pub definition: Definition,
}

impl Installed {
    /// The base URL requests go to.
    pub fn base(&self) -> &str {
        self.base_url
            .as_deref()
            .unwrap_or(&self.definition.base_url)
    }

    /// The operations this connection offers.
    pub fn operations(&self) -> impl Iterator<Item = &Operation> {
        self.definition.offered(&self.tool_filter)
    }
}

/// The request an operation's call makes.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub method: String,
    pub url: url::Url,
    pub body: Option<Value>,
}

impl Definition {
    /// The operations a tool filter keeps (all when it is empty).
    pub fn offered<'a>(&'a self, filter: &'a [String]) -> impl Iterator<Item = &'a Operation> {
        self.operations
            .iter()
            .filter(move |o| filter.is_empty() || filter.contains(&o.name))
    }
}

impl Operation {
    /// The `{name}` placeholders of the path.
    pub fn path_params(&self) -> impl Iterator<Item = &str> {
        self.path
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
    }

    /// The MCP `tools/list` entry.
    pub fn listing(&self) -> Value {
        serde_json::json!({
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
            "annotations": {"readOnlyHint": !self.write, "openWorldHint": true},
        })
    }

    /// The request for these (already validated) arguments against `base`.
    pub fn request(&self, base: &str, args: &Map<String, Value>) -> Result<Request, String> {
        let mut url = base_url(base)?;
        {
            let mut segments = url
                .path_segments_mut()
                .map_err(|_| "the base URL cannot take a path".to_string())?;
            segments.pop_if_empty();
            for part in self.path.split('/').filter(|p| !p.is_empty()) {
                match part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                    Some(param) => {
                        let value = scalar(args.get(param))
                            .ok_or_else(|| format!("argument {param} is required"))?;
                        // One whole segment: an empty, `.` or `..` value would move the request
                        // to another endpoint.
                        if matches!(value.as_str(), "" | "." | "..") {
                            return Err(format!("argument {param} cannot be {value:?}"));
                        }
                        segments.push(&value);
                    }
                    None => {
                        segments.push(part);
                    }
                }
            }
        }
        {
            let present: Vec<(String, String)> = self
                .query
                .iter()
                .filter_map(|q| scalar(args.get(q)).map(|v| (q.clone(), v)))
                .collect();
            if !present.is_empty() {
                url.query_pairs_mut().extend_pairs(present);
            }
        }
        let body = (!self.body.is_empty()).then(|| {
            Value::Object(
                self.body
                    .iter()
                    .filter_map(|b| args.get(b).map(|v| (b.clone(), v.clone())))
                    .collect(),
            )
        });
        Ok(Request {
            method: self.method.clone(),
            url,
            body,
        })
    }

    /// The tool result for an answer: `Ok(structured)` for success, `Err(message)` when the
    /// service said the call failed.
    pub fn outcome(&self, status: u16, answer: &Value) -> Result<Value, String> {
        let p = &self.result;
        if !(200..300).contains(&status) {
            let said = answer["message"]
                .as_str()
                .or_else(|| answer["error"].as_str())
                .unwrap_or("no message");
            return Err(format!("the service answered HTTP {status}: {said}"));
        }
        if !p.failed_when_false.is_empty()
            && answer.pointer(&p.failed_when_false) == Some(&Value::Bool(false))
        {
            let said = answer
                .pointer(&p.error_message)
                .and_then(Value::as_str)
                .unwrap_or("no message");
            return Err(format!("the service refused the call: {said}"));
        }
        let root = if p.root.is_empty() {
            answer
        } else {
            answer.pointer(&p.root).unwrap_or(&Value::Null)
        };
        let projected = match root {
            Value::Array(items) => Value::Array(items.iter().map(|i| pick(i, &p.fields)).collect()),
            one => pick(one, &p.fields),
        };
        // MCP's structuredContent is an object.
        Ok(match projected {
            Value::Object(_) => projected,
            other => serde_json::json!({"items": other}),
        })
    }
}

/// The fields of one value, nested as in the original (`user.login` → `{"user": {"login"}}`).
fn pick(value: &Value, fields: &[String]) -> Value {
    if fields.is_empty() || !value.is_object() {
        return value.clone();
    }
    let mut out = Map::new();
    for field in fields {
        let path: Vec<&str> = field.split('.').collect();
        if let Some(found) = path.iter().try_fold(value, |v, k| v.get(*k)) {
            insert(&mut out, &path, found.clone());
        }
    }
    Value::Object(out)
}

/// Puts `value` at `path` in `into`, making the objects on the way.
fn insert(into: &mut Map<String, Value>, path: &[&str], value: Value) {
    match path {
        [] => {}
        [last] => {
            into.insert((*last).to_string(), value);
        }
        [first, rest @ ..] => {
            let next = into
                .entry((*first).to_string())
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(map) = next {
                insert(map, rest, value);
            }
        }
    }
}

/// A path or query value: strings as they are, numbers and booleans as JSON writes them.
fn scalar(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Array(items) => Some(
            items
                .iter()
                .filter_map(|i| scalar(Some(i)))
                .collect::<Vec<_>>()
                .join(","),
        ),
        _ => None,
    }
}

/// An http(s) base URL without query or fragment.
pub fn base_url(text: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(text).map_err(|e| format!("base URL {text:?}: {e}"))?;
    if !matches!(url.scheme(), "http" | "https")
        || url.query().is_some()
        || url.fragment().is_some()
    {
        return Err(format!("base URL {text:?} must be http(s) without a query"));
    }
    Ok(url)
}
