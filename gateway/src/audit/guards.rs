//! The `*.filtered` events: one per guard that matched a call at a stage, never holding the
//! matched text; and adding what the guards did to the call's own log.

use portcullis_shared::api::guards::GuardStage;
use portcullis_shared::audit;
use portcullis_shared::audit::catalog::{
    LlmInputFiltered, LlmOutputFiltered, ToolArgumentsFiltered, ToolResultFiltered,
};

use super::event;
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
        emit_filtered(gw, rc, &outcome, resource);
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
    emit_filtered(gw, rc, outcome, resource);
}

/// Emits one `llm.output.filtered`, `llm.input.filtered`, `mcp.tool_result.filtered` or
/// `mcp.tool_arguments.filtered` event for one guard's outcome.
fn emit_filtered(
    gw: &crate::Gateway,
    rc: &RequestCtx<'_>,
    outcome: &Outcome<'_>,
    resource: &audit::ResourceRef,
) {
    let result = match outcome.action {
        Action::Block => audit::results::DENIED,
        Action::Redact => audit::results::ALLOWED,
    };
    let (guard, gateway_id) = (outcome.record(), rc.gateway.id.clone());
    let resource = resource.clone();
    let audit = &gw.audit;
    match outcome.stage {
        GuardStage::LlmOutput => {
            audit.emit(event(
                rc,
                result,
                resource,
                LlmOutputFiltered { guard, gateway_id },
            ));
        }
        GuardStage::LlmInput => {
            audit.emit(event(
                rc,
                result,
                resource,
                LlmInputFiltered { guard, gateway_id },
            ));
        }
        GuardStage::ToolResult => {
            audit.emit(event(
                rc,
                result,
                resource,
                ToolResultFiltered { guard, gateway_id },
            ));
        }
        GuardStage::ToolArguments => {
            let payload = ToolArgumentsFiltered { guard, gateway_id };
            audit.emit(event(rc, result, resource, payload));
        }
    }
}
