//! What an admin tool is made of: its name, its JSON Schema parameters, whether it only reads
//! or destroys, the operations it calls, and a function from its arguments to the operations'
//! reply. [`Args`] gives that function the caller's arguments and a way to run operations
//! through the core as the caller.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::body::Bytes;
use serde_json::{json, Map, Value};

use crate::api::{core, Call, Door, Principal};
use crate::error::{invalid, ApiError, ApiResult};
use crate::App;

pub type Reply = Pin<Box<dyn Future<Output = ApiResult<Value>> + Send>>;

/// What calling a tool does to the workspace (its MCP annotations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    Read,
    Write,
    Destructive,
}

/// The JSON type of a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    Str,
    Int,
    Num,
    Bool,
    Object,
    StrList,
    /// A list of objects (header entries, pool members).
    ObjList,
}

impl Ty {
    fn schema(self) -> Value {
        match self {
            Ty::Str => json!({"type": "string"}),
            Ty::Int => json!({"type": "integer", "minimum": 0}),
            Ty::Num => json!({"type": "number", "minimum": 0}),
            Ty::Bool => json!({"type": "boolean"}),
            Ty::Object => json!({"type": "object"}),
            Ty::StrList => json!({"type": "array", "items": {"type": "string"}}),
            Ty::ObjList => json!({"type": "array", "items": {"type": "object"}}),
        }
    }

    fn admits(self, v: &Value) -> bool {
        match self {
            Ty::Str => v.is_string(),
            Ty::Int => v.is_u64(),
            Ty::Num => v.as_f64().is_some_and(|n| n >= 0.0),
            Ty::Bool => v.is_boolean(),
            Ty::Object => v.is_object(),
            Ty::StrList => v.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
            Ty::ObjList => v.as_array().is_some_and(|a| a.iter().all(Value::is_object)),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Ty::Str => "a string",
            Ty::Int => "a whole number of at least 0",
            Ty::Num => "a number of at least 0",
            Ty::Bool => "true or false",
            Ty::Object => "an object",
            Ty::StrList => "a list of strings",
            Ty::ObjList => "a list of objects",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Param {
    pub name: &'static str,
    pub ty: Ty,
    pub required: bool,
    pub description: &'static str,
    pub choices: &'static [&'static str],
}

/// An optional parameter.
pub fn opt(name: &'static str, ty: Ty, description: &'static str) -> Param {
    Param {
        name,
        ty,
        required: false,
        description,
        choices: &[],
    }
}

/// A required parameter.
pub fn req(name: &'static str, ty: Ty, description: &'static str) -> Param {
    Param {
        required: true,
        ..opt(name, ty, description)
    }
}

impl Param {
    /// Limits a string parameter to these values.
    pub fn one_of(self, choices: &'static [&'static str]) -> Param {
        Param { choices, ..self }
    }
}

pub struct Tool {
    pub name: &'static str,
    pub description: &'static str,
    pub effect: Effect,
    pub params: Vec<Param>,
    /// The operations it runs (by method name), for the registry walk and `docs/api.md`.
    pub operations: &'static [&'static str],
    pub run: fn(Args) -> Reply,
}

impl Tool {
    /// The `tools/list` entry.
    pub fn listing(&self) -> Value {
        let mut properties = Map::new();
        for p in &self.params {
            let mut schema = p.ty.schema();
            schema["description"] = p.description.into();
            if !p.choices.is_empty() {
                schema["enum"] = json!(p.choices);
            }
            properties.insert(p.name.into(), schema);
        }
        let required: Vec<&str> = self
            .params
            .iter()
            .filter(|p| p.required)
            .map(|p| p.name)
            .collect();
        json!({
            "name": self.name,
            "description": self.description,
            "inputSchema": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": false,
            },
            "annotations": {
                "readOnlyHint": self.effect == Effect::Read,
                "destructiveHint": self.effect == Effect::Destructive,
                "idempotentHint": self.effect == Effect::Read,
                "openWorldHint": false,
            },
        })
    }

    /// Checks the arguments against the schema: known names, right types, required present.
    pub fn check(&self, args: &Map<String, Value>) -> Result<(), String> {
        for (name, value) in args {
            let Some(p) = self.params.iter().find(|p| p.name == name) else {
                let known: Vec<&str> = self.params.iter().map(|p| p.name).collect();
                return Err(format!(
                    "{}: unknown argument '{name}'; it takes {}",
                    self.name,
                    known.join(", ")
                ));
            };
            if value.is_null() && !p.required {
                continue;
            }
            if !p.ty.admits(value) {
                return Err(format!("{}: '{name}' must be {}", self.name, p.ty.name()));
            }
            if !p.choices.is_empty() && !p.choices.contains(&value.as_str().unwrap_or_default()) {
                return Err(format!(
                    "{}: '{name}' must be one of {}",
                    self.name,
                    p.choices.join(", ")
                ));
            }
        }
        match self
            .params
            .iter()
            .find(|p| p.required && args.get(p.name).is_none_or(Value::is_null))
        {
            Some(p) => Err(format!("{}: '{}' is required", self.name, p.name)),
            None => Ok(()),
        }
    }
}

/// Kinds of resource a tool may name instead of giving its id.
#[derive(Debug, Clone, Copy)]
pub enum Named {
    Model,
    Tool,
    Gateway,
    Pool,
}

impl Named {
    /// (list operation, list field, id field, what it is called).
    fn lookup(self) -> (&'static str, &'static str, &'static str, &'static str) {
        match self {
            Named::Model => (
                "ListLLMModelConnections",
                "models",
                "connection_id",
                "model",
            ),
            Named::Tool => (
                "ListMCPServerConnections",
                "tools",
                "connection_id",
                "tool connection",
            ),
            Named::Gateway => ("ListGateways", "gateways", "gateway_id", "gateway"),
            Named::Pool => ("ListLLMPools", "pools", "pool_id", "pool"),
        }
    }
}

