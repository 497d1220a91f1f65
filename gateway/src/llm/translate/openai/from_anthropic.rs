//! An Anthropic Messages caller, an OpenAI-shaped upstream: the request goes out as an OpenAI
//! chat completion, the reply (whole, streamed, or an error) comes back as Anthropic's. Pure:
//! no I/O.
//!
//! Thinking blocks the caller sends back cannot be given to an OpenAI-shaped model and are
//! left out; reasoning text such a model returns comes back as a thinking block without a
//! signature.

mod stream;
#[cfg(test)]
mod tests;

use portcullis_shared::prices::Usage;
use serde_json::Value;

use super::super::{Context, TranslateError};
use crate::llm::wire::anthropic as a;
use crate::llm::wire::openai as o;

pub use stream::TranslateStream;

pub fn translate_request(
    req: a::MessagesRequest,
    ctx: &Context<'_>,
) -> Result<o::OutgoingChat, TranslateError> {
    let mut messages = Vec::new();
    if let Some(system) = req.system {
        let text = match system {
            a::System::Text(t) => t,
            a::System::Blocks(blocks) => join_text(&blocks),
        };
        messages.push(o::Message {
            role: "system".into(),
            content: Some(o::Content::Text(text)),
            ..Default::default()
        });
    }
    for m in req.messages {
        match m.role.as_str() {
            "user" => user_turn(m.content.into_blocks(), &mut messages)?,
            "assistant" => messages.push(assistant_turn(m.content.into_blocks())),
            other => {
                return Err(TranslateError::invalid(format!(
                    "messages: role {other:?} must be user or assistant"
                )))
            }
        }
    }
    let mut tools = Vec::with_capacity(req.tools.len());
    for t in req.tools {
        if let Some(kind) = t.kind.filter(|k| k != "custom") {
            return Err(TranslateError::unsupported(&format!(
                "the server tool {kind} on a model that is not Anthropic's"
            )));
        }
        tools.push(o::Tool {
            kind: "function".into(),
            function: o::FunctionDef {
                name: t.name,
                description: t.description,
                parameters: t.input_schema,
            },
        });
    }
    let (tool_choice, parallel_tool_calls) = match req.tool_choice {
        None => (None, None),
        Some(choice) => tool_choice(choice),
    };
    // OpenAI's own reasoning models take only `max_completion_tokens`; other OpenAI-shaped
    // providers know `max_tokens`.
    let (max_tokens, max_completion_tokens) = match ctx.provider {
        "openai" | "azure_openai" => (None, Some(req.max_tokens)),
        _ => (Some(req.max_tokens), None),
    };
    Ok(o::OutgoingChat {
        model: ctx.upstream_model.to_string(),
        messages,
        max_tokens,
        max_completion_tokens,
        temperature: req.temperature,
        top_p: req.top_p,
        stop: req.stop_sequences,
        stream: req.stream,
        stream_options: req.stream.then_some(o::StreamOptions {
            include_usage: true,
        }),
        tools,
        tool_choice,
        parallel_tool_calls,
        user: req.metadata.and_then(|m| m.user_id),
    })
}

