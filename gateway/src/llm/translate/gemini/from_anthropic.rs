//! An Anthropic Messages caller, a Gemini upstream (the Gemini API, or Gemini on Vertex): the
//! request goes out as `generateContent`, the reply (whole, streamed, or an error) comes back
//! as Anthropic's. Pure: no I/O. OpenAI callers reach Gemini through this module too
//! (`from_openai.rs`), Anthropic's shape being the richer of the two.
//!
//! Gemini's `thoughtSignature` must come back on the same part in the next turn. It travels in
//! a thinking block: a thought part becomes a thinking block with its text and signature; a
//! signature on any other part becomes an empty thinking block just before that part's block.
//! Signatures are marked `gemini:` so that only Gemini's own are ever given back to Gemini.

mod stream;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

use portcullis_shared::prices::Usage;
use serde_json::{json, Value};

use super::super::{Context, TranslateError};
use crate::llm::wire::anthropic as a;
use crate::llm::wire::gemini as g;

pub use stream::TranslateStream;

/// Marks a thought signature as Gemini's.
const SIGNATURE_MARK: &str = "gemini:";

pub fn translate_request(
    req: a::MessagesRequest,
    _ctx: &Context<'_>,
) -> Result<g::GenerateRequest, TranslateError> {
    // Gemini answers a function by name: the names of the tool uses the results answer.
    let names: HashMap<String, String> = req
        .messages
        .iter()
        .filter_map(|m| match &m.content {
            a::Content::Blocks(blocks) => Some(blocks),
            a::Content::Text(_) => None,
        })
        .flatten()
        .filter_map(|b| match b {
            a::Block::ToolUse { id, name, .. } => Some((id.clone(), name.clone())),
            _ => None,
        })
        .collect();
    let mut contents = Vec::with_capacity(req.messages.len());
    for m in req.messages {
        let role = match m.role.as_str() {
            "user" => "user",
            "assistant" => "model",
            other => {
                return Err(TranslateError::invalid(format!(
                    "messages: role {other:?} must be user or assistant"
                )))
            }
        };
        contents.push(g::Content {
            role: Some(role.into()),
            parts: parts(m.content.into_blocks(), &names)?,
        });
    }
    let system_instruction = req.system.map(|s| g::Content {
        role: None,
        parts: match s {
            a::System::Text(t) => vec![text_part(t)],
            a::System::Blocks(blocks) => blocks
                .into_iter()
                .filter_map(|b| match b {
                    a::Block::Text { text, .. } => Some(text_part(text)),
                    _ => None,
                })
                .collect(),
        },
    });
    Ok(g::GenerateRequest {
        contents,
        system_instruction,
        tools: tools(req.tools)?,
        tool_config: req.tool_choice.map(tool_config),
        generation_config: g::GenerationConfig {
            max_output_tokens: Some(req.max_tokens).filter(|n| *n > 0),
            temperature: req.temperature,
            top_p: req.top_p,
            top_k: req.top_k,
            stop_sequences: req.stop_sequences,
            thinking_config: thinking(req.thinking.as_ref()),
        },
    })
}

fn text_part(text: String) -> g::Part {
    g::Part {
        text: Some(text),
        ..Default::default()
    }
}

/// Anthropic's `{"type": "enabled", "budget_tokens": n}` as a thinking budget.
fn thinking(setting: Option<&Value>) -> Option<g::ThinkingConfig> {
    let setting = setting?;
    (setting["type"] == "enabled").then(|| g::ThinkingConfig {
        thinking_budget: setting["budget_tokens"].as_u64().unwrap_or(1024),
        include_thoughts: true,
    })
}

fn parts(
    blocks: Vec<a::Block>,
    names: &HashMap<String, String>,
) -> Result<Vec<g::Part>, TranslateError> {
    let mut out = Vec::with_capacity(blocks.len());
    // A signature waiting for the part it belongs to.
    let mut pending: Option<String> = None;
    for block in blocks {
        let mut part = match block {
            a::Block::Thinking {
                thinking,
                signature,
            } => {
                let own = signature.strip_prefix(SIGNATURE_MARK).map(str::to_string);
                if thinking.is_empty() {
                    pending = own;
                    continue;
                }
                g::Part {
                    text: Some(thinking),
                    thought: true,
                    thought_signature: own,
                    ..Default::default()
                }
            }
            a::Block::RedactedThinking { .. } => continue,
            a::Block::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                let name = names.get(&tool_use_id).cloned().ok_or_else(|| {
                    TranslateError::invalid(format!(
                        "tool_result {tool_use_id} answers no tool_use of an earlier turn"
                    ))
                })?;
                let (text, media) = result_content(content, names)?;
                let response = if is_error == Some(true) {
                    json!({"error": text})
                } else {
                    json!({"result": text})
                };
                out.push(g::Part {
                    function_response: Some(g::FunctionResponse {
                        id: Some(split_tool_use_id(&tool_use_id).0.to_string()),
                        name,
                        response,
                    }),
                    ..Default::default()
                });
                out.extend(media);
                continue;
            }
            other => part(other)?,
        };
        // A signature from a thinking block comes before one carried by a tool-use id.
        if let Some(signature) = pending.take() {
            if part.function_call.is_some() || part.thought_signature.is_none() {
                part.thought_signature = Some(signature);
            }
        }
        out.push(part);
    }
    Ok(out)
}