/// One tool call: the caller, its arguments, and the operations it may run.
pub struct Args {
    pub app: Arc<App>,
    pub principal: Arc<Principal>,
    pub request_id: Arc<str>,
    pub tool: &'static str,
    pub map: Map<String, Value>,
}

impl Args {
    /// A string argument, when given (and not empty).
    pub fn str(&self, name: &str) -> Option<&str> {
        self.map
            .get(name)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    }

    /// A string argument the schema requires.
    pub fn need(&self, name: &str) -> ApiResult<String> {
        self.str(name)
            .map(str::to_string)
            .ok_or_else(|| invalid(format!("{}: '{name}' is required", self.tool)))
    }

    /// The arguments named, copied as given (absent ones left out).
    pub fn take(&self, names: &[&str]) -> Map<String, Value> {
        names
            .iter()
            .filter_map(|n| {
                self.map
                    .get(*n)
                    .filter(|v| !v.is_null())
                    .map(|v| (n.to_string(), v.clone()))
            })
            .collect()
    }

    /// A USD amount argument in micros (the API's unit).
    pub fn micros(&self, name: &str) -> ApiResult<Option<u64>> {
        let Some(v) = self.map.get(name).filter(|v| !v.is_null()) else {
            return Ok(None);
        };
        let usd = v.as_f64().filter(|n| n.is_finite() && *n >= 0.0);
        let micros = usd
            .map(|n| (n * 1_000_000.0).round())
            .filter(|m| *m <= 9_007_199_254_740_991.0);
        micros.map(|m| Some(m as u64)).ok_or_else(|| {
            invalid(format!(
                "{}: '{name}' must be a USD amount of at least 0",
                self.tool
            ))
        })
    }

    /// A `since` argument (`24h`, `7d` or an RFC 3339 time) as RFC 3339.
    pub fn since(&self, name: &str) -> ApiResult<Option<String>> {
        self.str(name)
            .map(|t| {
                portcullis_shared::since::since(t)
                    .map_err(|e| invalid(format!("{}: '{name}': {e}", self.tool)))
            })
            .transpose()
    }

    /// Runs an operation (by method name) as the caller, with the caller's workspace.
    pub async fn call(&self, method: &str, body: Value) -> ApiResult<Value> {
        let path =
            self.app.registry.path_of(method).ok_or_else(|| {
                ApiError::Internal(format!("{}: no operation {method}", self.tool))
            })?;
        let mut body = body;
        body["workspace_id"] = self.principal.workspace_id().into();
        let call = Call {
            principal: self.principal.clone(),
            path,
            body: Bytes::from(body.to_string()),
            door: Door::Mcp(self.tool),
            request_id: &self.request_id,
            started: std::time::Instant::now(),
        };
        core::execute(&self.app, call).await
    }

    /// The id of the resource an argument names, by name or id.
    pub async fn resolve(&self, kind: Named, arg: &str) -> ApiResult<String> {
        let given = self.need(arg)?;
        self.resolve_value(kind, &given).await
    }

    /// The id of a resource given by name or id.
    pub async fn resolve_value(&self, kind: Named, given: &str) -> ApiResult<String> {
        let (list, field, id_field, what) = kind.lookup();
        let reply = self.call(list, json!({})).await?;
        let items = reply[field].as_array().cloned().unwrap_or_default();
        let found = items
            .iter()
            .find(|i| i[id_field] == given)
            .or_else(|| items.iter().find(|i| i["name"] == given));
        found
            .and_then(|i| i[id_field].as_str())
            .map(str::to_string)
            .ok_or_else(|| {
                ApiError::NotFound(format!(
                    "no {what} named '{}' in this workspace",
                    crate::validate::clip(given)
                ))
            })
    }
}

/// How a created connection joins gateways: the attach operation, the read that returns it
/// afterwards, and the field of the reply that holds it.
pub struct Joining {
    pub attach: &'static str,
    pub get: &'static str,
    pub field: &'static str,
}

impl Args {
    /// The ids of the `gateways` argument, resolved before anything is created.
    pub async fn gateway_ids(&self) -> ApiResult<Vec<String>> {
        let mut ids = Vec::new();
        let names = self.map.get("gateways").and_then(Value::as_array);
        for g in names.into_iter().flatten() {
            ids.push(
                self.resolve_value(Named::Gateway, g.as_str().unwrap_or_default())
                    .await?,
            );
        }
        Ok(ids)
    }

    /// Attaches the connection a create returned to each gateway, and puts its fresh read
    /// (with the memberships) into the reply.
    pub async fn join(
        &self,
        mut created: Value,
        gateway_ids: Vec<String>,
        how: Joining,
    ) -> ApiResult<Value> {
        if gateway_ids.is_empty() {
            return Ok(created);
        }
        let connection_id = created["connection_id"].clone();
        for gateway_id in gateway_ids {
            let body = json!({"gateway_id": gateway_id, "connection_id": connection_id});
            self.call(how.attach, body).await?;
        }
        let fresh = self
            .call(how.get, json!({"connection_id": connection_id}))
            .await?;
        created[how.field] = fresh[how.field].clone();
        Ok(created)
    }
}

/// Boxes a tool's async body.
pub fn reply<F>(f: F) -> Reply
where
    F: Future<Output = ApiResult<Value>> + Send + 'static,
{
    Box::pin(f)
}
