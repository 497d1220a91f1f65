//! Which audit event types become which webhook event types: the catalog subscriptions name
//! (`docs/events.md`). The audit writer asks it which events go to the webhook outbox;
//! `webhooks` builds their bodies.

use portcullis_shared::audit;

/// Sent by `TestSubscription`.
pub const TEST: &str = "eventing.test";

/// Each webhook event type and the audit event type it is derived from.
pub const TYPES: &[(&str, &str)] = &[
    ("access.denied", audit::types::ACCESS_DENIED),
    ("mcp.tool_call.completed", audit::types::TOOL_CALL),
    (
        "mcp.tool_result.filtered",
        audit::types::TOOL_RESULT_FILTERED,
    ),
    ("llm.output.filtered", audit::types::LLM_OUTPUT_FILTERED),
    ("agent.suspended", audit::types::AGENT_SUSPENDED),
    (
        "authorization.rule_bundle.deployed",
        audit::types::RULE_BUNDLE_DEPLOYED,
    ),
    ("quota.threshold", audit::types::QUOTA_THRESHOLD),
    ("quota.exceeded", audit::types::QUOTA_EXCEEDED),
    (TEST, ""),
];

/// Whether subscriptions can name this type.
pub fn is_known(event_type: &str) -> bool {
    TYPES.iter().any(|(t, _)| *t == event_type)
}

/// The webhook type an audit event becomes, if any.
pub fn webhook_type(audit_type: &str) -> Option<&'static str> {
    TYPES
        .iter()
        .find(|(_, a)| !a.is_empty() && *a == audit_type)
        .map(|(t, _)| *t)
}
