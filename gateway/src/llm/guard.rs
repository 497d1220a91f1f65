//! The guard stage of model calls, in the caller's shape: what the caller sent (`llm_input`,
//! before any member is planned) and the answer after translation (`llm_output`), whole here
//! and streamed in [`stream`]. Only what carries content is guarded — text, reasoning,
//! refusals and tool-call arguments — never roles, ids or attachments' encoded bytes.

pub mod stream;
#[cfg(test)]
mod tests;

use bytes::Bytes;
use serde_json::Value;

use crate::error::Shape;
use crate::guard::{Filtered, Tally};

/// A whole reply guarded: the body to send, unchanged when nothing was redacted. Every
/// field of the reply but its bookkeeping is guarded ([`Tally::message`]), whatever the shape.
pub fn whole(body: Bytes, tally: &mut Tally) -> Result<Bytes, Filtered> {
    let Ok(mut reply) = serde_json::from_slice::<Value>(&body) else {
        // Not JSON (a `custom` upstream's own format): guarded as text.
        let text = String::from_utf8_lossy(&body);
        return Ok(tally.text(&text)?.map_or(body.clone(), Bytes::from));
    };
    Ok(if tally.message(&mut reply)? {
        Bytes::from(serde_json::to_vec(&reply).unwrap_or_default())
    } else {
        body
    })
}

/// OpenAI's message: content, refusal, reasoning and tool-call arguments.
fn openai_message(message: &mut Value, tally: &mut Tally) -> Result<bool, Filtered> {
    let mut changed = false;
    for field in ["content", "refusal", "reasoning_content"] {
        changed |= match message.get_mut(field) {
            Some(content @ Value::String(_)) => tally.json(content)?,
            Some(Value::Array(parts)) => openai_parts(parts, tally)?,
            _ => false,
        };
    }
    for call in array(message.get_mut("tool_calls")) {
        if let Some(Value::String(args)) = call.pointer_mut("/function/arguments") {
            changed |= tally.arguments(args)?;
        }
    }
    Ok(changed)
}

/// Content parts: the text of `text` parts.
fn openai_parts(parts: &mut [Value], tally: &mut Tally) -> Result<bool, Filtered> {
    let mut changed = false;
    for part in parts {
        if part.get("type").and_then(Value::as_str) == Some("text") {
            if let Some(text) = part.get_mut("text") {
                changed |= tally.json(text)?;
            }
        }
    }
    Ok(changed)
}

/// Anthropic content: a string, or blocks (text, thinking, tool use and its results).
fn anthropic_content(content: Option<&mut Value>, tally: &mut Tally) -> Result<bool, Filtered> {
    let blocks = match content {
        Some(text @ Value::String(_)) => return tally.json(text),
        Some(Value::Array(blocks)) => blocks,
        _ => return Ok(false),
    };
    let mut changed = false;
    for block in blocks {
        let field = match block.get("type").and_then(Value::as_str) {
            Some("text") => "text",
            Some("thinking") => "thinking",
            Some("tool_use") => "input",
            Some("tool_result") => {
                changed |= anthropic_content(block.get_mut("content"), tally)?;
                continue;
            }
            _ => continue,
        };
        if let Some(value) = block.get_mut(field) {
            changed |= tally.json(value)?;
        }
    }
    Ok(changed)
}

/// What the caller sends a model, guarded in place: the messages (and Anthropic's `system`)
/// in the caller's shape. Whether anything was redacted.
pub fn input(shape: Shape, body: &mut Value, tally: &mut Tally) -> Result<bool, Filtered> {
    let mut changed = false;
    if shape == Shape::Anthropic {
        changed |= anthropic_content(body.get_mut("system"), tally)?;
    }
    for message in array(body.get_mut("messages")) {
        changed |= match shape {
            Shape::OpenAi => openai_message(message, tally)?,
            _ => anthropic_content(message.get_mut("content"), tally)?,
        };
    }
    Ok(changed)
}

fn array(value: Option<&mut Value>) -> impl Iterator<Item = &mut Value> {
    value
        .and_then(Value::as_array_mut)
        .map(|items| items.iter_mut())
        .into_iter()
        .flatten()
}
