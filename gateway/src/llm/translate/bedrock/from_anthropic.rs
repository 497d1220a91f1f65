//! An Anthropic Messages caller, a Bedrock Converse upstream: the request goes out as
//! Converse's, the reply (whole, streamed as AWS event-stream frames, or an error) comes back as
//! Anthropic's. Pure: no I/O. Converse mirrors Anthropic's content blocks closely: reasoning
//! keeps its signature, redacted reasoning its data, tool uses their ids.

mod stream;
#[cfg(test)]
mod tests;

use portcullis_shared::prices::Usage;
use serde_json::{json, Value};

use super::super::{Context, TranslateError};
use crate::llm::wire::anthropic as a;
use crate::llm::wire::bedrock as b;

pub use stream::TranslateStream;

pub fn translate_request(
    req: a::MessagesRequest,
    _ctx: &Context<'_>,
) -> Result<b::ConverseRequest, TranslateError> {
    let mut messages = Vec::with_capacity(req.messages.len());
    for m in req.messages {
        if m.role != "user" && m.role != "assistant" {
            return Err(TranslateError::invalid(format!(
                "messages: role {:?} must be user or assistant",
                m.role
            )));
        }
        let content = m
            .content
            .into_blocks()
            .into_iter()
            .map(block)
            .collect::<Result<_, _>>()?;
        messages.push(b::Message {
            role: m.role,
            content,
        });
    }
    let system = match req.system {
        None => Vec::new(),
        Some(a::System::Text(text)) => vec![b::SystemBlock { text }],
        Some(a::System::Blocks(blocks)) => blocks
            .into_iter()
            .filter_map(|b| match b {
                a::Block::Text { text, .. } => Some(b::SystemBlock { text }),
                _ => None,
            })
            .collect(),
    };
    let mut extra = serde_json::Map::new();
    if let Some(thinking) = req.thinking {
        extra.insert("thinking".into(), thinking);
    }
    if let Some(k) = req.top_k {
        extra.insert("top_k".into(), json!(k));
    }
    Ok(b::ConverseRequest {
        messages,
        system,
        inference_config: b::InferenceConfig {
            max_tokens: Some(req.max_tokens).filter(|n| *n > 0),
            temperature: req.temperature,
            top_p: req.top_p,
            stop_sequences: req.stop_sequences,
        },
        tool_config: tool_config(req.tools, req.tool_choice)?,
        additional_model_request_fields: (!extra.is_empty()).then_some(Value::Object(extra)),
    })
}

fn text(text: String) -> b::Block {
    b::Block {
        text: Some(text),
        ..Default::default()
    }
}

fn block(block: a::Block) -> Result<b::Block, TranslateError> {
    Ok(match block {
        a::Block::Text { text: t, .. } => text(t),
        a::Block::Image { source } => b::Block {
            image: Some(media(source, None)?),
            ..Default::default()
        },
        a::Block::Document { source, title } => match source {
            a::Source::Text { data, .. } => text(data),
            source => b::Block {
                document: Some(media(source, Some(title.unwrap_or_default()))?),
                ..Default::default()
            },
        },
        a::Block::ToolUse { id, name, input } => b::Block {
            tool_use: Some(b::ToolUse {
                tool_use_id: id,
                name,
                input,
            }),
            ..Default::default()
        },
        a::Block::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => b::Block {
            tool_result: Some(b::ToolResult {
                tool_use_id,
                content: result_content(content)?,
                status: (is_error == Some(true)).then(|| "error".to_string()),
            }),
            ..Default::default()
        },
        a::Block::Thinking {
            thinking,
            signature,
        } => b::Block {
            reasoning_content: Some(b::Reasoning {
                reasoning_text: Some(b::ReasoningText {
                    text: thinking,
                    signature: (!signature.is_empty()).then_some(signature),
                }),
                redacted_content: None,
            }),
            ..Default::default()
        },
        a::Block::RedactedThinking { data } => b::Block {
            reasoning_content: Some(b::Reasoning {
                reasoning_text: None,
                redacted_content: Some(data),
            }),
            ..Default::default()
        },
        a::Block::Other => {
            return Err(TranslateError::unsupported(
                "this content block on a Bedrock model",
            ))
        }
    })
}

fn result_content(content: Option<a::Content>) -> Result<Vec<b::Block>, TranslateError> {
    let blocks = match content {
        None => vec![text(String::new())],
        Some(content) => content
            .into_blocks()
            .into_iter()
            .map(block)
            .collect::<Result<Vec<_>, _>>()?,
    };
    Ok(blocks)
}

