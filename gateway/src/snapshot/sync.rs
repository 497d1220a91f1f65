//! Keeps the snapshot fresh: long-polls `SyncService/GetSnapshot`, compiles what arrives and
//! swaps it in; a snapshot that does not compile is refused and the old one kept. Network
//! failures back off and retry; serving continues on the current snapshot meanwhile.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use portcullis_shared::snapshot::{GetSnapshotRequest, Snapshot};

use crate::control::Backoff;
use crate::Gateway;

const WAIT_SECONDS: u32 = 25;

/// Compiles and swaps in a snapshot; refuses it (keeping the current one) when invalid.
pub fn apply(gateway: &Gateway, snapshot: &Snapshot) -> bool {
    let current = gateway.current();
    let started = std::time::Instant::now();
    match super::compile_from(snapshot, &gateway.runtime, current.as_deref()) {
        Ok(compiled) => {
            let compile_ms = started.elapsed().as_secs_f64() * 1000.0;
            let revision = compiled.revision;
            if let Some(mine) = gateway.config.public_url.as_deref() {
                if mine.trim_end_matches('/') != snapshot.public_url {
                    tracing::warn!(
                        configured = mine,
                        deployment = %snapshot.public_url,
                        "This gateway's public URL differs from its deployment's; agents are handed the deployment's."
                    );
                }
            }
            warm_issuers(gateway, &compiled);
            let agents = compiled.authn.agents.len();
            let swapping = std::time::Instant::now();
            // The old snapshot is freed here unless a request still holds it.
            gateway.snapshot.store(Some(Arc::new(compiled)));
            let swap_ms = swapping.elapsed().as_secs_f64() * 1000.0;
            tracing::info!(revision, agents, compile_ms, swap_ms, "Snapshot applied.");
            true
        }
        Err(errors) => {
            tracing::error!(revision = snapshot.revision, errors = ?errors, "Snapshot refused; keeping the current one.");
            false
        }
    }
}

/// Fetches the keys of act-as issuers the snapshot names and this process has none of yet,
/// in the background, so the first call does not wait for them.
fn warm_issuers(gateway: &Gateway, compiled: &super::Compiled) {
    for agent in &compiled.authn.agents {
        let Some(oidc) = &agent.act_as.oidc else {
            continue;
        };
        if oidc.keys.loaded() {
            continue;
        }
        let keys = oidc.keys.clone();
        let fetch = (gateway.http(), gateway.config.allow_private_targets);
        gateway.background.spawn(async move {
            keys.refresh((&fetch.0, fetch.1), crate::actas::oidc::REFETCH_FLOOR)
                .await;
        });
    }
}

/// Runs until `stop` flips.
pub async fn run(gateway: Arc<Gateway>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut backoff = Backoff::up_to(Duration::from_secs(5));
    // The revision last received, applied or not: a refused revision is not fetched again.
    let mut seen = gateway.current().map(|s| s.revision);
    let failing = &gateway.sync_failing_since;
    loop {
        // After a failure the next request returns at once, so a control plane that is back
        // is known to be back (and the policy fresh) without waiting out a long poll.
        let recovering = failing.load(Ordering::Relaxed) != 0;
        let request = GetSnapshotRequest {
            workspace_id: None,
            revision: seen,
            wait_seconds: Some(if recovering { 0 } else { WAIT_SECONDS }),
        };
        let outcome = tokio::select! {
            r = gateway.control.get_snapshot(&request) => r,
            _ = stop.wait_for(|s| *s) => return,
        };
        match outcome {
            Ok(received) => {
                failing.store(0, Ordering::Relaxed);
                backoff.reset();
                if let Some(snapshot) = received.reply.snapshot {
                    tracing::info!(
                        revision = snapshot.revision,
                        bytes = received.body.len(),
                        parse_ms = received.parse_time.as_secs_f64() * 1000.0,
                        "Snapshot received."
                    );
                    seen = Some(snapshot.revision);
                    receive(&gateway, snapshot, received.body).await;
                }
                continue;
            }
            Err(e) => {
                let now = chrono::Utc::now().timestamp_millis();
                let _ = failing.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
                tracing::warn!(error = %e, retry_in_ms = backoff.peek().as_millis() as u64, "Snapshot sync failed; serving the current snapshot.")
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff.take()) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// Applies a snapshot received as `body`; the body is written as the last-known-good
/// snapshot, on another thread while this one compiles, and kept once the snapshot is applied.
async fn receive(gateway: &Arc<Gateway>, snapshot: Snapshot, body: bytes::Bytes) {
    let staging = {
        let gateway = gateway.clone();
        tokio::task::spawn_blocking(move || gateway.lkg.stage(Vec::from(body)))
    };
    let before = gateway.current();
    let applied = apply(gateway, &snapshot);
    drop(snapshot);
    if applied {
        if let Some(current) = gateway.current() {
            if let Some(before) = &before {
                gateway
                    .credentials
                    .forget(&current.credentials_changed_since(before));
            }
            crate::mcp::discovery::discover_changed(
                gateway,
                &current.tools,
                current.gateways.values().map(|g| &g.tools),
            );
        }
    }
    drop(before);
    let kept = match staging.await {
        Ok(Ok(staged)) if applied => staged.keep(),
        Ok(Ok(_refused)) => Ok(()),
        Ok(Err(e)) => Err(e),
        Err(e) => Err(std::io::Error::other(e)),
    };
    if let Err(e) = kept {
        tracing::warn!(error = %e, "Could not write the last-known-good snapshot.");
    }
}
