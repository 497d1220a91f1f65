//! An OpenAI chat-completions caller, an Anthropic Messages upstream: the request goes out as
//! Anthropic's, the reply (whole, streamed, or an error) comes back as OpenAI's. Pure: no I/O.
//!
//! Thinking round-trips through OpenAI's shape as `reasoning_content` plus `thinking_blocks`
//! (each with its signature), which the caller sends back on the assistant message.

mod stream;
#[cfg(test)]
mod tests;

use portcullis_shared::prices::Usage;
use serde_json::Value;

use super::super::{data_url, Context, TranslateError};
use crate::llm::wire::anthropic as a;
use crate::llm::wire::openai as o;

pub use stream::TranslateStream;

/// Output tokens asked for when the caller sets no limit (Anthropic requires one); every
/// current Claude model accepts it.
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

pub fn translate_request(
    req: o::ChatRequest,
    ctx: &Context<'_>,
) -> Result<a::MessagesRequest, TranslateError> {
    if req.n.unwrap_or(1) > 1 {
        return Err(TranslateError::unsupported("n greater than 1"));
    }
    if req
        .response_format
        .as_ref()
        .is_some_and(|f| f["type"] != "text")
    {
        return Err(TranslateError::unsupported(
            "response_format (structured output)",
        ));
    }
    let max_tokens = req.max_output().unwrap_or(DEFAULT_MAX_TOKENS);
    let mut system = Vec::new();
    let mut messages: Vec<a::Message> = Vec::new();
    for m in req.messages {
        let (role, blocks) = match m.role.as_str() {
            "system" | "developer" => {
                system.extend(text_blocks(m.content)?);
                continue;
            }
            "user" => ("user", user_blocks(m.content)?),
            "assistant" => ("assistant", assistant_blocks(m)?),
            "tool" => ("user", vec![tool_result(m)?]),
            other => {
                return Err(TranslateError::invalid(format!(
                    "messages: role {other:?} is not one the gateway can translate"
                )))
            }
        };
        push_turn(&mut messages, role, blocks);
    }
    let disable_parallel = req.parallel_tool_calls.map(|p| !p);
    Ok(a::MessagesRequest {
        model: if ctx.vertex {
            String::new()
        } else {
            ctx.upstream_model.to_string()
        },
        anthropic_version: ctx.vertex.then(|| a::VERTEX_VERSION.to_string()),
        messages,
        system: (!system.is_empty()).then_some(a::System::Blocks(system)),
        max_tokens,
        stop_sequences: match req.stop {
            None => Vec::new(),
            Some(o::Stop::One(s)) => vec![s],
            Some(o::Stop::Many(list)) => list,
        },
        temperature: req.temperature,
        top_p: req.top_p,
        top_k: None,
        stream: req.stream,
        tools: req.tools.into_iter().map(tool).collect(),
        tool_choice: req
            .tool_choice
            .map(|c| tool_choice(c, disable_parallel))
            .transpose()?,
        metadata: req.user.map(|u| a::Metadata { user_id: Some(u) }),
        thinking: req
            .thinking
            .or_else(|| thinking_for_effort(req.reasoning_effort.as_deref())),
    })
}

/// Consecutive turns of one role become one message (tool results follow each other as
/// blocks of one user turn, as Anthropic requires).
fn push_turn(messages: &mut Vec<a::Message>, role: &str, blocks: Vec<a::Block>) {
    if let Some(last) = messages.last_mut().filter(|m| m.role == role) {
        if let a::Content::Blocks(existing) = &mut last.content {
            existing.extend(blocks);
            return;
        }
    }
    messages.push(a::Message {
        role: role.to_string(),
        content: a::Content::Blocks(blocks),
    });
}

/// `reasoning_effort` as a thinking budget.
fn thinking_for_effort(effort: Option<&str>) -> Option<Value> {
    let budget = match effort? {
        "minimal" | "low" => 1024,
        "medium" => 4096,
        "high" => 16384,
        _ => return None,
    };
    Some(serde_json::json!({"type": "enabled", "budget_tokens": budget}))
}