/// A tool result's text, and its images as parts of their own.
fn result_content(
    content: Option<a::Content>,
    names: &HashMap<String, String>,
) -> Result<(String, Vec<g::Part>), TranslateError> {
    let blocks = match content {
        None => return Ok((String::new(), Vec::new())),
        Some(a::Content::Text(t)) => return Ok((t, Vec::new())),
        Some(a::Content::Blocks(blocks)) => blocks,
    };
    let mut text = Vec::new();
    let mut media = Vec::new();
    for b in blocks {
        match b {
            a::Block::Text { text: t, .. } => text.push(t),
            other => media.extend(parts(vec![other], names)?),
        }
    }
    Ok((text.join("\n"), media))
}

fn part(block: a::Block) -> Result<g::Part, TranslateError> {
    Ok(match block {
        a::Block::Text { text, .. } => text_part(text),
        a::Block::Image { source } | a::Block::Document { source, .. } => media(source)?,
        a::Block::ToolUse { id, name, input } => {
            let (own, signature) = split_tool_use_id(&id);
            g::Part {
                function_call: Some(g::FunctionCall {
                    id: Some(own.to_string()),
                    name,
                    args: input,
                }),
                thought_signature: signature,
                ..Default::default()
            }
        }
        _ => {
            return Err(TranslateError::unsupported(
                "this content block on a Gemini model",
            ))
        }
    })
}

fn media(source: a::Source) -> Result<g::Part, TranslateError> {
    Ok(match source {
        a::Source::Base64 { media_type, data } => g::Part {
            inline_data: Some(g::Blob {
                mime_type: media_type,
                data,
            }),
            ..Default::default()
        },
        a::Source::Text { data, .. } => text_part(data),
        a::Source::Url { url } => g::Part {
            file_data: Some(g::FileData {
                mime_type: mime_of(&url).into(),
                file_uri: url,
            }),
            ..Default::default()
        },
        a::Source::File { .. } => {
            return Err(TranslateError::unsupported("files by id on a Gemini model"))
        }
    })
}

/// The media type of a linked file, by its extension.
fn mime_of(url: &str) -> &'static str {
    let path = url
        .split(['?', '#'])
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    match path.rsplit('.').next() {
        Some("png") => "image/png",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        Some("pdf") => "application/pdf",
        _ => "image/jpeg",
    }
}

fn tools(list: Vec<a::Tool>) -> Result<Vec<g::Tool>, TranslateError> {
    if list.is_empty() {
        return Ok(Vec::new());
    }
    let mut declarations = Vec::with_capacity(list.len());
    for t in list {
        if let Some(kind) = t.kind.filter(|k| k != "custom") {
            return Err(TranslateError::unsupported(&format!(
                "the server tool {kind} on a Gemini model"
            )));
        }
        declarations.push(g::FunctionDeclaration {
            name: t.name,
            description: t.description,
            parameters_json_schema: t.input_schema,
        });
    }
    Ok(vec![g::Tool {
        function_declarations: declarations,
    }])
}

fn tool_config(choice: a::ToolChoice) -> g::ToolConfig {
    let (mode, allowed) = match choice {
        a::ToolChoice::Auto { .. } => ("AUTO", Vec::new()),
        a::ToolChoice::Any { .. } => ("ANY", Vec::new()),
        a::ToolChoice::Tool { name, .. } => ("ANY", vec![name]),
        a::ToolChoice::None => ("NONE", Vec::new()),
    };
    g::ToolConfig {
        function_calling_config: g::FunctionCallingConfig {
            mode,
            allowed_function_names: allowed,
        },
    }
}

