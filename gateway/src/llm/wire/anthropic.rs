//! The Anthropic Messages wire format: as much of it as translation reads and writes
//! (requests, whole responses, stream events, errors), read leniently — an unknown field is
//! ignored, an unknown content block or event type is kept as `Other`.

use portcullis_shared::prices::Usage;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `anthropic-version` the gateway sends when the caller gave none.
pub const VERSION: &str = "2023-06-01";

/// The `anthropic_version` of request bodies to Claude on Vertex.
pub const VERTEX_VERSION: &str = "vertex-2023-10-16";

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct MessagesRequest {
    /// Empty for Claude on Vertex, which names the model in the URL.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
    /// Vertex's version field, in place of the `anthropic-version` header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anthropic_version: Option<String>,
    #[serde(default)]
    pub messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<System>,
    #[serde(default)]
    pub max_tokens: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop_sequences: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stream: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Metadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum System {
    Text(String),
    Blocks(Vec<Block>),
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Message {
    pub role: String,
    pub content: Content,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Blocks(Vec<Block>),
}

impl Content {
    /// The blocks, a plain string being one text block.
    pub fn into_blocks(self) -> Vec<Block> {
        match self {
            Content::Text(text) => vec![Block::text(text)],
            Content::Blocks(blocks) => blocks,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    Text {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<Value>,
    },
    Image {
        source: Source,
    },
    Document {
        source: Source,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Content>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        is_error: Option<bool>,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        #[serde(default)]
        data: String,
    },
    /// A block this gateway does not translate (server tool use, search results, …).
    #[serde(other)]
    Other,
}

impl Block {
    pub fn text(text: String) -> Self {
        Block::Text {
            text,
            cache_control: None,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Source {
    Base64 { media_type: String, data: String },
    Url { url: String },
    Text { media_type: String, data: String },
    File { file_id: String },
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Tool {
    /// Set on server tools (`web_search_20250305`, …), absent on custom tools.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolChoice {
    Auto {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        disable_parallel_tool_use: Option<bool>,
    },
    Any {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        disable_parallel_tool_use: Option<bool>,
    },
    Tool {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        disable_parallel_tool_use: Option<bool>,
    },
    None,
}

/// A whole `message` reply.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct MessageReply {
    #[serde(default)]
    pub id: String,
    #[serde(rename = "type", default = "message")]
    pub kind: String,
    #[serde(default = "assistant")]
    pub role: String,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub content: Vec<Block>,
    #[serde(default)]
    pub stop_reason: Option<String>,
    #[serde(default)]
    pub stop_sequence: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<WireUsage>,
}

fn message() -> String {
    "message".into()
}

fn assistant() -> String {
    "assistant".into()
}

#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct WireUsage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_creation_input_tokens: u64,
    #[serde(default)]
    pub cache_read_input_tokens: u64,
}

impl WireUsage {
    /// As metered: Anthropic's `input_tokens` leaves out what was read from or written to
    /// the cache.
    pub fn metered(&self) -> Usage {
        Usage {
            prompt_tokens: self
                .input_tokens
                .saturating_add(self.cache_read_input_tokens)
                .saturating_add(self.cache_creation_input_tokens),
            completion_tokens: self.output_tokens,
            cached_tokens: self.cache_read_input_tokens,
            cache_write_tokens: self.cache_creation_input_tokens,
        }
    }

    /// How a metered usage is reported to an Anthropic-shaped caller.
    pub fn of(u: &Usage) -> Self {
        Self {
            input_tokens: u
                .prompt_tokens
                .saturating_sub(u.cached_tokens)
                .saturating_sub(u.cache_write_tokens),
            output_tokens: u.completion_tokens,
            cache_creation_input_tokens: u.cache_write_tokens,
            cache_read_input_tokens: u.cached_tokens,
        }
    }
}

/// One server-sent event of a streamed reply (its `data`; the `event:` line repeats `type`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    MessageStart {
        message: MessageReply,
    },
    ContentBlockStart {
        index: u32,
        content_block: Block,
    },
    ContentBlockDelta {
        index: u32,
        delta: BlockDelta,
    },
    ContentBlockStop {
        index: u32,
    },
    MessageDelta {
        delta: MessageDelta,
        #[serde(default)]
        usage: Option<DeltaUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: ErrorDetail,
    },
    #[serde(other)]
    Other,
}

impl StreamEvent {
    /// An `error` event in the middle of a stream, which the official SDKs raise as an API
    /// error.
    pub fn error(kind: &str, message: &str) -> Self {
        StreamEvent::Error {
            error: ErrorDetail {
                kind: kind.into(),
                message: message.to_string(),
            },
        }
    }

    /// The `event:` name of this event.
    pub fn name(&self) -> &'static str {
        match self {
            StreamEvent::MessageStart { .. } => "message_start",
            StreamEvent::ContentBlockStart { .. } => "content_block_start",
            StreamEvent::ContentBlockDelta { .. } => "content_block_delta",
            StreamEvent::ContentBlockStop { .. } => "content_block_stop",
            StreamEvent::MessageDelta { .. } => "message_delta",
            StreamEvent::MessageStop => "message_stop",
            StreamEvent::Ping => "ping",
            StreamEvent::Error { .. } => "error",
            StreamEvent::Other => "other",
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BlockDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct MessageDelta {
    #[serde(default)]
    pub stop_reason: Option<String>,
    #[serde(default)]
    pub stop_sequence: Option<String>,
}

/// `message_delta.usage`: cumulative counts; `output_tokens` always, the input counts in
/// newer API versions.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct DeltaUsage {
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_creation_input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_input_tokens: Option<u64>,
}

/// A stream's usage: the input counts of `message_start`, then the cumulative counts of
/// `message_delta`. Known only once `message_delta` carried usage: a stream cut off before it
/// has no known output count (the call is then charged its worst case).
#[derive(Debug, Clone, Copy, Default)]
pub struct StreamUsage {
    usage: WireUsage,
    complete: bool,
}

impl StreamUsage {
    pub fn start(&mut self, usage: Option<WireUsage>) {
        if let Some(u) = usage {
            self.usage = u;
        }
    }

    pub fn delta(&mut self, usage: Option<DeltaUsage>) {
        let Some(d) = usage else {
            return;
        };
        self.usage.output_tokens = d.output_tokens;
        for (field, value) in [
            (&mut self.usage.input_tokens, d.input_tokens),
            (
                &mut self.usage.cache_read_input_tokens,
                d.cache_read_input_tokens,
            ),
            (
                &mut self.usage.cache_creation_input_tokens,
                d.cache_creation_input_tokens,
            ),
        ] {
            if let Some(v) = value {
                *field = v;
            }
        }
        self.complete = true;
    }

    /// The usage as metered, once known.
    pub fn metered(&self) -> Option<Usage> {
        self.complete.then(|| self.usage.metered())
    }
}

/// `{"type": "error", "error": {type, message}}`.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ErrorBody {
    #[serde(rename = "type", default = "error")]
    pub kind: String,
    pub error: ErrorDetail,
}

fn error() -> String {
    "error".into()
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct ErrorDetail {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub message: String,
}

/// The last two events of a stream: `message_delta` with the stop reason and the usage (zeros
/// when the upstream reported none), then `message_stop`.
pub fn closing(stop_reason: &str, usage: Option<&Usage>) -> [StreamEvent; 2] {
    let usage = usage.map(WireUsage::of).unwrap_or_default();
    [
        StreamEvent::MessageDelta {
            delta: MessageDelta {
                stop_reason: Some(stop_reason.to_string()),
                stop_sequence: None,
            },
            usage: Some(DeltaUsage {
                output_tokens: usage.output_tokens,
                input_tokens: Some(usage.input_tokens),
                cache_creation_input_tokens: Some(usage.cache_creation_input_tokens),
                cache_read_input_tokens: Some(usage.cache_read_input_tokens),
            }),
        },
        StreamEvent::MessageStop,
    ]
}

/// Writes one event as Anthropic frames it: `event: <type>` then `data: <json>`.
pub fn frame(event: &StreamEvent) -> bytes::Bytes {
    let data = serde_json::to_string(event).unwrap_or_default();
    bytes::Bytes::from(format!("event: {}\ndata: {data}\n\n", event.name()))
}
