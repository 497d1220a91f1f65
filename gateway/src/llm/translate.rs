//! Step four for model calls, between the caller and one member: the caller's API and the
//! member's dialect pick a [`Translation`]. Each is a pure module,
//! `translate/<upstream dialect>/from_<caller API>.rs`, with `translate_request`,
//! `translate_response`, a stream translator (an incremental state machine over events, in
//! [`stream`]) and `translate_error`; a same-shape pair passes bodies through with only `model`
//! rewritten. Gemini and Bedrock are reached from OpenAI callers through Anthropic's shape,
//! the richer of the two. Usage leaves every translator as [`Usage`], whoever the provider.

pub mod anthropic;
pub mod bedrock;
mod body;
pub mod custom;
#[cfg(test)]
mod fuzz;
pub mod gemini;
#[cfg(test)]
mod golden;
pub mod openai;
mod pass;
pub mod stream;

use bytes::Bytes;
use portcullis_shared::prices::Usage;
use serde::Serialize;

use super::api::{Inbound, InboundApi};
use super::wire::{anthropic as a, openai as o};

pub use body::Body;
pub use stream::{Stream, UpstreamEvent};

/// What a member's upstream speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    OpenAiChat,
    AnthropicMessages,
    /// Gemini's `generateContent` (the Gemini API, Gemini on Vertex).
    Gemini,
    /// Bedrock's Converse.
    Bedrock,
    /// `custom`: whatever the caller sent, forwarded untouched.
    Custom,
}

/// What the translators need to know of the member and the call.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The upstream's model id (`provider_config.model`).
    pub upstream_model: &'a str,
    /// The provider id (`openai`, `groq`, …).
    pub provider: &'a str,
    /// Unix seconds, for the `created` of translated OpenAI replies.
    pub created: i64,
    /// The gateway's request id, for ids an upstream does not give (Bedrock's message ids).
    pub id: &'a str,
    /// An Anthropic model on Vertex: the body carries `anthropic_version` and no `model`.
    pub vertex: bool,
}

/// Why a request cannot go to this member as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TranslateError {
    /// The request is malformed for its own API.
    #[error("{0}")]
    Invalid(String),
    /// The request uses something the member's API has no equivalent for.
    #[error("{0} is not supported by this model's API")]
    Unsupported(String),
}

impl TranslateError {
    pub fn invalid(message: impl Into<String>) -> Self {
        TranslateError::Invalid(message.into())
    }

    pub fn unsupported(what: &str) -> Self {
        TranslateError::Unsupported(what.to_string())
    }
}

/// The route of one call through the translators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Translation {
    /// OpenAI caller, OpenAI-shaped upstream.
    OpenAiPassThrough,
    /// Anthropic caller, Anthropic upstream.
    AnthropicPassThrough,
    /// OpenAI caller, Anthropic upstream.
    AnthropicFromOpenAi,
    /// Anthropic caller, OpenAI-shaped upstream.
    OpenAiFromAnthropic,
    GeminiFromOpenAi,
    GeminiFromAnthropic,
    BedrockFromOpenAi,
    BedrockFromAnthropic,
    /// Either caller, a `custom` upstream.
    Custom,
}

impl Translation {
    pub fn of(api: InboundApi, dialect: Dialect) -> Self {
        use InboundApi::{AnthropicMessages as FromAnthropic, OpenAiChat as FromOpenAi};
        match (dialect, api) {
            (Dialect::Custom, _) => Translation::Custom,
            (Dialect::OpenAiChat, FromOpenAi) => Translation::OpenAiPassThrough,
            (Dialect::OpenAiChat, FromAnthropic) => Translation::OpenAiFromAnthropic,
            (Dialect::AnthropicMessages, FromOpenAi) => Translation::AnthropicFromOpenAi,
            (Dialect::AnthropicMessages, FromAnthropic) => Translation::AnthropicPassThrough,
            (Dialect::Gemini, FromOpenAi) => Translation::GeminiFromOpenAi,
            (Dialect::Gemini, FromAnthropic) => Translation::GeminiFromAnthropic,
            (Dialect::Bedrock, FromOpenAi) => Translation::BedrockFromOpenAi,
            (Dialect::Bedrock, FromAnthropic) => Translation::BedrockFromAnthropic,
        }
    }

    /// Whether bodies change shape (false: passed through with `model` rewritten, or not at
    /// all for `custom`).
    pub fn translates(self) -> bool {
        !matches!(
            self,
            Translation::OpenAiPassThrough
                | Translation::AnthropicPassThrough
                | Translation::Custom
        )
    }

    /// The body to send upstream.
    pub fn request(self, inbound: &Inbound, ctx: &Context<'_>) -> Result<Body, TranslateError> {
        match self {
            Translation::OpenAiPassThrough => openai::from_openai::translate_request(inbound, ctx),
            Translation::AnthropicPassThrough => {
                anthropic::from_anthropic::translate_request(inbound, ctx)
            }
            Translation::AnthropicFromOpenAi => encoded(
                &anthropic::from_openai::translate_request(typed(inbound)?, ctx)?,
            ),
            Translation::OpenAiFromAnthropic => encoded(
                &openai::from_anthropic::translate_request(typed(inbound)?, ctx)?,
            ),
            Translation::GeminiFromOpenAi => encoded(&gemini::from_openai::translate_request(
                typed(inbound)?,
                ctx,
            )?),
            Translation::GeminiFromAnthropic => encoded(
                &gemini::from_anthropic::translate_request(typed(inbound)?, ctx)?,
            ),
            Translation::BedrockFromOpenAi => encoded(&bedrock::from_openai::translate_request(
                typed(inbound)?,
                ctx,
            )?),
            Translation::BedrockFromAnthropic => encoded(
                &bedrock::from_anthropic::translate_request(typed(inbound)?, ctx)?,
            ),
            Translation::Custom => Ok(Body::from(inbound.raw.clone())),
        }
    }

