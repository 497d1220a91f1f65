//! `POST …/v1/messages`: what the gateway reads of an Anthropic Messages request before it
//! decides. `max_tokens` is required, as Anthropic requires it; `anthropic-version` is
//! accepted and not required.

use serde_json::{Map, Value};

use super::{attachments, Attachment, Limits};
use crate::error::GatewayError;

pub fn read(fields: &Map<String, Value>) -> Result<Limits, GatewayError> {
    let max_tokens = match fields.get("max_tokens") {
        None | Some(Value::Null) => {
            return Err(GatewayError::BadRequest(
                "max_tokens: Field required (the most output tokens the answer may have)".into(),
            ))
        }
        Some(v) => v.as_u64().filter(|n| *n > 0).ok_or_else(|| {
            GatewayError::BadRequest("max_tokens must be a positive integer".into())
        })?,
    };
    if !matches!(fields.get("messages"), Some(Value::Array(_))) {
        return Err(GatewayError::BadRequest(
            "messages: Field required (a list of user and assistant turns)".into(),
        ));
    }
    let (images, files) = attachments(fields, &|kind| match kind {
        "image" => Attachment::Image,
        "document" => Attachment::File,
        _ => Attachment::Neither,
    });
    Ok(Limits {
        max_output: Some(max_tokens),
        choices: 1,
        images,
        files,
    })
}
