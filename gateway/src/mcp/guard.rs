//! The guard stages of tool calls: the arguments an agent sends (`tool_arguments`, before the
//! upstream sees them) and the result it gets back (`tool_result`: the text of `content`
//! blocks and every string of `structuredContent`, then its shape against `json_schema`
//! guards). A `block` match fails the call with a JSON-RPC error; redactions change what goes
//! on.

use portcullis_shared::api::guards::{GuardAction as Action, GuardKind, GuardStage};
use portcullis_shared::guard::schema::{SchemaGuard, REDACTED};
use serde_json::{json, Value};

mod classified;

use crate::audit;
use crate::error::RpcError;
use crate::guard::{Filtered, Log, Outcome, Tally};
use crate::mcp::table::ToolEntry;
use crate::request::RequestCtx;
use crate::Gateway;

/// Guards `value` at `stage` when guards of the stage apply to the connection; `name` is the
/// tool called (`connection/operation`), `operation` its name on the connection.
#[allow(clippy::too_many_arguments)]
pub fn guard(
    gw: &Gateway,
    rc: &RequestCtx<'_>,
    entry: &ToolEntry,
    operation: &str,
    stage: GuardStage,
    value: &mut Value,
    name: &str,
    log: &mut Log,
) -> Result<(), Filtered> {
    let guards = rc.guards;
    let detector = guards.tool(stage, &entry.id);
    let schemas = match stage {
        GuardStage::ToolResult => guards.tool_schemas.get(&entry.id),
        _ => None,
    };
    if detector.is_none() && schemas.is_none() {
        return Ok(());
    }
    let resource = &crate::audit::resource("tool", &entry.id, name);
    let mut matched = false;
    let mut outcome = Ok(());
    if let Some(detector) = detector {
        let mut tally = Tally::new(stage, detector.clone());
        let guarded = match stage {
            GuardStage::ToolResult => result(value, &mut tally).and_then(|changed| {
                Ok(changed | classified::apply(&entry.classified, value, &mut tally)?)
            }),
            _ => tally.json(value),
        };
        audit::guards::record_stage(gw, rc, log, &tally, resource);
        matched |= tally.matched();
        outcome = guarded.map(|_| ());
    }
    for schema in schemas.into_iter().flatten() {
        if outcome.is_err() {
            break;
        }
        if !schema.covers(operation) {
            continue;
        }
        let parts = conform(schema, value);
        if parts == 0 {
            continue;
        }
        matched = true;
        audit::guards::record_one(gw, rc, log, &schema_outcome(schema, parts), resource);
        if schema.action == Action::Block {
            outcome = Err(Filtered {
                stage,
                guard: schema.name.clone(),
                label: "json_schema",
            });
        }
    }
    if stage == GuardStage::ToolResult {
        log.delivered = Some(match (&outcome, matched) {
            (Err(_), _) => "nothing",
            (Ok(_), true) => "redacted",
            (Ok(_), false) => "as_answered",
        });
    }
    outcome
}

fn schema_outcome(schema: &SchemaGuard, parts: usize) -> Outcome<'_> {
    Outcome {
        stage: GuardStage::ToolResult,
        guard_id: &schema.id,
        guard: &schema.name,
        kind: GuardKind::JsonSchema,
        action: schema.action,
        matches: u32::try_from(parts).unwrap_or(u32::MAX),
    }
}

/// Holds a tool result to a `json_schema` guard: its `structuredContent` and each text block
/// that holds JSON (tools send the same data both ways); a result with neither does not
/// conform. A redacting guard replaces what does not conform. How many parts did not.
fn conform(schema: &SchemaGuard, result: &mut Value) -> usize {
    let redact = schema.action == Action::Redact;
    let mut check = |value: &mut Value| {
        if redact {
            schema.redact(value)
        } else {
            schema.violations(value).len()
        }
    };
    if let Some(parts) = each_json(result, &mut check) {
        return parts;
    }
    if redact {
        for block in text_blocks(result) {
            block["text"] = Value::String(REDACTED.to_string());
        }
    }
    1
}

/// Runs `check` on a result's data as JSON: its `structuredContent` and each text block that
/// holds JSON (tools send the same data both ways); a text block `check` counts parts in is
/// written back. The parts counted, or `None` when the result holds no JSON.
fn each_json(result: &mut Value, check: &mut dyn FnMut(&mut Value) -> usize) -> Option<usize> {
    let mut parts = None;
    if let Some(structured) = result.get_mut("structuredContent") {
        parts = Some(check(structured));
    }
    for block in text_blocks(result) {
        let Some(Value::String(text)) = block.get_mut("text") else {
            continue;
        };
        let Ok(mut parsed) = serde_json::from_str::<Value>(text) else {
            continue;
        };
        let n = check(&mut parsed);
        if n > 0 {
            *text = parsed.to_string();
        }
        parts = Some(parts.unwrap_or(0) + n);
    }
    parts
}

/// A result's text content blocks.
fn text_blocks(result: &mut Value) -> impl Iterator<Item = &mut Value> {
    result
        .get_mut("content")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
}

/// A tool result's content, denying by default: every block but its bookkeeping and encoded
/// media ([`Tally::message`]), and `structuredContent` whole.
fn result(value: &mut Value, tally: &mut Tally) -> Result<bool, Filtered> {
    let mut changed = false;
    if let Some(content) = value.get_mut("content") {
        changed |= tally.message(content)?;
    }
    if let Some(structured) = value.get_mut("structuredContent") {
        changed |= tally.json(structured)?;
    }
    Ok(changed)
}

/// An upstream's JSON-RPC error passed on to the caller carries the tool's words too: its
/// message and data go through the connection's result guards (text only).
pub fn upstream_error(
    rc: &RequestCtx<'_>,
    entry: &ToolEntry,
    message: &mut String,
    data: &mut Option<Value>,
) -> Result<(), Filtered> {
    let Some(detector) = rc.guards.tool(GuardStage::ToolResult, &entry.id) else {
        return Ok(());
    };
    let mut tally = Tally::new(GuardStage::ToolResult, detector.clone());
    if let Some(redacted) = tally.text(message)? {
        *message = redacted;
    }
    if let Some(data) = data {
        tally.message(data)?;
    }
    Ok(())
}

/// The JSON-RPC error of a call a guard stopped.
pub fn refusal(f: &Filtered, request_id: &str) -> RpcError {
    let reason = f.to_string();
    RpcError {
        code: -32001,
        data: Some(
            json!({"reason": reason, "reason_code": f.code(), "guard": f.guard,
            "request_id": request_id}),
        ),
        message: reason,
        denial: None,
    }
}