fn text_blocks(content: Option<o::Content>) -> Result<Vec<a::Block>, TranslateError> {
    match content {
        None => Ok(Vec::new()),
        Some(o::Content::Text(t)) => Ok(vec![a::Block::text(t)]),
        Some(o::Content::Parts(parts)) => parts
            .into_iter()
            .map(|p| match p {
                o::Part::Text { text } => Ok(a::Block::text(text)),
                _ => Err(TranslateError::invalid(
                    "system messages may hold text parts only",
                )),
            })
            .collect(),
    }
}

fn user_blocks(content: Option<o::Content>) -> Result<Vec<a::Block>, TranslateError> {
    let parts = match content {
        None => return Ok(Vec::new()),
        Some(o::Content::Text(t)) => return Ok(vec![a::Block::text(t)]),
        Some(o::Content::Parts(parts)) => parts,
    };
    parts.into_iter().map(user_part).collect()
}

fn user_part(part: o::Part) -> Result<a::Block, TranslateError> {
    Ok(match part {
        o::Part::Text { text } => a::Block::text(text),
        o::Part::Refusal { refusal } => a::Block::text(refusal),
        o::Part::ImageUrl { image_url } => a::Block::Image {
            source: source_of(&image_url.url),
        },
        o::Part::File { file } => {
            let data = file.file_data.ok_or_else(|| {
                TranslateError::unsupported("file parts by file_id (send file_data)")
            })?;
            let (media_type, data) = data_url(&data)
                .ok_or_else(|| TranslateError::invalid("file_data must be a base64 data: URL"))?;
            a::Block::Document {
                source: a::Source::Base64 { media_type, data },
                title: file.filename,
            }
        }
        o::Part::InputAudio { .. } => {
            return Err(TranslateError::unsupported("audio input"));
        }
    })
}

/// An image URL as an Anthropic source: inline data stays inline, anything else is fetched by
/// the provider.
fn source_of(url: &str) -> a::Source {
    match data_url(url) {
        Some((media_type, data)) => a::Source::Base64 { media_type, data },
        None => a::Source::Url {
            url: url.to_string(),
        },
    }
}

fn assistant_blocks(m: o::Message) -> Result<Vec<a::Block>, TranslateError> {
    let mut blocks: Vec<a::Block> = m
        .thinking_blocks
        .into_iter()
        .map(|t| match t.kind.as_str() {
            "redacted_thinking" => a::Block::RedactedThinking {
                data: t.data.unwrap_or_default(),
            },
            _ => a::Block::Thinking {
                thinking: t.thinking.unwrap_or_default(),
                signature: t.signature.unwrap_or_default(),
            },
        })
        .collect();
    blocks.extend(
        text_blocks(m.content)?
            .into_iter()
            .filter(|b| !matches!(b, a::Block::Text { text, .. } if text.is_empty())),
    );
    for call in m.tool_calls {
        let input = if call.function.arguments.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            serde_json::from_str(&call.function.arguments).map_err(|_| {
                TranslateError::invalid(format!("tool call {}: arguments are not JSON", call.id))
            })?
        };
        blocks.push(a::Block::ToolUse {
            id: call.id,
            name: call.function.name,
            input,
        });
    }
    Ok(blocks)
}

fn tool_result(m: o::Message) -> Result<a::Block, TranslateError> {
    let id = m
        .tool_call_id
        .ok_or_else(|| TranslateError::invalid("a tool message needs tool_call_id"))?;
    let content = match m.content {
        None => None,
        Some(o::Content::Text(t)) => Some(a::Content::Text(t)),
        Some(o::Content::Parts(parts)) => Some(a::Content::Blocks(
            parts.into_iter().map(user_part).collect::<Result<_, _>>()?,
        )),
    };
    Ok(a::Block::ToolResult {
        tool_use_id: id,
        content,
        is_error: None,
    })
}

