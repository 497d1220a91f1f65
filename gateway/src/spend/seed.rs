//! Loads the spend counters once at start: first the charges still in this gateway's spool,
//! then the control plane's record (`SyncService/GetSpend`). Reading the spool first means an
//! event shipped in between is counted twice (stricter), never not at all.

use std::sync::Arc;
use std::time::Duration;

use portcullis_shared::snapshot::{GetSpendRequest, GetSpendResponse};

use crate::Gateway;

pub async fn run(gw: Arc<Gateway>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let url = format!(
        "{}/svc.sync.v1.SyncService/GetSpend",
        gw.config.control_plane_url.trim_end_matches('/')
    );
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap_or_default();
    let mut backoff = Duration::from_millis(250);
    loop {
        let pending = gw.audit.unshipped_charges();
        let reply = http
            .post(&url)
            .bearer_auth(&gw.config.token)
            .json(&GetSpendRequest::default())
            .send()
            .await;
        let outcome = match reply {
            Ok(r) if r.status().is_success() => r
                .json::<GetSpendResponse>()
                .await
                .map_err(|e| format!("unreadable reply: {e}")),
            Ok(r) => Err(format!("control plane answered {}", r.status())),
            Err(e) => Err(format!("control plane unreachable: {e}")),
        };
        let outcome = match (outcome, &gw.config.spend_store) {
            (Ok(recorded), Some(url)) => shared(&gw, url, recorded, pending).await,
            (Ok(recorded), None) => {
                let (n, m) = (recorded.spend.len(), pending.len());
                gw.spend.seed(recorded.spend.into_iter().chain(pending));
                tracing::info!(recorded = n, unshipped = m, "Spend counters loaded.");
                Ok(())
            }
            (Err(e), _) => Err(e),
        };
        match outcome {
            Ok(()) => return,
            Err(why) => {
                tracing::warn!(
                    why,
                    retry_in_ms = backoff.as_millis() as u64,
                    "Could not load spend counters; calls under a quota wait for them."
                );
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// Connects the shared store (once) and fills the counters it lacks.
async fn shared(
    gw: &Gateway,
    url: &str,
    recorded: GetSpendResponse,
    pending: Vec<portcullis_shared::snapshot::Charge>,
) -> Result<(), String> {
    let store = match gw.shared_spend.get() {
        Some(s) => s.clone(),
        None => {
            let s = Arc::new(super::shared::SharedSpend::connect(url).await?);
            let _ = gw.shared_spend.set(s.clone());
            s
        }
    };
    let n = recorded.spend.len();
    store
        .seed(recorded.spend.into_iter().chain(pending).collect())
        .await?;
    tracing::info!(recorded = n, "Shared spend counters ready.");
    Ok(())
}