/// An inline image or document; Bedrock takes no links.
fn media(source: a::Source, name: Option<String>) -> Result<b::Media, TranslateError> {
    let a::Source::Base64 { media_type, data } = source else {
        return Err(TranslateError::unsupported(
            "images and documents by URL or file id on a Bedrock model (send them inline)",
        ));
    };
    let format = media_type
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .replace("plain", "txt");
    Ok(b::Media {
        format,
        // Bedrock allows letters, digits, spaces, hyphens, parentheses and brackets.
        name: name.map(|n| {
            let clean: String = n
                .chars()
                .map(|c| {
                    if c.is_alphanumeric() || " -()[]".contains(c) {
                        c
                    } else {
                        '-'
                    }
                })
                .collect();
            if clean.trim().is_empty() {
                "document".into()
            } else {
                clean
            }
        }),
        source: b::MediaSource { bytes: data },
    })
}

fn tool_config(
    tools: Vec<a::Tool>,
    choice: Option<a::ToolChoice>,
) -> Result<Option<b::ToolConfig>, TranslateError> {
    if tools.is_empty() {
        return Ok(None);
    }
    let mut specs = Vec::with_capacity(tools.len());
    for t in tools {
        if let Some(kind) = t.kind.filter(|k| k != "custom") {
            return Err(TranslateError::unsupported(&format!(
                "the server tool {kind} on a Bedrock model"
            )));
        }
        specs.push(b::Tool {
            tool_spec: b::ToolSpec {
                name: t.name,
                description: t.description,
                input_schema: b::InputSchema {
                    json: t
                        .input_schema
                        .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
                },
            },
        });
    }
    // Converse has no "none": the tools stay declared (earlier turns may use them) and the
    // choice is left to the model.
    let tool_choice = match choice {
        None | Some(a::ToolChoice::None) => None,
        Some(a::ToolChoice::Auto { .. }) => Some(json!({"auto": {}})),
        Some(a::ToolChoice::Any { .. }) => Some(json!({"any": {}})),
        Some(a::ToolChoice::Tool { name, .. }) => Some(json!({"tool": {"name": name}})),
    };
    Ok(Some(b::ToolConfig {
        tools: specs,
        tool_choice,
    }))
}

/// Converse's stop reason as Anthropic's.
pub fn stop_reason(reason: &str) -> &'static str {
    match reason {
        "tool_use" => "tool_use",
        "max_tokens" | "model_context_window_exceeded" => "max_tokens",
        "stop_sequence" => "stop_sequence",
        "guardrail_intervened" | "content_filtered" => "refusal",
        _ => "end_turn",
    }
}

/// Converse replies carry no message id: one derived from the gateway's request id.
pub fn message_id(request: &str) -> String {
    format!("msg_bedrock_{request}")
}

/// A whole Converse reply as an Anthropic message, with its metered usage.
pub fn translate_response(
    reply: b::ConverseResponse,
    ctx: &Context<'_>,
) -> (a::MessageReply, Option<Usage>) {
    let usage = reply.usage.map(|u| u.metered());
    let content = reply
        .output
        .message
        .map(|m| m.content)
        .unwrap_or_default()
        .into_iter()
        .filter_map(hub_block)
        .collect();
    let message = a::MessageReply {
        id: message_id(ctx.id),
        kind: "message".into(),
        role: "assistant".into(),
        model: ctx.upstream_model.to_string(),
        content,
        stop_reason: Some(stop_reason(reply.stop_reason.as_deref().unwrap_or("end_turn")).into()),
        stop_sequence: None,
        usage: Some(usage.as_ref().map(a::WireUsage::of).unwrap_or_default()),
    };
    (message, usage)
}

/// A Converse reply block as Anthropic's, if it has an equivalent.
fn hub_block(block: b::Block) -> Option<a::Block> {
    if let Some(t) = block.text {
        return Some(a::Block::text(t));
    }
    if let Some(u) = block.tool_use {
        return Some(a::Block::ToolUse {
            id: u.tool_use_id,
            name: u.name,
            input: u.input,
        });
    }
    let reasoning = block.reasoning_content?;
    if let Some(data) = reasoning.redacted_content {
        return Some(a::Block::RedactedThinking { data });
    }
    let text = reasoning.reasoning_text?;
    Some(a::Block::Thinking {
        thinking: text.text,
        signature: text.signature.unwrap_or_default(),
    })
}

/// The message of a Bedrock error body.
pub fn translate_error(body: &[u8]) -> Option<(String, String)> {
    b::error_message(body).map(|m| (String::new(), m))
}
