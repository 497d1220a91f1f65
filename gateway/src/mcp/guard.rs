//! The guard stages of tool calls: the arguments an agent sends (`tool_arguments`, before the
//! upstream sees them) and the result it gets back (`tool_result`: the text of `content`
//! blocks and every string of `structuredContent`). A `block` match fails the call with a
//! JSON-RPC error; redactions change what goes on.

use portcullis_shared::api::guards::GuardStage;
use portcullis_shared::audit::ResourceRef;
use serde_json::{json, Value};

use crate::error::RpcError;
use crate::guard::{Filtered, Log, Tally};
use crate::request::RequestCtx;
use crate::snapshot::ToolEntry;
use crate::Gateway;

/// Guards `value` at `stage` when guards of the stage apply to the connection; `resource` is
/// the tool called.
pub fn guard(
    gw: &Gateway,
    rc: &RequestCtx<'_>,
    entry: &ToolEntry,
    stage: GuardStage,
    value: &mut Value,
    resource: &ResourceRef,
    log: &mut Log,
) -> Result<(), Filtered> {
    let Some(detector) = rc.gateway.guards.tool(stage, &entry.id) else {
        return Ok(());
    };
    let mut tally = Tally::new(stage, detector.clone());
    let result = match stage {
        GuardStage::ToolResult => result(value, &mut tally),
        _ => tally.json(value),
    };
    log.add(gw, rc, &tally, resource);
    if stage == GuardStage::ToolResult {
        log.delivered = Some(match (&result, tally.matched()) {
            (Err(_), _) => "nothing",
            (Ok(_), true) => "redacted",
            (Ok(_), false) => "as_answered",
        });
    }
    result.map(|_| ())
}

/// A tool result's content: `text` of text blocks, the text of embedded resources, and
/// `structuredContent`.
fn result(value: &mut Value, tally: &mut Tally) -> Result<bool, Filtered> {
    let mut changed = false;
    if let Some(Value::Array(blocks)) = value.get_mut("content") {
        for block in blocks {
            let text = match block.get("type").and_then(Value::as_str) {
                Some("text") => block.get_mut("text"),
                Some("resource") => block.pointer_mut("/resource/text"),
                _ => None,
            };
            if let Some(text) = text {
                changed |= tally.json(text)?;
            }
        }
    }
    if let Some(structured) = value.get_mut("structuredContent") {
        changed |= tally.json(structured)?;
    }
    Ok(changed)
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
