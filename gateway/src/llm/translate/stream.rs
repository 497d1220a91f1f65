//! Streamed replies, as one translator per call: an upstream event in (a server-sent event, or
//! an AWS event-stream frame from Bedrock), the caller's events out, each whole and framed.
//! Upstreams reached through Anthropic's shape (Gemini, Bedrock) go through two state machines:
//! theirs into Anthropic's events, then, for OpenAI callers, Anthropic's into OpenAI's chunks.

use bytes::Bytes;
use portcullis_shared::prices::Usage;

use super::{anthropic, bedrock, custom, gemini, openai, Context, Translation};
use crate::llm::wire::anthropic as a;
use crate::llm::wire::eventstream;

/// One whole event of an upstream's stream.
pub enum UpstreamEvent {
    /// A server-sent event, its blank-line delimiter included.
    Sse(Bytes),
    /// An AWS event-stream frame (Bedrock).
    Aws(eventstream::Event),
}

/// A streamed reply's translator.
pub enum Stream {
    OpenAiPassThrough(openai::from_openai::TranslateStream),
    AnthropicPassThrough(anthropic::from_anthropic::TranslateStream),
    AnthropicFromOpenAi(anthropic::from_openai::TranslateStream),
    OpenAiFromAnthropic(openai::from_anthropic::TranslateStream),
    Custom(custom::TranslateStream),
    /// An upstream translated into Anthropic's events first.
    Hub {
        source: Hub,
        caller: HubCaller,
    },
}

/// Upstreams whose streams become Anthropic's events.
pub enum Hub {
    Gemini(gemini::from_anthropic::TranslateStream),
    Bedrock(bedrock::from_anthropic::TranslateStream),
}

/// Who receives the Anthropic events of a hub stream.
pub enum HubCaller {
    Anthropic,
    OpenAi(Box<anthropic::from_openai::TranslateStream>),
}

impl Stream {
    pub fn new(translation: Translation, wants_usage: bool, ctx: &Context<'_>) -> Self {
        let openai_caller = || {
            HubCaller::OpenAi(Box::new(anthropic::from_openai::TranslateStream::new(
                ctx,
                wants_usage,
            )))
        };
        let gemini = || Hub::Gemini(gemini::from_anthropic::TranslateStream::new(ctx));
        let bedrock = || Hub::Bedrock(bedrock::from_anthropic::TranslateStream::new(ctx));
        match translation {
            Translation::OpenAiPassThrough => {
                Stream::OpenAiPassThrough(openai::from_openai::TranslateStream::new(wants_usage))
            }
            Translation::AnthropicPassThrough => {
                Stream::AnthropicPassThrough(anthropic::from_anthropic::TranslateStream::default())
            }
            Translation::AnthropicFromOpenAi => Stream::AnthropicFromOpenAi(
                anthropic::from_openai::TranslateStream::new(ctx, wants_usage),
            ),
            Translation::OpenAiFromAnthropic => {
                Stream::OpenAiFromAnthropic(openai::from_anthropic::TranslateStream::new(ctx))
            }
            Translation::Custom => Stream::Custom(custom::TranslateStream::default()),
            Translation::GeminiFromAnthropic => Stream::Hub {
                source: gemini(),
                caller: HubCaller::Anthropic,
            },
            Translation::GeminiFromOpenAi => Stream::Hub {
                source: gemini(),
                caller: openai_caller(),
            },
            Translation::BedrockFromAnthropic => Stream::Hub {
                source: bedrock(),
                caller: HubCaller::Anthropic,
            },
            Translation::BedrockFromOpenAi => Stream::Hub {
                source: bedrock(),
                caller: openai_caller(),
            },
        }
    }

    /// One whole upstream event in; the caller's events, each whole and framed, appended to
    /// `out`.
    pub fn push(&mut self, event: UpstreamEvent, out: &mut Vec<Bytes>) {
        if let Stream::Hub { source, caller } = self {
            let mut hub = Vec::new();
            match (source, &event) {
                (Hub::Bedrock(s), UpstreamEvent::Aws(e)) => s.push(e, &mut hub),
                (Hub::Gemini(s), UpstreamEvent::Sse(raw)) => {
                    with_data(raw, |d| s.push(d, &mut hub))
                }
                _ => {}
            }
            return deliver(caller, hub, out);
        }
        // An AWS frame reaches no SSE translator.
        let UpstreamEvent::Sse(raw) = event else {
            return;
        };
        match self {
            Stream::OpenAiPassThrough(s) => s.push(raw, out),
            Stream::AnthropicPassThrough(s) => s.push(raw, out),
            Stream::Custom(s) => s.push(raw, out),
            // An event without data (an SSE comment, a keep-alive) carries nothing to translate.
            Stream::AnthropicFromOpenAi(s) => with_data(&raw, |d| s.push(d, out)),
            Stream::OpenAiFromAnthropic(s) => with_data(&raw, |d| s.push(d, out)),
            Stream::Hub { .. } => {}
        }
    }

    /// The upstream ended; what the caller still needs (closing events, or an error event
    /// when the stream broke off).
    pub fn finish(&mut self, out: &mut Vec<Bytes>) {
        match self {
            Stream::AnthropicFromOpenAi(s) => s.finish(out),
            Stream::OpenAiFromAnthropic(s) => s.finish(out),
            Stream::Hub { source, caller } => {
                let mut hub = Vec::new();
                match source {
                    Hub::Gemini(s) => s.finish(&mut hub),
                    Hub::Bedrock(s) => s.finish(&mut hub),
                }
                deliver(caller, hub, out);
                if let HubCaller::OpenAi(s) = caller {
                    s.finish(out);
                }
            }
            Stream::OpenAiPassThrough(_) | Stream::AnthropicPassThrough(_) | Stream::Custom(_) => {}
        }
    }

    /// The usage the upstream reported, if it did.
    pub fn usage(&self) -> Option<Usage> {
        match self {
            Stream::OpenAiPassThrough(s) => s.usage(),
            Stream::AnthropicPassThrough(s) => s.usage(),
            Stream::AnthropicFromOpenAi(s) => s.usage(),
            Stream::OpenAiFromAnthropic(s) => s.usage(),
            Stream::Custom(s) => s.usage(),
            Stream::Hub { source, .. } => match source {
                Hub::Gemini(s) => s.usage(),
                Hub::Bedrock(s) => s.usage(),
            },
        }
    }
}

/// Hands a hub stream's Anthropic events to its caller.
fn deliver(caller: &mut HubCaller, events: Vec<a::StreamEvent>, out: &mut Vec<Bytes>) {
    for event in events {
        match caller {
            HubCaller::Anthropic => out.push(a::frame(&event)),
            HubCaller::OpenAi(s) => s.push_event(event, out),
        }
    }
}

fn with_data(raw: &[u8], translate: impl FnOnce(&str)) {
    let data = crate::sse::data(raw);
    if !data.trim().is_empty() {
        translate(&data);
    }
}
