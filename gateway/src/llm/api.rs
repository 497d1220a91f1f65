//! Step four for model calls, first: the API the caller spoke. Each inbound API module reads a
//! request into what the gateway decides on — the model name, whether it streams, its output
//! limits and attachments (for the quota worst case) — and keeps the body for pass-through and
//! translation. Replies and errors in each API's shape are written by [`crate::respond`].

pub mod anthropic_messages;
pub mod openai_chat;

use bytes::Bytes;
use http::HeaderValue;
use serde_json::Value;

use crate::error::GatewayError;
use crate::error::Shape;

/// The two model APIs agents call the gateway with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboundApi {
    /// `POST …/v1/chat/completions`.
    OpenAiChat,
    /// `POST …/v1/messages`.
    AnthropicMessages,
}

impl InboundApi {
    /// The name audit events record.
    pub fn as_str(self) -> &'static str {
        match self {
            InboundApi::OpenAiChat => "openai.chat.completions",
            InboundApi::AnthropicMessages => "anthropic.messages",
        }
    }

    /// The shape its errors take.
    pub fn shape(self) -> Shape {
        match self {
            InboundApi::OpenAiChat => Shape::OpenAi,
            InboundApi::AnthropicMessages => Shape::Anthropic,
        }
    }

    /// The path under `/v1` a `custom` upstream receives the request on.
    pub fn path(self) -> &'static str {
        match self {
            InboundApi::OpenAiChat => "/chat/completions",
            InboundApi::AnthropicMessages => "/messages",
        }
    }
}

/// What bounds a call's cost, for the quota worst case.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// The output tokens the request allows (per choice), when it sets a limit.
    pub max_output: Option<u64>,
    /// Choices asked for (OpenAI's `n`).
    pub choices: u64,
    /// Image parts anywhere in the messages.
    pub images: u64,
    /// File and document parts anywhere in the messages.
    pub files: u64,
}

/// One model request, read.
#[derive(Debug, Clone)]
pub struct Inbound {
    pub api: InboundApi,
    /// The body as the caller sent it (`custom` upstreams receive it untouched).
    pub raw: Bytes,
    /// The body parsed: always a JSON object.
    pub body: Value,
    pub model: String,
    pub stream: bool,
    /// OpenAI: the caller asked for the usage chunk (`stream_options.include_usage`).
    pub wants_usage: bool,
    pub limits: Limits,
    /// Anthropic callers' `anthropic-version` and `anthropic-beta`, for Anthropic upstreams.
    pub anthropic_version: Option<HeaderValue>,
    pub anthropic_beta: Option<HeaderValue>,
    /// The streamed-output filter window the caller asks for (`x-svc-filter-window-bytes`,
    /// `x-svc-filter-window-tokens`), in bytes; a larger workspace or model window wins.
    pub filter_window: usize,
}

impl Inbound {
    /// Reads a request body sent to `api`.
    pub fn parse(
        api: InboundApi,
        raw: Bytes,
        headers: &http::HeaderMap,
    ) -> Result<Self, GatewayError> {
        let body: Value = serde_json::from_slice(&raw).map_err(|e| {
            GatewayError::BadRequest(format!("the request body is not a JSON object: {e}"))
        })?;
        let Value::Object(fields) = &body else {
            return Err(GatewayError::BadRequest(
                "the request body must be a JSON object".into(),
            ));
        };
        let model = match fields.get("model") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => {
                return Err(GatewayError::BadRequest(
                    "`model` is required: the name of a model or pool on this gateway".into(),
                ))
            }
        };
        let stream = match fields.get("stream") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(GatewayError::BadRequest(
                    "`stream` must be a boolean".into(),
                ))
            }
        };
        let (limits, wants_usage) = match api {
            InboundApi::OpenAiChat => openai_chat::read(fields, stream)?,
            InboundApi::AnthropicMessages => (anthropic_messages::read(fields)?, false),
        };
        let header = |name: &str| headers.get(name).cloned();
        let filter_window = filter_window(headers)?;
        Ok(Self {
            api,
            raw,
            model,
            stream,
            wants_usage,
            limits,
            anthropic_version: header("anthropic-version"),
            anthropic_beta: header("anthropic-beta"),
            filter_window,
            body,
        })
    }
}

/// The most a filter window may be (SPEC, model connection): 1 MiB or 4,096 tokens.
const MAX_WINDOW_BYTES: u64 = 1024 * 1024;
const MAX_WINDOW_TOKENS: u64 = 4096;

/// The filter window a request asks for, in bytes (a token counted as four).
fn filter_window(headers: &http::HeaderMap) -> Result<usize, GatewayError> {
    let read = |name: &str, max: u64| -> Result<u64, GatewayError> {
        let Some(value) = headers.get(name) else {
            return Ok(0);
        };
        match value
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            Some(n) if n <= max => Ok(n),
            _ => Err(GatewayError::BadRequest(format!(
                "{name} must be a whole number from 0 to {max}"
            ))),
        }
    };
    let bytes = read("x-svc-filter-window-bytes", MAX_WINDOW_BYTES)?;
    let tokens = read("x-svc-filter-window-tokens", MAX_WINDOW_TOKENS)?;
    Ok(crate::llm::compile::filter_window(bytes, tokens))
}

/// How many of `items` are of each kind: (images, files), descending into nested `content`
/// arrays (tool results).
fn count_attachments<'a>(
    items: impl Iterator<Item = &'a Value>,
    kind: &dyn Fn(&str) -> Attachment,
) -> (u64, u64) {
    let mut counts = (0u64, 0u64);
    for part in items {
        match part.get("type").and_then(Value::as_str).map(kind) {
            Some(Attachment::Image) => counts.0 += 1,
            Some(Attachment::File) => counts.1 += 1,
            _ => {}
        }
        if let Some(Value::Array(inner)) = part.get("content") {
            let (i, f) = count_attachments(inner.iter(), kind);
            counts = (counts.0 + i, counts.1 + f);
        }
    }
    counts
}

/// What a content part costs beyond its bytes.
pub enum Attachment {
    Image,
    File,
    Neither,
}

/// The image and file parts of a `messages` array whose items hold `content` arrays.
fn attachments(
    fields: &serde_json::Map<String, Value>,
    kind: &dyn Fn(&str) -> Attachment,
) -> (u64, u64) {
    let Some(Value::Array(messages)) = fields.get("messages") else {
        return (0, 0);
    };
    let parts = messages
        .iter()
        .filter_map(|m| m.get("content").and_then(Value::as_array))
        .flatten();
    count_attachments(parts, kind)
}
