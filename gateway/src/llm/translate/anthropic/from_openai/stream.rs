//! Anthropic's event stream as OpenAI chunks, event by event: text and reasoning deltas,
//! tool calls with OpenAI's own indexes (counted among tool calls, not content blocks),
//! thinking blocks with their signatures once complete, the finish reason, the usage chunk
//! when asked for, `[DONE]`; an error event, or a stream cut short, as `data: {"error": …}`.

use bytes::Bytes;
use portcullis_shared::prices::Usage;

use super::{completion_id, finish_reason};
use crate::llm::translate::{self, Context};
use crate::llm::wire::anthropic as a;
use crate::llm::wire::openai as o;

/// Translates an Anthropic event stream into OpenAI chunks, event by event.
pub struct TranslateStream {
    created: i64,
    /// Whether the caller asked for the usage chunk.
    include_usage: bool,
    id: String,
    model: String,
    usage: a::StreamUsage,
    /// Content index → OpenAI tool call index, for tool-use blocks.
    tool_index: Vec<(u32, u32)>,
    tools: u32,
    /// The thinking block being streamed: its text and signature so far.
    thinking: Option<(String, String)>,
    finish: Option<String>,
    done: bool,
}

impl TranslateStream {
    pub fn new(ctx: &Context<'_>, include_usage: bool) -> Self {
        Self {
            created: ctx.created,
            include_usage,
            id: String::new(),
            model: ctx.upstream_model.to_string(),
            usage: a::StreamUsage::default(),
            tool_index: Vec::new(),
            tools: 0,
            thinking: None,
            finish: None,
            done: false,
        }
    }

    /// What the upstream reported, once it reported anything.
    pub fn usage(&self) -> Option<Usage> {
        self.usage.metered()
    }

    fn chunk(&self, delta: o::Delta, finish: Option<String>) -> Bytes {
        let chunk = o::Chunk {
            id: self.id.clone(),
            object: "chat.completion.chunk".into(),
            created: self.created,
            model: self.model.clone(),
            choices: vec![o::ChunkChoice {
                index: 0,
                delta,
                finish_reason: finish,
            }],
            usage: None,
            error: None,
        };
        translate::openai_event(&chunk)
    }

    /// Takes one upstream event (its `data`) and appends the caller's events to `out`.
    pub fn push(&mut self, data: &str, out: &mut Vec<Bytes>) {
        if self.done {
            return;
        }
        let Ok(event) = serde_json::from_str::<a::StreamEvent>(data) else {
            self.done = true;
            return out.push(translate::openai_stream_error(
                "api_error",
                None,
                "the upstream sent an event the gateway could not read",
            ));
        };
        self.push_event(event, out);
    }

    /// Takes one upstream event, typed (from an upstream translated into Anthropic's events
    /// first), and appends the caller's events to `out`.
    pub fn push_event(&mut self, event: a::StreamEvent, out: &mut Vec<Bytes>) {
        if self.done {
            return;
        }
        match event {
            a::StreamEvent::MessageStart { message } => {
                self.id = completion_id(&message.id);
                if !message.model.is_empty() {
                    self.model = message.model;
                }
                self.usage.start(message.usage);
                out.push(self.chunk(
                    o::Delta {
                        role: Some("assistant".into()),
                        content: Some(String::new()),
                        ..Default::default()
                    },
                    None,
                ));
            }
            a::StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => self.block_start(index, content_block, out),
            a::StreamEvent::ContentBlockDelta { index, delta } => {
                self.block_delta(index, delta, out)
            }
            a::StreamEvent::ContentBlockStop { .. } => {
                if let Some((thinking, signature)) = self.thinking.take() {
                    let block = o::ThinkingBlock {
                        kind: "thinking".into(),
                        thinking: Some(thinking),
                        signature: Some(signature),
                        data: None,
                    };
                    out.push(self.chunk(
                        o::Delta {
                            thinking_blocks: vec![block],
                            ..Default::default()
                        },
                        None,
                    ));
                }
            }
            a::StreamEvent::MessageDelta { delta, usage } => {
                self.usage.delta(usage);
                self.finish = delta.stop_reason.map(|r| finish_reason(&r).to_string());
            }
            a::StreamEvent::MessageStop => self.end(out),
            a::StreamEvent::Error { error } => {
                self.done = true;
                out.push(translate::openai_stream_error(
                    &error.kind,
                    None,
                    &error.message,
                ));
            }
            a::StreamEvent::Ping | a::StreamEvent::Other => {}
        }
    }