/// Gemini's finish reason as Anthropic's stop reason.
pub fn stop_reason(finish_reason: &str, called_tools: bool) -> &'static str {
    match finish_reason {
        "MAX_TOKENS" => "max_tokens",
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY"
        | "LANGUAGE" => "refusal",
        _ if called_tools => "tool_use",
        _ => "end_turn",
    }
}

/// The id of the `n`th function call of a reply that gave it none: derived from the reply, so
/// the same reply always gets the same ids.
pub fn call_id(reply_id: &str, n: usize) -> String {
    format!("toolu_{reply_id}_{n}")
}

/// Separates a tool-use id from the thought signature it carries.
const SIGNED: &str = "__ts_";

/// The id a function call travels under: its own (or one derived from the reply), followed by
/// its thought signature in base64url when it has one. Gemini wants the signature back on the
/// call, and the id is what every caller sends back (OpenAI's SDKs keep only `id` and
/// `function` of a tool call); the result stays a valid Anthropic and OpenAI tool id.
pub fn tool_use_id(
    own: Option<String>,
    reply_id: &str,
    n: usize,
    signature: Option<&str>,
) -> String {
    let id = own.unwrap_or_else(|| call_id(reply_id, n));
    let base64 = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
    };
    match signature.filter(|s| !s.is_empty() && base64(s)) {
        Some(s) => {
            let safe: String = s
                .chars()
                .filter(|c| *c != '=')
                .map(|c| match c {
                    '+' => '-',
                    '/' => '_',
                    c => c,
                })
                .collect();
            format!("{id}{SIGNED}{safe}")
        }
        None => id,
    }
}

/// A tool-use id as Gemini gave it, and the thought signature it carries.
pub fn split_tool_use_id(id: &str) -> (&str, Option<String>) {
    let Some((own, safe)) = id.rsplit_once(SIGNED) else {
        return (id, None);
    };
    let mut signature: String = safe
        .chars()
        .map(|c| match c {
            '-' => '+',
            '_' => '/',
            c => c,
        })
        .collect();
    while !signature.len().is_multiple_of(4) {
        signature.push('=');
    }
    (own, Some(signature))
}

/// A signature as it travels in a thinking block.
pub fn marked(signature: &str) -> String {
    format!("{SIGNATURE_MARK}{signature}")
}

/// The reply's id, or one derived from the gateway's request id.
pub fn reply_id(reply: &g::GenerateResponse, request: &str) -> String {
    reply
        .response_id
        .clone()
        .unwrap_or_else(|| format!("gw_{request}"))
}

/// A whole Gemini reply as an Anthropic message, with its metered usage.
pub fn translate_response(
    reply: g::GenerateResponse,
    ctx: &Context<'_>,
) -> (a::MessageReply, Option<Usage>) {
    let id = reply_id(&reply, ctx.id);
    let usage = reply.usage_metadata.map(|u| u.metered());
    let candidate = reply.candidates.into_iter().next().unwrap_or_default();
    let mut content = Vec::new();
    let mut calls = 0;
    for p in candidate.content.unwrap_or_default().parts {
        let signature = p.thought_signature.as_deref().map(marked);
        if p.thought {
            content.push(a::Block::Thinking {
                thinking: p.text.unwrap_or_default(),
                signature: signature.unwrap_or_default(),
            });
            continue;
        }
        if let Some(signature) = signature {
            content.push(a::Block::Thinking {
                thinking: String::new(),
                signature,
            });
        }
        if let Some(call) = p.function_call {
            let raw = p.thought_signature.as_deref();
            content.push(a::Block::ToolUse {
                id: tool_use_id(call.id, &id, calls, raw),
                name: call.name,
                input: call.args,
            });
            calls += 1;
        } else if let Some(text) = p.text {
            content.push(a::Block::text(text));
        }
    }
    let blocked = reply.prompt_feedback.and_then(|f| f.block_reason).is_some();
    let stop = match candidate.finish_reason.as_deref() {
        _ if blocked => "refusal",
        Some(reason) => stop_reason(reason, calls > 0),
        None => stop_reason("STOP", calls > 0),
    };
    let message = a::MessageReply {
        id: format!("msg_{id}"),
        kind: "message".into(),
        role: "assistant".into(),
        model: reply
            .model_version
            .unwrap_or_else(|| ctx.upstream_model.to_string()),
        content,
        stop_reason: Some(stop.into()),
        stop_sequence: None,
        usage: Some(usage.as_ref().map(a::WireUsage::of).unwrap_or_default()),
    };
    (message, usage)
}

/// The status and message of a Gemini error body.
pub fn translate_error(body: &[u8]) -> Option<(String, String)> {
    g::ErrorBody::read(body)
}