fn tool(t: o::Tool) -> a::Tool {
    a::Tool {
        kind: None,
        name: t.function.name,
        description: t.function.description,
        input_schema: Some(
            t.function
                .parameters
                .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}})),
        ),
    }
}

fn tool_choice(
    choice: o::ToolChoice,
    disable_parallel_tool_use: Option<bool>,
) -> Result<a::ToolChoice, TranslateError> {
    Ok(match choice {
        o::ToolChoice::Mode(mode) => match mode.as_str() {
            "none" => a::ToolChoice::None,
            "auto" => a::ToolChoice::Auto {
                disable_parallel_tool_use,
            },
            "required" => a::ToolChoice::Any {
                disable_parallel_tool_use,
            },
            other => {
                return Err(TranslateError::invalid(format!(
                    "tool_choice {other:?} is not none, auto or required"
                )))
            }
        },
        o::ToolChoice::Named { function, .. } => a::ToolChoice::Tool {
            name: function.name,
            disable_parallel_tool_use,
        },
    })
}

/// Anthropic's stop reason as OpenAI's finish reason.
pub fn finish_reason(stop_reason: &str) -> &'static str {
    match stop_reason {
        "max_tokens" | "model_context_window_exceeded" => "length",
        "tool_use" => "tool_calls",
        "refusal" => "content_filter",
        _ => "stop",
    }
}

/// A whole Anthropic message as an OpenAI chat completion, with its metered usage.
pub fn translate_response(
    reply: a::MessageReply,
    ctx: &Context<'_>,
) -> (o::ChatCompletion, Option<Usage>) {
    let usage = reply.usage.map(|u| u.metered());
    let mut message = o::AssistantMessage {
        role: "assistant".into(),
        ..Default::default()
    };
    let mut text = String::new();
    let mut reasoning = String::new();
    for block in reply.content {
        match block {
            a::Block::Text { text: t, .. } => text.push_str(&t),
            a::Block::ToolUse { id, name, input } => message.tool_calls.push(o::ToolCall {
                id,
                kind: "function".into(),
                function: o::FunctionCall {
                    name,
                    arguments: input.to_string(),
                },
            }),
            a::Block::Thinking {
                thinking,
                signature,
            } => {
                reasoning.push_str(&thinking);
                message.thinking_blocks.push(o::ThinkingBlock {
                    kind: "thinking".into(),
                    thinking: Some(thinking),
                    signature: Some(signature),
                    data: None,
                });
            }
            a::Block::RedactedThinking { data } => message.thinking_blocks.push(o::ThinkingBlock {
                kind: "redacted_thinking".into(),
                thinking: None,
                signature: None,
                data: Some(data),
            }),
            _ => {}
        }
    }
    message.content = (!text.is_empty() || message.tool_calls.is_empty()).then_some(text);
    message.reasoning_content = (!reasoning.is_empty()).then_some(reasoning);
    let completion = o::ChatCompletion {
        id: completion_id(&reply.id),
        object: "chat.completion".into(),
        created: ctx.created,
        model: reply.model,
        choices: vec![o::Choice {
            index: 0,
            message,
            finish_reason: Some(
                finish_reason(reply.stop_reason.as_deref().unwrap_or("end_turn")).into(),
            ),
        }],
        usage: usage.as_ref().map(o::WireUsage::of),
    };
    (completion, usage)
}

/// The completion id for an Anthropic message id (stable, so retries match).
fn completion_id(message_id: &str) -> String {
    format!("chatcmpl-{message_id}")
}

/// The message of an Anthropic error body, and its type.
pub fn translate_error(body: &[u8]) -> Option<(String, String)> {
    let e: a::ErrorBody = serde_json::from_slice(body).ok()?;
    Some((e.error.kind, e.error.message))
}
