//! OpenAI chunks as Anthropic's event stream, chunk by chunk: `message_start`, one content
//! block per run of text, reasoning or tool call (opened and closed as the chunks move from one
//! to the next, tool ids kept or derived from the message), `message_delta` with the stop
//! reason and usage, `message_stop`; an error chunk, or a stream cut short, as an `error`
//! event.

use bytes::Bytes;
use portcullis_shared::prices::Usage;
use serde_json::Value;

use super::{message_id, stop_reason};
use crate::llm::translate::{self, Context};
use crate::llm::wire::anthropic as a;
use crate::llm::wire::openai as o;

/// The block open on the caller's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
    /// A tool call, by its OpenAI index.
    Tool(u32),
}

/// Translates OpenAI chunks into Anthropic events, chunk by chunk.
pub struct TranslateStream {
    model: String,
    /// The message id the caller sees.
    id: String,
    started: bool,
    /// The open block and its index.
    open: Option<(Open, u32)>,
    next_index: u32,
    /// OpenAI tool-call index → Anthropic block index.
    tools: Vec<(u32, u32)>,
    stop_reason: Option<&'static str>,
    usage: Option<Usage>,
    done: bool,
}

impl TranslateStream {
    pub fn new(ctx: &Context<'_>) -> Self {
        Self {
            model: ctx.upstream_model.to_string(),
            id: String::new(),
            started: false,
            open: None,
            next_index: 0,
            tools: Vec::new(),
            stop_reason: None,
            usage: None,
            done: false,
        }
    }

    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    /// Takes one upstream event (its `data`) and appends the caller's events to `out`.
    pub fn push(&mut self, data: &str, out: &mut Vec<Bytes>) {
        if self.done {
            return;
        }
        if data.trim() == "[DONE]" {
            return self.end(out);
        }
        let Ok(chunk) = serde_json::from_str::<o::Chunk>(data) else {
            return self.fail(out, "the upstream sent an event the gateway could not read");
        };
        if let Some(error) = chunk.error {
            return self.fail(out, &error.message);
        }
        if !self.started {
            self.start(&chunk, out);
        }
        if let Some(u) = chunk.usage {
            self.usage = Some(u.metered());
        }
        let Some(choice) = chunk.choices.into_iter().next() else {
            return;
        };
        let d = choice.delta;
        if let Some(thinking) = d.reasoning_content.filter(|t| !t.is_empty()) {
            let index = self.open_block(Open::Thinking, out);
            out.push(a::frame(&a::StreamEvent::ContentBlockDelta {
                index,
                delta: a::BlockDelta::ThinkingDelta { thinking },
            }));
        }
        if let Some(text) = d.content.or(d.refusal).filter(|t| !t.is_empty()) {
            let index = self.open_block(Open::Text, out);
            out.push(a::frame(&a::StreamEvent::ContentBlockDelta {
                index,
                delta: a::BlockDelta::TextDelta { text },
            }));
        }
        for call in d.tool_calls {
            self.tool_call(call, out);
        }
        if let Some(finish) = choice.finish_reason {
            self.close(out);
            self.stop_reason = Some(stop_reason(&finish));
        }
    }

    fn start(&mut self, chunk: &o::Chunk, out: &mut Vec<Bytes>) {
        self.started = true;
        if !chunk.model.is_empty() {
            self.model = chunk.model.clone();
        }
        self.id = message_id(&chunk.id);
        let message = a::MessageReply {
            id: self.id.clone(),
            kind: "message".into(),
            role: "assistant".into(),
            model: self.model.clone(),
            // The input count arrives with the last chunk; `message_delta` carries it.
            usage: Some(a::WireUsage::default()),
            ..Default::default()
        };
        out.push(a::frame(&a::StreamEvent::MessageStart { message }));
    }

    /// The index of an open block of this kind, opening it (and closing another) if needed.
    fn open_block(&mut self, kind: Open, out: &mut Vec<Bytes>) -> u32 {
        if let Some((open, index)) = self.open {
            if open == kind {
                return index;
            }
        }
        self.close(out);
        let index = self.next_index;
        self.next_index += 1;
        let block = match kind {
            Open::Text => a::Block::text(String::new()),
            Open::Thinking => a::Block::Thinking {
                thinking: String::new(),
                signature: String::new(),
            },
            Open::Tool(_) => return index,
        };
        self.open = Some((kind, index));
        out.push(a::frame(&a::StreamEvent::ContentBlockStart {
            index,
            content_block: block,
        }));
        index
    }

    fn tool_call(&mut self, call: o::ToolCallDelta, out: &mut Vec<Bytes>) {
        let known = self
            .tools
            .iter()
            .find(|(t, _)| *t == call.index)
            .map(|(_, i)| *i);
        let index = match known {
            Some(index) => index,
            None => {
                self.close(out);
                let index = self.next_index;
                self.next_index += 1;
                self.tools.push((call.index, index));
                self.open = Some((Open::Tool(call.index), index));
                // An upstream that sends no id gets one derived from the message, stable
                // across retries of the same answer.
                let id = call
                    .id
                    .clone()
                    .unwrap_or_else(|| format!("toolu_{}_{}", self.id, call.index));
                out.push(a::frame(&a::StreamEvent::ContentBlockStart {
                    index,
                    content_block: a::Block::ToolUse {
                        id,
                        name: call.function.name.clone().unwrap_or_default(),
                        input: Value::Object(Default::default()),
                    },
                }));
                index
            }
        };
        if let Some(args) = call.function.arguments.filter(|a| !a.is_empty()) {
            out.push(a::frame(&a::StreamEvent::ContentBlockDelta {
                index,
                delta: a::BlockDelta::InputJsonDelta { partial_json: args },
            }));
        }
    }

    fn close(&mut self, out: &mut Vec<Bytes>) {
        if let Some((_, index)) = self.open.take() {
            out.push(a::frame(&a::StreamEvent::ContentBlockStop { index }));
        }
    }

    fn end(&mut self, out: &mut Vec<Bytes>) {
        if !self.started {
            self.start(&o::Chunk::default(), out);
        }
        self.close(out);
        self.done = true;
        let stop = self.stop_reason.unwrap_or("end_turn");
        out.extend(a::closing(stop, self.usage.as_ref()).iter().map(a::frame));
    }

    fn fail(&mut self, out: &mut Vec<Bytes>, message: &str) {
        self.done = true;
        out.push(translate::anthropic_stream_error("api_error", message));
    }

    /// The upstream ended. Without `[DONE]`: complete if it finished its choice, else an error
    /// event, so the caller does not take a partial answer for a whole one.
    pub fn finish(&mut self, out: &mut Vec<Bytes>) {
        if self.done {
            return;
        }
        if self.stop_reason.is_some() {
            self.end(out);
        } else {
            self.fail(
                out,
                "the upstream stream ended before the message was complete",
            );
        }
    }
}
