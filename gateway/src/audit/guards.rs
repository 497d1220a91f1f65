//! The `*.filtered` events: one per guard that matched a call at a stage, never holding the
//! matched text; and adding what the guards did to the call's own log.

use portcullis_shared::api::guards::GuardStage;
use portcullis_shared::audit::{self, AuditEventV1};
use serde_json::json;

use super::base;
use crate::guard::detect::Action;
use crate::guard::{Log, Outcome, Tally};
use crate::request::RequestCtx;

/// Adds what a stage's guards did to the call's log, and emits their `*.filtered` events.
pub fn record_stage(
    gw: &crate::Gateway,
    rc: &RequestCtx<'_>,
    log: &mut Log,
    tally: &Tally,
    resource: &audit::ResourceRef,
) {
    if !tally.matched() {
        return;
    }
    for outcome in log.add(tally) {
        gw.audit.emit(filtered_event(rc, &outcome, resource));
    }
}

/// Adds what one guard outside a tally (a `json_schema` guard) did, and emits its event.
pub fn record_one(
    gw: &crate::Gateway,
    rc: &RequestCtx<'_>,
    log: &mut Log,
    outcome: &Outcome<'_>,
    resource: &audit::ResourceRef,
) {
    log.add_one(outcome);
    gw.audit.emit(filtered_event(rc, outcome, resource));
}

/// One `llm.output.filtered`, `llm.input.filtered`, `mcp.tool_result.filtered` or
/// `mcp.tool_arguments.filtered` event for one guard's outcome.
pub fn filtered_event(
    rc: &RequestCtx<'_>,
    outcome: &Outcome<'_>,
    resource: &audit::ResourceRef,
) -> AuditEventV1 {
    let result = match outcome.action {
        Action::Block => audit::results::DENIED,
        Action::Redact => audit::results::ALLOWED,
    };
    let mut e = base(rc, event_type(outcome.stage), result, resource.clone());
    e.payload = outcome.record();
    e.payload["gateway_id"] = json!(rc.gateway.id);
    e
}

fn event_type(stage: GuardStage) -> &'static str {
    use portcullis_shared::audit::types;
    match stage {
        GuardStage::LlmOutput => types::LLM_OUTPUT_FILTERED,
        GuardStage::LlmInput => types::LLM_INPUT_FILTERED,
        GuardStage::ToolResult => types::TOOL_RESULT_FILTERED,
        GuardStage::ToolArguments => types::TOOL_ARGUMENTS_FILTERED,
    }
}
