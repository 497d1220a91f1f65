//! Model pools: `CreateLLMPool` … `RemoveLLMPoolMember`.

use serde::{Deserialize, Serialize};

use super::common::{empty_as_none, Ref};
use super::scoped;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolStrategy {
    RoundRobin,
    Weighted,
    Priority,
}

impl PoolStrategy {
    pub fn as_str(self) -> &'static str {
        match self {
            PoolStrategy::RoundRobin => "round_robin",
            PoolStrategy::Weighted => "weighted",
            PoolStrategy::Priority => "priority",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            PoolStrategy::RoundRobin,
            PoolStrategy::Weighted,
            PoolStrategy::Priority,
        ]
        .into_iter()
        .find(|m| m.as_str() == s)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolMember {
    pub connection_id: String,
    /// The member model's name.
    pub name: String,
    pub weight: u32,
    pub priority: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LLMPool {
    pub pool_id: String,
    pub workspace_id: String,
    pub name: String,
    pub strategy: PoolStrategy,
    pub members: Vec<PoolMember>,
    pub gateways: Vec<Ref>,
    pub created_at: String,
    pub updated_at: String,
}

/// A member as a request names it. `weight` defaults to 1 (must be at least 1); `priority`
/// defaults to 0 (lower is tried first).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolMemberInput {
    pub connection_id: String,
    #[serde(default)]
    pub weight: Option<u32>,
    #[serde(default)]
    pub priority: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateLLMPoolRequest {
    pub workspace_id: String,
    pub name: String,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub strategy: Option<PoolStrategy>,
    #[serde(default)]
    pub members: Vec<PoolMemberInput>,
}

/// Omitted fields keep their values; `members`, when present, replaces the whole list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateLLMPoolRequest {
    pub workspace_id: String,
    pub pool_id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub strategy: Option<PoolStrategy>,
    #[serde(default)]
    pub members: Option<Vec<PoolMemberInput>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolIdRequest {
    pub workspace_id: String,
    pub pool_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListLLMPoolsRequest {
    pub workspace_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddLLMPoolMemberRequest {
    pub workspace_id: String,
    pub pool_id: String,
    pub connection_id: String,
    #[serde(default)]
    pub weight: Option<u32>,
    #[serde(default)]
    pub priority: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoveLLMPoolMemberRequest {
    pub workspace_id: String,
    pub pool_id: String,
    pub connection_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolResponse {
    pub pool: LLMPool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListLLMPoolsResponse {
    pub pools: Vec<LLMPool>,
}

scoped!(
    CreateLLMPoolRequest,
    UpdateLLMPoolRequest,
    PoolIdRequest,
    ListLLMPoolsRequest,
    AddLLMPoolMemberRequest,
    RemoveLLMPoolMemberRequest,
);
