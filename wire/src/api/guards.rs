//! Guards (`CreateGuard` … `TestGuard`, DESIGN §16): what the gateway looks for in what flows
//! through it — model output and input, tool results and arguments — and whether a match
//! blocks the call or is redacted.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::scoped;

/// Where a guard looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardStage {
    /// A model's answer, whole or streamed, text and tool-call arguments.
    LlmOutput,
    /// The messages sent to a model.
    LlmInput,
    /// What a tool returned (`content` blocks and `structured_content`).
    ToolResult,
    /// The arguments an agent calls a tool with.
    ToolArguments,
}

impl GuardStage {
    pub const ALL: [GuardStage; 4] = [
        GuardStage::LlmOutput,
        GuardStage::LlmInput,
        GuardStage::ToolResult,
        GuardStage::ToolArguments,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            GuardStage::LlmOutput => "llm_output",
            GuardStage::LlmInput => "llm_input",
            GuardStage::ToolResult => "tool_result",
            GuardStage::ToolArguments => "tool_arguments",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|g| g.as_str() == s)
    }

    /// Whether the stage is on model calls (else on tool calls).
    pub fn on_models(self) -> bool {
        matches!(self, GuardStage::LlmOutput | GuardStage::LlmInput)
    }
}

/// What a guard looks for; `config` holds the kind's settings. `json_schema` is for tool
/// results only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardKind {
    Regex,
    Keywords,
    Pii,
    Secrets,
    JsonSchema,
}

impl GuardKind {
    pub const ALL: [GuardKind; 5] = [
        GuardKind::Regex,
        GuardKind::Keywords,
        GuardKind::Pii,
        GuardKind::Secrets,
        GuardKind::JsonSchema,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            GuardKind::Regex => "regex",
            GuardKind::Keywords => "keywords",
            GuardKind::Pii => "pii",
            GuardKind::Secrets => "secrets",
            GuardKind::JsonSchema => "json_schema",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// What a match does: the call fails (`block`), or the text is replaced by
/// `[REDACTED:<kind>]` (`redact`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardAction {
    Block,
    Redact,
}

impl GuardAction {
    pub fn as_str(self) -> &'static str {
        match self {
            GuardAction::Block => "block",
            GuardAction::Redact => "redact",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [GuardAction::Block, GuardAction::Redact]
            .into_iter()
            .find(|a| a.as_str() == s)
    }
}

/// Where a guard applies. Each list holds ids or names on input and ids on output; an empty
/// list does not narrow. `models` names model connections or pools (a pool covers its
/// members); `tools` names tool connections. Model lists are for model stages, tool lists
/// for tool stages.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardScope {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gateways: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
}

impl GuardScope {
    pub fn is_all(&self) -> bool {
        self.gateways.is_empty() && self.models.is_empty() && self.tools.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Guard {
    pub guard_id: String,
    pub workspace_id: String,
    pub name: String,
    pub stage: GuardStage,
    pub kind: GuardKind,
    pub action: GuardAction,
    pub config: Value,
    pub enabled: bool,
    /// Left out: everything of the stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<GuardScope>,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateGuardRequest {
    pub workspace_id: String,
    pub name: String,
    #[serde(default)]
    pub stage: Option<GuardStage>,
    #[serde(default)]
    pub kind: Option<GuardKind>,
    #[serde(default)]
    pub action: Option<GuardAction>,
    #[serde(default)]
    pub config: Value,
    /// `true` when left out.
    #[serde(default)]
    pub enabled: Option<bool>,
    #[serde(default)]
    pub scope: Option<GuardScope>,
}

/// Fields left out keep their value. `config` and `scope`, when sent, replace the stored
/// ones; `scope: {}` makes the guard apply everywhere.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateGuardRequest {
    pub workspace_id: String,
    /// The guard's id or name.
    #[serde(alias = "guard")]
    pub guard_id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub stage: Option<GuardStage>,
    #[serde(default)]
    pub kind: Option<GuardKind>,
    #[serde(default)]
    pub action: Option<GuardAction>,
    #[serde(default)]
    pub config: Option<Value>,
    #[serde(default)]
    pub enabled: Option<bool>,
    #[serde(default)]
    pub scope: Option<GuardScope>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardRefRequest {
    pub workspace_id: String,
    /// The guard's id or name.
    #[serde(alias = "guard")]
    pub guard_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListGuardsRequest {
    pub workspace_id: String,
    /// Only guards of this stage.
    #[serde(default)]
    pub stage: Option<GuardStage>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuardResponse {
    pub guard: Guard,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListGuardsResponse {
    pub guards: Vec<Guard>,
}

/// Runs a stored guard on a sample, as the gateway would on text of its stage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestGuardRequest {
    pub workspace_id: String,
    /// The guard's id or name.
    #[serde(alias = "guard")]
    pub guard_id: String,
    pub sample: String,
}

/// One match in a sample: what was found (`email`, `card_number`, `secret`, `keyword`,
/// `regex`, …) and where, in bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuardMatch {
    pub kind: String,
    pub start: u64,
    pub end: u64,
}

/// `output` is the sample as it would be delivered: redacted, or empty when `blocked`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestGuardResponse {
    pub matches: Vec<GuardMatch>,
    pub blocked: bool,
    pub output: String,
}

scoped!(
    CreateGuardRequest,
    UpdateGuardRequest,
    GuardRefRequest,
    ListGuardsRequest,
    TestGuardRequest
);
