//! `POST …/v1/chat/completions`: what the gateway reads of an OpenAI chat request before it
//! decides (the rest is the upstream's to validate).

use serde_json::{Map, Value};

use super::{attachments, Attachment, Limits};
use crate::error::GatewayError;

/// The request's limits, and whether a streamed call asked for the usage chunk.
pub fn read(fields: &Map<String, Value>, stream: bool) -> Result<(Limits, bool), GatewayError> {
    let number = |key: &str| -> Result<Option<u64>, GatewayError> {
        match fields.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                GatewayError::BadRequest(format!("`{key}` must be a non-negative integer"))
            }),
        }
    };
    let max_output = [number("max_completion_tokens")?, number("max_tokens")?]
        .into_iter()
        .flatten()
        .filter(|n| *n > 0)
        .max();
    let wants_usage = match fields.get("stream_options") {
        None | Some(Value::Null) => false,
        Some(Value::Object(o)) => stream && o.get("include_usage") == Some(&Value::Bool(true)),
        Some(_) => {
            return Err(GatewayError::BadRequest(
                "`stream_options` must be an object".into(),
            ))
        }
    };
    let (images, files) = attachments(fields, &|kind| match kind {
        "image_url" => Attachment::Image,
        "file" => Attachment::File,
        _ => Attachment::Neither,
    });
    let limits = Limits {
        max_output,
        choices: number("n")?.unwrap_or(1).max(1),
        images,
        files,
    };
    Ok((limits, wants_usage))
}