fn join_text(blocks: &[a::Block]) -> String {
    blocks
        .iter()
        .filter_map(|b| match b {
            a::Block::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A user turn: its tool results first, as `tool` messages (OpenAI wants them right after the
/// assistant's calls), then the rest as one user message.
fn user_turn(blocks: Vec<a::Block>, out: &mut Vec<o::Message>) -> Result<(), TranslateError> {
    let mut parts = Vec::new();
    for block in blocks {
        match block {
            a::Block::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                let (text, images) = tool_result_content(content)?;
                let text = if is_error == Some(true) && !text.is_empty() {
                    format!("Error: {text}")
                } else {
                    text
                };
                out.push(o::Message {
                    role: "tool".into(),
                    content: Some(o::Content::Text(text)),
                    tool_call_id: Some(tool_use_id),
                    ..Default::default()
                });
                parts.extend(images);
            }
            other => {
                if let Some(part) = user_part(other)? {
                    parts.push(part);
                }
            }
        }
    }
    let content = match parts.as_slice() {
        [] => return Ok(()),
        [o::Part::Text { text }] => o::Content::Text(text.clone()),
        _ => o::Content::Parts(parts),
    };
    out.push(o::Message {
        role: "user".into(),
        content: Some(content),
        ..Default::default()
    });
    Ok(())
}

/// A tool result's text, and its images as parts of the user message that follows.
fn tool_result_content(
    content: Option<a::Content>,
) -> Result<(String, Vec<o::Part>), TranslateError> {
    let blocks = match content {
        None => return Ok((String::new(), Vec::new())),
        Some(a::Content::Text(t)) => return Ok((t, Vec::new())),
        Some(a::Content::Blocks(blocks)) => blocks,
    };
    let text = join_text(&blocks);
    let mut images = Vec::new();
    for block in blocks {
        if let a::Block::Image { .. } | a::Block::Document { .. } = block {
            images.extend(user_part(block)?);
        }
    }
    Ok((text, images))
}

fn user_part(block: a::Block) -> Result<Option<o::Part>, TranslateError> {
    Ok(Some(match block {
        a::Block::Text { text, .. } => o::Part::Text { text },
        a::Block::Image { source } => o::Part::ImageUrl {
            image_url: o::ImageUrl {
                url: source_url(source)?,
                detail: None,
            },
        },
        a::Block::Document { source, title } => match source {
            a::Source::Text { data, .. } => o::Part::Text { text: data },
            a::Source::Base64 { media_type, data } => o::Part::File {
                file: o::File {
                    file_data: Some(format!("data:{media_type};base64,{data}")),
                    file_id: None,
                    filename: Some(title.unwrap_or_else(|| "document.pdf".into())),
                },
            },
            _ => {
                return Err(TranslateError::unsupported(
                    "documents by URL or file id on a model that is not Anthropic's",
                ))
            }
        },
        a::Block::Thinking { .. } | a::Block::RedactedThinking { .. } => return Ok(None),
        a::Block::ToolUse { .. } => {
            return Err(TranslateError::invalid(
                "tool_use blocks belong in assistant turns",
            ))
        }
        _ => {
            return Err(TranslateError::unsupported(
                "this content block on a model that is not Anthropic's",
            ))
        }
    }))
}

fn source_url(source: a::Source) -> Result<String, TranslateError> {
    match source {
        a::Source::Base64 { media_type, data } => Ok(format!("data:{media_type};base64,{data}")),
        a::Source::Url { url } => Ok(url),
        _ => Err(TranslateError::unsupported(
            "images by file id on a model that is not Anthropic's",
        )),
    }
}

fn assistant_turn(blocks: Vec<a::Block>) -> o::Message {
    let mut text = String::new();
    let mut calls = Vec::new();
    for block in blocks {
        match block {
            a::Block::Text { text: t, .. } => text.push_str(&t),
            a::Block::ToolUse { id, name, input } => calls.push(o::ToolCall {
                id,
                kind: "function".into(),
                function: o::FunctionCall {
                    name,
                    arguments: input.to_string(),
                },
            }),
            _ => {}
        }
    }
    o::Message {
        role: "assistant".into(),
        content: (!text.is_empty() || calls.is_empty()).then_some(o::Content::Text(text)),
        tool_calls: calls,
        ..Default::default()
    }
}

fn tool_choice(choice: a::ToolChoice) -> (Option<o::ToolChoice>, Option<bool>) {
    let mode = |m: &str| Some(o::ToolChoice::Mode(m.into()));
    let parallel = |d: Option<bool>| d.map(|disable| !disable);
    match choice {
        a::ToolChoice::None => (mode("none"), None),
        a::ToolChoice::Auto {
            disable_parallel_tool_use,
        } => (mode("auto"), parallel(disable_parallel_tool_use)),
        a::ToolChoice::Any {
            disable_parallel_tool_use,
        } => (mode("required"), parallel(disable_parallel_tool_use)),
        a::ToolChoice::Tool {
            name,
            disable_parallel_tool_use,
        } => (
            Some(o::ToolChoice::Named {
                kind: "function".into(),
                function: o::NamedFunction { name },
            }),
            parallel(disable_parallel_tool_use),
        ),
    }
}

/// OpenAI's finish reason as Anthropic's stop reason.
pub fn stop_reason(finish_reason: &str) -> &'static str {
    match finish_reason {
        "length" => "max_tokens",
        "tool_calls" | "function_call" => "tool_use",
        "content_filter" => "refusal",
        _ => "end_turn",
    }
}

/// A tool call's arguments as Anthropic's `input` object; text that is not a JSON object is
/// kept whole under `_unparsed_arguments`.
fn input_of(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ if arguments.trim().is_empty() => Value::Object(Default::default()),
        _ => serde_json::json!({"_unparsed_arguments": arguments}),
    }
}

fn message_id(id: &str) -> String {
    if id.starts_with("msg_") {
        id.to_string()
    } else {
        format!("msg_{id}")
    }
}

/// A whole OpenAI chat completion as an Anthropic message, with its metered usage (`None` when
/// the upstream reported none).
pub fn translate_response(
    completion: o::ChatCompletion,
    ctx: &Context<'_>,
) -> (a::MessageReply, Option<Usage>) {
    let usage = completion.usage.map(|u| u.metered());
    let choice = completion.choices.into_iter().next().unwrap_or_default();
    let m = choice.message;
    let mut content = Vec::new();
    if let Some(reasoning) = m.reasoning_content.filter(|r| !r.is_empty()) {
        content.push(a::Block::Thinking {
            thinking: reasoning,
            signature: String::new(),
        });
    }
    if let Some(text) = m.content.or(m.refusal).filter(|t| !t.is_empty()) {
        content.push(a::Block::text(text));
    }
    for call in m.tool_calls {
        content.push(a::Block::ToolUse {
            input: input_of(&call.function.arguments),
            id: call.id,
            name: call.function.name,
        });
    }
    let reply = a::MessageReply {
        id: message_id(&completion.id),
        kind: "message".into(),
        role: "assistant".into(),
        model: if completion.model.is_empty() {
            ctx.upstream_model.to_string()
        } else {
            completion.model
        },
        content,
        stop_reason: Some(stop_reason(choice.finish_reason.as_deref().unwrap_or("stop")).into()),
        stop_sequence: None,
        usage: Some(usage.as_ref().map(a::WireUsage::of).unwrap_or_default()),
    };
    (reply, usage)
}

/// The message of an OpenAI error body, and its type.
pub fn translate_error(body: &[u8]) -> Option<(String, String)> {
    let e: o::ErrorBody = serde_json::from_slice(body).ok()?;
    Some((e.error.kind.unwrap_or_default(), e.error.message))
}
