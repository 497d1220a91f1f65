//! Stored guards, read back: a guard row's typed fields, and the entry gateways receive in
//! their snapshot. The guard operations (`api::guards`) and the snapshot builder share it.

use portcullis_shared::api::guards::{GuardAction, GuardKind, GuardScope, GuardStage};
use portcullis_shared::snapshot::SnapGuard;
use serde_json::Value;

use crate::error::{corrupt, ApiResult};
use crate::store::guards::GuardRow;

/// The stored fields, parsed.
pub struct Parsed {
    pub stage: GuardStage,
    pub kind: GuardKind,
    pub action: GuardAction,
    pub config: Value,
    pub scope: Option<GuardScope>,
}

pub fn parse(row: &GuardRow) -> ApiResult<Parsed> {
    Ok(Parsed {
        stage: GuardStage::parse(&row.stage).ok_or_else(|| corrupt("guard stage"))?,
        kind: GuardKind::parse(&row.kind).ok_or_else(|| corrupt("guard kind"))?,
        action: GuardAction::parse(&row.action).ok_or_else(|| corrupt("guard action"))?,
        config: serde_json::from_str(&row.config).map_err(|_| corrupt("guard config"))?,
        scope: row
            .scope
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(|_| corrupt("guard scope"))?,
    })
}

/// An enabled guard as gateways receive it.
pub fn snapshot_entry(row: GuardRow) -> ApiResult<SnapGuard> {
    let p = parse(&row)?;
    let scope = p.scope.unwrap_or_default();
    Ok(SnapGuard {
        guard_id: row.id,
        name: row.name,
        stage: p.stage,
        kind: p.kind,
        action: p.action,
        config: p.config,
        gateway_ids: scope.gateways,
        model_ids: scope.models,
        tool_ids: scope.tools,
    })
}