    fn block_start(&mut self, index: u32, block: a::Block, out: &mut Vec<Bytes>) {
        match block {
            a::Block::ToolUse { id, name, .. } => {
                let tool = self.tools;
                self.tools += 1;
                self.tool_index.push((index, tool));
                let call = o::ToolCallDelta {
                    index: tool,
                    id: Some(id),
                    kind: Some("function".into()),
                    function: o::FunctionDelta {
                        name: Some(name),
                        arguments: Some(String::new()),
                    },
                };
                out.push(self.chunk(
                    o::Delta {
                        tool_calls: vec![call],
                        ..Default::default()
                    },
                    None,
                ));
            }
            a::Block::Thinking { .. } => self.thinking = Some((String::new(), String::new())),
            a::Block::RedactedThinking { data } => {
                let block = o::ThinkingBlock {
                    kind: "redacted_thinking".into(),
                    thinking: None,
                    signature: None,
                    data: Some(data),
                };
                out.push(self.chunk(
                    o::Delta {
                        thinking_blocks: vec![block],
                        ..Default::default()
                    },
                    None,
                ));
            }
            a::Block::Text { text, .. } if !text.is_empty() => out.push(self.chunk(
                o::Delta {
                    content: Some(text),
                    ..Default::default()
                },
                None,
            )),
            _ => {}
        }
    }

    fn block_delta(&mut self, index: u32, delta: a::BlockDelta, out: &mut Vec<Bytes>) {
        let delta = match delta {
            a::BlockDelta::TextDelta { text } => o::Delta {
                content: Some(text),
                ..Default::default()
            },
            a::BlockDelta::InputJsonDelta { partial_json } => {
                let tool = self.tool_index.iter().find(|(i, _)| *i == index);
                let Some(&(_, tool)) = tool.filter(|_| !partial_json.is_empty()) else {
                    return;
                };
                o::Delta {
                    tool_calls: vec![o::ToolCallDelta {
                        index: tool,
                        function: o::FunctionDelta {
                            name: None,
                            arguments: Some(partial_json),
                        },
                        ..Default::default()
                    }],
                    ..Default::default()
                }
            }
            a::BlockDelta::ThinkingDelta { thinking } => {
                if let Some((text, _)) = &mut self.thinking {
                    text.push_str(&thinking);
                }
                o::Delta {
                    reasoning_content: Some(thinking),
                    ..Default::default()
                }
            }
            a::BlockDelta::SignatureDelta { signature } => {
                if let Some((_, sig)) = &mut self.thinking {
                    sig.push_str(&signature);
                }
                return;
            }
            a::BlockDelta::Other => return,
        };
        out.push(self.chunk(delta, None));
    }

    /// The finish chunk, the usage chunk when the caller asked for it, and `[DONE]`.
    fn end(&mut self, out: &mut Vec<Bytes>) {
        self.done = true;
        let finish = self.finish.take().unwrap_or_else(|| "stop".into());
        out.push(self.chunk(o::Delta::default(), Some(finish)));
        // The usage chunk, when the caller asked for it and the upstream reported usage.
        if let Some(usage) = self.usage.metered().filter(|_| self.include_usage) {
            let chunk = o::Chunk {
                id: self.id.clone(),
                object: "chat.completion.chunk".into(),
                created: self.created,
                model: self.model.clone(),
                choices: Vec::new(),
                usage: Some(o::WireUsage::of(&usage)),
                error: None,
            };
            out.push(translate::openai_event(&chunk));
        }
        out.push(Bytes::from_static(b"data: [DONE]\n\n"));
    }

    /// The upstream ended. A stream cut short before `message_stop` ends with an error event,
    /// so the caller does not take a partial answer for a whole one.
    pub fn finish(&mut self, out: &mut Vec<Bytes>) {
        if !self.done {
            self.done = true;
            out.push(translate::openai_stream_error(
                "api_error",
                None,
                "the upstream stream ended before the message was complete",
            ));
        }
    }
}
