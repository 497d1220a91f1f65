//! Loads the spend counters: at start, and again whenever the shared store lost its data.
//! The counters are the control plane's record (`SyncService/GetSpend`) plus the charges still
//! in this gateway's spool. Reading the spool first means an event shipped in between is
//! counted twice (stricter), never not at all. Between loads, counters of ended windows are
//! forgotten.

use std::sync::Arc;
use std::time::Duration;

use portcullis_shared::snapshot::Charge;

use crate::control::Backoff;
use crate::Gateway;

/// How often counters of ended windows are pruned.
const PRUNE_EVERY: Duration = Duration::from_secs(600);

pub async fn run(gw: Arc<Gateway>, mut stop: tokio::sync::watch::Receiver<bool>) {
    if !load_until_done(&gw, &mut stop).await {
        return;
    }
    loop {
        let reseed = async {
            match gw.redis_spend.get() {
                Some(store) => store.reseed.notified().await,
                None => std::future::pending().await,
            }
        };
        let reseed = tokio::select! {
            _ = tokio::time::sleep(PRUNE_EVERY) => false,
            _ = reseed => true,
            _ = stop.wait_for(|s| *s) => return,
        };
        if !reseed {
            gw.spend.prune(chrono::Utc::now().timestamp());
        } else if !load_until_done(&gw, &mut stop).await {
            return;
        }
    }
}

/// Loads the counters, retrying with backoff; false when the gateway stopped first.
async fn load_until_done(gw: &Gateway, stop: &mut tokio::sync::watch::Receiver<bool>) -> bool {
    let mut backoff = Backoff::up_to(Duration::from_secs(5));
    loop {
        match load(gw).await {
            Ok(()) => return true,
            Err(why) => tracing::warn!(
                why,
                retry_in_ms = backoff.peek().as_millis() as u64,
                "Could not load spend counters; calls under a quota wait for them."
            ),
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff.take()) => {}
            _ = stop.wait_for(|s| *s) => return false,
        }
    }
}

async fn load(gw: &Gateway) -> Result<(), String> {
    let pending = gw.audit.unshipped_charges();
    let recorded = gw.control.get_spend().await.map_err(|e| e.to_string())?;
    let (n, m) = (recorded.spend.len(), pending.len());
    let charges: Vec<Charge> = recorded.spend.into_iter().chain(pending).collect();
    match &gw.config.spend_store {
        Some(url) => {
            let store = match gw.redis_spend.get() {
                Some(s) => s.clone(),
                None => {
                    let s = Arc::new(super::redis::RedisSpend::connect(url).await?);
                    gw.redis_spend.get_or_init(|| s).clone()
                }
            };
            store.seed(&recorded.workspace_id, charges).await?;
            tracing::info!(recorded = n, unshipped = m, "Shared spend counters ready.");
        }
        None => {
            gw.spend.seed(charges);
            tracing::info!(recorded = n, unshipped = m, "Spend counters loaded.");
        }
    }
    Ok(())
}