    /// A whole successful reply in the caller's shape, and the usage the upstream reported.
    /// `Err` when the upstream's reply cannot be read.
    pub fn response(
        self,
        body: Bytes,
        ctx: &Context<'_>,
    ) -> Result<(Bytes, Option<Usage>), TranslateError> {
        let (reply, usage) = match self {
            Translation::OpenAiPassThrough => {
                let usage = openai::from_openai::translate_response(&body);
                return Ok((body, usage));
            }
            Translation::AnthropicPassThrough => {
                let usage = anthropic::from_anthropic::translate_response(&body);
                return Ok((body, usage));
            }
            Translation::Custom => {
                let usage = custom::translate_response(&body);
                return Ok((body, usage));
            }
            Translation::AnthropicFromOpenAi => {
                let (c, u) = anthropic::from_openai::translate_response(parse(&body)?, ctx);
                (encode(&c)?, u)
            }
            Translation::OpenAiFromAnthropic => {
                let (m, u) = openai::from_anthropic::translate_response(parse(&body)?, ctx);
                (encode(&m)?, u)
            }
            Translation::GeminiFromOpenAi => {
                let (c, u) = gemini::from_openai::translate_response(parse(&body)?, ctx);
                (encode(&c)?, u)
            }
            Translation::GeminiFromAnthropic => {
                let (m, u) = gemini::from_anthropic::translate_response(parse(&body)?, ctx);
                (encode(&m)?, u)
            }
            Translation::BedrockFromOpenAi => {
                let (c, u) = bedrock::from_openai::translate_response(parse(&body)?, ctx);
                (encode(&c)?, u)
            }
            Translation::BedrockFromAnthropic => {
                let (m, u) = bedrock::from_anthropic::translate_response(parse(&body)?, ctx);
                (encode(&m)?, u)
            }
        };
        Ok((reply, usage))
    }

    /// A translator for a streamed reply.
    pub fn stream(self, inbound: &Inbound, ctx: &Context<'_>) -> Stream {
        Stream::new(self, inbound.wants_usage, ctx)
    }

    /// An upstream error body's (type, message), read in the upstream's dialect.
    pub fn error(self, body: &[u8]) -> Option<(String, String)> {
        let openai = || openai::from_anthropic::translate_error(body);
        let anthropic = || anthropic::from_openai::translate_error(body);
        match self {
            Translation::OpenAiPassThrough | Translation::OpenAiFromAnthropic => openai(),
            Translation::AnthropicPassThrough | Translation::AnthropicFromOpenAi => anthropic(),
            Translation::GeminiFromOpenAi | Translation::GeminiFromAnthropic => {
                gemini::from_anthropic::translate_error(body)
            }
            Translation::BedrockFromOpenAi | Translation::BedrockFromAnthropic => {
                bedrock::from_anthropic::translate_error(body)
            }
            Translation::Custom => anthropic().or_else(openai),
        }
    }
}

/// An upstream's reply, typed.
fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, TranslateError> {
    serde_json::from_slice(body)
        .map_err(|e| TranslateError::invalid(format!("the reply is not readable: {e}")))
}

/// The request body as the typed request of the caller's API.
fn typed<T: serde::de::DeserializeOwned>(inbound: &Inbound) -> Result<T, TranslateError> {
    T::deserialize(&inbound.body)
        .map_err(|e| TranslateError::invalid(format!("the request body is not valid: {e}")))
}

fn encoded<T: Serialize>(value: &T) -> Result<Body, TranslateError> {
    encode(value).map(Body::from)
}

fn encode<T: Serialize>(value: &T) -> Result<Bytes, TranslateError> {
    serde_json::to_vec(value)
        .map(Bytes::from)
        .map_err(|e| TranslateError::invalid(e.to_string()))
}

/// An error in the middle of an Anthropic stream: an `error` event, which the official SDKs
/// raise as an API error.
pub fn anthropic_stream_error(kind: &str, message: &str) -> Bytes {
    a::frame(&a::StreamEvent::error(kind, message))
}

/// `(media type, base64 data)` of a `data:<type>;base64,<data>` URL.
pub fn data_url(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let media_type = meta.strip_suffix(";base64")?;
    Some((media_type.to_string(), data.to_string()))
}

/// One OpenAI stream chunk as a server-sent event.
pub fn openai_event<T: Serialize>(chunk: &T) -> Bytes {
    let mut out = b"data: ".to_vec();
    let _ = serde_json::to_writer(&mut out, chunk);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// An error in the middle of an OpenAI stream: `data: {"error": {…}}`, which the official SDKs
/// raise as an API error.
pub fn openai_stream_error(kind: &str, code: Option<&str>, message: &str) -> Bytes {
    openai_event(&o::ErrorBody {
        error: o::ErrorDetail {
            message: message.to_string(),
            kind: Some(kind.to_string()),
            code: code.map(|c| serde_json::Value::String(c.to_string())),
            param: None,
        },
    })
}
