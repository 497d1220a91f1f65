//! Anthropic's request extensions a caller may pass through to a model (issue 38, L5): beta
//! features named in `anthropic-beta`, and server tools (`web_search_…`, `code_execution_…`,
//! `computer_…`: tools Anthropic runs itself, reaching the network or running code on the
//! workspace's account). Each model takes only those its connection lists
//! (`provider_config.anthropic_betas`, `provider_config.server_tools`); by default none. A
//! request asking for another is refused, naming it, before anything is sent.

use http::HeaderValue;
use serde_json::Value;

use crate::error::GatewayError;
use crate::llm::table::ModelEntry;

/// Every beta named in `anthropic-beta` (comma-separated) must be on the model's list.
pub fn check_betas(model: &ModelEntry, header: &HeaderValue) -> Result<(), GatewayError> {
    let text = header.to_str().map_err(|_| {
        GatewayError::BadRequest("the anthropic-beta header is not readable text".into())
    })?;
    for beta in text.split(',').map(str::trim).filter(|b| !b.is_empty()) {
        if !model.anthropic_betas.iter().any(|a| a == beta) {
            return Err(GatewayError::BadRequest(format!(
                "anthropic-beta '{}' is not enabled for model '{}'; an administrator lists the \
                 betas a model takes in provider_config.anthropic_betas",
                portcullis_shared::audit::bound::clip(beta),
                model.name
            )));
        }
    }
    Ok(())
}

/// Every server tool in the body's `tools` (a tool with a `type` other than `custom`) must be
/// on the model's list.
pub fn check_server_tools(model: &ModelEntry, body: &Value) -> Result<(), GatewayError> {
    let Some(tools) = body.get("tools").and_then(Value::as_array) else {
        return Ok(());
    };
    for tool in tools {
        let Some(kind) = tool.get("type").and_then(Value::as_str) else {
            continue;
        };
        if kind != "custom" && !model.server_tools.iter().any(|t| t == kind) {
            return Err(GatewayError::BadRequest(format!(
                "server tool '{}' is not enabled for model '{}'; an administrator lists the \
                 server tools a model takes in provider_config.server_tools",
                portcullis_shared::audit::bound::clip(kind),
                model.name
            )));
        }
    }
    Ok(())
}
