//! Amazon Bedrock's Converse API (`/model/{id}/converse` and `/converse-stream`): requests,
//! whole replies, the events of a stream and errors, as much as translation reads and writes.

use portcullis_shared::prices::Usage;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConverseRequest {
    pub messages: Vec<Message>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub system: Vec<SystemBlock>,
    pub inference_config: InferenceConfig,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_config: Option<ToolConfig>,
    /// Model-specific fields passed through (Claude's `thinking`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_model_request_fields: Option<Value>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SystemBlock {
    pub text: String,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InferenceConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stop_sequences: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolConfig {
    pub tools: Vec<Tool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    pub tool_spec: ToolSpec,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub input_schema: InputSchema,
}

#[derive(Debug, Clone, Serialize)]
pub struct InputSchema {
    pub json: Value,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Message {
    pub role: String,
    #[serde(default)]
    pub content: Vec<Block>,
}

/// A content block: exactly one field is set.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Block {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<Media>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document: Option<Media>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use: Option<ToolUse>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_result: Option<ToolResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<Reasoning>,
    /// A JSON value (in tool results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<Value>,
}

/// An image or a document, inline.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Media {
    /// `png`, `jpeg`, `gif`, `webp`; `pdf`, `txt`, …
    pub format: String,
    /// Documents only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub source: MediaSource,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct MediaSource {
    /// Base64.
    pub bytes: String,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolUse {
    pub tool_use_id: String,
    pub name: String,
    #[serde(default)]
    pub input: Value,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    pub tool_use_id: String,
    pub content: Vec<Block>,
    /// `success` or `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reasoning {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_text: Option<ReasoningText>,
    /// Encrypted reasoning, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted_content: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct ReasoningText {
    #[serde(default)]
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// A whole Converse reply.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConverseResponse {
    #[serde(default)]
    pub output: Output,
    #[serde(default)]
    pub stop_reason: Option<String>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Output {
    #[serde(default)]
    pub message: Option<Message>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireUsage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_read_input_tokens: u64,
    #[serde(default)]
    pub cache_write_input_tokens: u64,
}

impl WireUsage {
    /// As metered: `inputTokens` leaves out what was read from or written to the cache.
    pub fn metered(&self) -> Usage {
        Usage {
            prompt_tokens: self
                .input_tokens
                .saturating_add(self.cache_read_input_tokens)
                .saturating_add(self.cache_write_input_tokens),
            completion_tokens: self.output_tokens,
            cached_tokens: self.cache_read_input_tokens,
            cache_write_tokens: self.cache_write_input_tokens,
        }
    }
}

/// The payload of one event of a ConverseStream reply, by its `:event-type`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamPayload {
    #[serde(default)]
    pub content_block_index: Option<u32>,
    /// `contentBlockStart`.
    #[serde(default)]
    pub start: Option<BlockStart>,
    /// `contentBlockDelta`.
    #[serde(default)]
    pub delta: Option<BlockDelta>,
    /// `messageStop`.
    #[serde(default)]
    pub stop_reason: Option<String>,
    /// `metadata`.
    #[serde(default)]
    pub usage: Option<WireUsage>,
    /// An exception event's message.
    #[serde(default, alias = "Message")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockStart {
    #[serde(default)]
    pub tool_use: Option<ToolUseStart>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolUseStart {
    pub tool_use_id: String,
    pub name: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockDelta {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub tool_use: Option<ToolUseDelta>,
    #[serde(default)]
    pub reasoning_content: Option<ReasoningDelta>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ToolUseDelta {
    /// A piece of the input's JSON text.
    #[serde(default)]
    pub input: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningDelta {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub signature: Option<String>,
    #[serde(default)]
    pub redacted_content: Option<String>,
}

/// The message of a Bedrock error body (`{"message": …}`, or `Message`).
pub fn error_message(body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct ErrorBody {
        #[serde(alias = "Message")]
        message: String,
    }
    serde_json::from_slice::<ErrorBody>(body)
        .ok()
        .map(|e| e.message)
}
