//! `svc.sync.v1.SyncService/GetSnapshot`: gateways long-poll for their workspace's snapshot.
//! A caller holding the current revision waits until a write commits (woken at once in this
//! process, and by a one-second re-check for writes made by other control-plane replicas) or
//! until `wait_seconds` pass.

use std::time::Duration;

use portcullis_shared::api::tools::{DiscoveredTool, ReportToolsRequest, ReportToolsResponse};
use portcullis_shared::snapshot::{
    GetSnapshotRequest, GetSnapshotResponse, DEFAULT_WAIT_SECONDS, MAX_WAIT_SECONDS,
};

use super::{unary, Access, Ctx, Operation};
use crate::error::{invalid, ApiResult};
use crate::snapshot::{self, Deployment};
use crate::store::{now_ms, tools, workspaces, Conn};

pub fn operations() -> Vec<(&'static str, Operation)> {
    vec![
        ("GetSnapshot", unary(Access::Deployment, get_snapshot)),
        ("ReportTools", unary(Access::Deployment, report_tools)),
    ]
}

/// A gateway reports the operations it listed on a tool upstream (a shared one's, or a
/// per-user one's with a caller's own credential), and learns their catalog status: new ones
/// enter the catalog `active`; known ones keep their status. Nothing changed, nothing is
/// written (so reports do not wake every gateway).
async fn report_tools(ctx: Ctx, req: ReportToolsRequest) -> ApiResult<ReportToolsResponse> {
    if req.tools.len() > 2000 {
        return Err(invalid("a connection reports at most 2000 operations"));
    }
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let row = crate::api::tools::load(tx.conn(), &ws, &req.connection_id).await?;
    let (added, changed) = record(tx.conn(), &row.id, &req.tools).await?;
    let reported: std::collections::HashSet<&str> =
        req.tools.iter().map(|t| t.name.as_str()).collect();
    let mut catalog = Vec::new();
    for c in tools::catalog(tx.conn(), &row.id).await? {
        if reported.contains(c.tool.as_str()) {
            catalog.push(crate::api::tools::catalog::entry(&c, false)?);
        }
    }
    if changed {
        tx.commit().await?;
        tracing::info!(connection_id = %row.id, added, "Tool catalog updated from discovery.");
    }
    Ok(ReportToolsResponse { added, catalog })
}

/// Records operations seen upstream (unusable names skipped): how many were new, and whether
/// anything changed.
pub(crate) async fn record(
    conn: &mut Conn,
    connection_id: &str,
    found: &[DiscoveredTool],
) -> ApiResult<(u64, bool)> {
    let now = now_ms();
    let (mut added, mut changed) = (0u64, false);
    for t in found {
        if t.name.is_empty() || t.name.len() > 128 || t.name.chars().any(char::is_whitespace) {
            tracing::warn!(
                connection_id,
                "An operation with an unusable name was seen; skipped."
            );
            continue;
        }
        let known = tools::catalog_entry(conn, connection_id, &t.name)
            .await?
            .is_some();
        let schema = t.input_schema.as_ref().map(|s| s.to_string());
        if tools::record_discovered(
            conn,
            connection_id,
            &t.name,
            &t.description,
            schema.as_deref(),
            now,
        )
        .await?
        {
            changed = true;
            if !known {
                added += 1;
            }
        }
    }
    Ok((added, changed))
}

const RECHECK: Duration = Duration::from_secs(1);

async fn current_revision(ctx: &Ctx) -> ApiResult<u64> {
    let mut conn = ctx.store().read().await?;
    Ok(workspaces::revision(&mut conn, ctx.workspace_id()).await?)
}

async fn get_snapshot(ctx: Ctx, req: GetSnapshotRequest) -> ApiResult<GetSnapshotResponse> {
    let wait = req.wait_seconds.unwrap_or(DEFAULT_WAIT_SECONDS);
    if wait > MAX_WAIT_SECONDS {
        return Err(invalid(format!(
            "wait_seconds must be at most {MAX_WAIT_SECONDS}"
        )));
    }
    let deployment = ctx.principal.as_deployment()?.clone();
    {
        let mut tx = ctx.store().write_unscoped().await?;
        workspaces::touch_deployment(tx.conn(), &deployment.deployment_id, now_ms()).await?;
        tx.commit().await?;
    }
    // Subscribe before reading, so a commit in between is not missed.
    let mut changes = ctx.store().watch_revision(ctx.workspace_id());
    let mut revision = current_revision(&ctx).await?;
    if req.revision == Some(revision) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(u64::from(wait));
        while revision == req.revision.unwrap_or_default() {
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Ok(GetSnapshotResponse {
                    revision,
                    snapshot: None,
                });
            }
            let nap = RECHECK.min(deadline - now);
            tokio::select! {
                _ = changes.changed() => {}
                _ = tokio::time::sleep(nap) => {}
            }
            revision = current_revision(&ctx).await?;
        }
    }
    let store = ctx.store();
    let mut tx = store.snapshot_tx().await?;
    let d = Deployment {
        deployment_id: &deployment.deployment_id,
        workspace_id: &deployment.workspace_id,
        public_url: &deployment.public_url,
        authorization_server: &ctx.app.base_url,
    };
    let snapshot = snapshot::build(&mut tx, store.cipher(), &d).await?;
    tx.rollback().await.ok();
    tracing::debug!(revision = snapshot.revision, deployment_id = %d.deployment_id, "Snapshot served.");
    Ok(GetSnapshotResponse {
        revision: snapshot.revision,
        snapshot: Some(snapshot),
    })
}
