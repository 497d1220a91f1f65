//! Ships spooled events to `SyncService/IngestAudit` in batches of up to 100: shortly after
//! the writer reports new events, and at least every 5 s. The cursor moves only when the control
//! plane acknowledges a batch; failures back off and retry, so an outage only delays events.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Notify};

use super::spool::Spool;

/// The spec's client defaults: batch size 100, flush interval 5 s.
pub const BATCH: usize = 100;
const FLUSH_INTERVAL: Duration = Duration::from_secs(5);
/// How long to let a burst gather before sending a batch that is not yet full.
const LINGER: Duration = Duration::from_millis(50);
/// On shutdown, how long a last attempt may take before events are left for the next start.
const FINAL_ATTEMPT: Duration = Duration::from_secs(2);

#[derive(Clone)]
pub struct Target {
    pub url: String,
    pub token: String,
}

impl Target {
    pub fn new(control_plane_url: &str, token: &str) -> Self {
        Self {
            url: format!(
                "{}/svc.sync.v1.SyncService/IngestAudit",
                control_plane_url.trim_end_matches('/')
            ),
            token: token.to_string(),
        }
    }
}

enum Sent {
    Acknowledged,
    Refused(String),
    Failed(String),
}

async fn send(http: &reqwest::Client, target: &Target, lines: &[Vec<u8>]) -> Sent {
    let mut body = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum::<usize>() + 16);
    body.extend_from_slice(b"{\"events\":[");
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(line);
    }
    body.extend_from_slice(b"]}");
    let response = http
        .post(&target.url)
        .bearer_auth(&target.token)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await;
    match response {
        Ok(r) if r.status().is_success() => Sent::Acknowledged,
        Ok(r) => {
            let status = r.status();
            let text = r.text().await.unwrap_or_default();
            // A malformed batch is refused the same way every time; anything else may pass later.
            if status.as_u16() == 400 {
                Sent::Refused(format!("{status}: {text}"))
            } else {
                Sent::Failed(format!("{status}: {text}"))
            }
        }
        Err(e) => Sent::Failed(e.to_string()),
    }
}

/// Keeps only lines that are JSON objects (checked without building them); what a crash
/// garbled cannot be ingested.
fn well_formed(lines: Vec<Vec<u8>>) -> (Vec<Vec<u8>>, usize) {
    let before = lines.len();
    let kept: Vec<Vec<u8>> = lines
        .into_iter()
        .filter(|l| {
            l.first() == Some(&b'{') && serde_json::from_slice::<serde::de::IgnoredAny>(l).is_ok()
        })
        .collect();
    let bad = before - kept.len();
    (kept, bad)
}

/// Runs until `stop` flips, then makes one short last attempt to empty the spool; the cursor
/// is saved on the way out.
pub async fn run(
    spool: Spool,
    target: Target,
    written: Arc<Notify>,
    dropped: Arc<std::sync::atomic::AtomicU64>,
    stop: watch::Receiver<bool>,
) {
    ship(&spool, target, written, dropped, stop).await;
    spool.save_cursor();
}

async fn ship(
    spool: &Spool,
    target: Target,
    written: Arc<Notify>,
    dropped: Arc<std::sync::atomic::AtomicU64>,
    mut stop: watch::Receiver<bool>,
) {
    let http = match reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .connect_timeout(Duration::from_secs(5))
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "Cannot build the audit client; events stay in the spool.");
            return;
        }
    };
    let mut backoff = Duration::from_millis(250);
    let mut stopping = false;
    let mut deadline: Option<tokio::time::Instant> = None;
    loop {
        if stopping && deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
            return;
        }
        let batch = match spool.read_batch(BATCH) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(error = %e, "Reading the audit spool failed.");
                if stopping {
                    return;
                }
                tokio::select! {
                    _ = tokio::time::sleep(FLUSH_INTERVAL) => {}
                    _ = stop.wait_for(|s| *s) => { stopping = true; deadline = Some(tokio::time::Instant::now() + FINAL_ATTEMPT); }
                }
                continue;
            }
        };
        if batch.lines.is_empty() {
            if stopping {
                return;
            }
            // Nothing left to ship: the file catches up before waiting.
            spool.save_cursor();
            let woke = tokio::select! {
                _ = written.notified() => true,
                _ = tokio::time::sleep(FLUSH_INTERVAL) => false,
                _ = stop.wait_for(|s| *s) => { stopping = true; deadline = Some(tokio::time::Instant::now() + FINAL_ATTEMPT); false }
            };
            // Let a burst gather into one batch.
            if woke && spool.pending_bytes() < 64 * 1024 {
                tokio::time::sleep(LINGER).await;
            }
            continue;
        }
        let (lines, bad) = well_formed(batch.lines);
        if bad > 0 {
            tracing::error!(bad, "Unreadable lines in the audit spool were skipped.");
            dropped.fetch_add(bad as u64, std::sync::atomic::Ordering::Relaxed);
        }
        let sent = if lines.is_empty() {
            Sent::Acknowledged
        } else if stopping {
            match tokio::time::timeout(FINAL_ATTEMPT, send(&http, &target, &lines)).await {
                Ok(s) => s,
                Err(_) => Sent::Failed("timed out".into()),
            }
        } else {
            send(&http, &target, &lines).await
        };
        match sent {
            Sent::Acknowledged => {
                spool.advance(batch.from, batch.next);
                backoff = Duration::from_millis(250);
            }
            Sent::Refused(why) => {
                tracing::error!(
                    events = lines.len(),
                    why,
                    "The control plane refused an audit batch; it is dropped."
                );
                dropped.fetch_add(lines.len() as u64, std::sync::atomic::Ordering::Relaxed);
                spool.advance(batch.from, batch.next);
            }
            Sent::Failed(why) => {
                if stopping {
                    tracing::warn!(
                        pending_bytes = spool.pending_bytes(),
                        why,
                        "Audit events stay in the spool until the next start."
                    );
                    return;
                }
                tracing::warn!(
                    why,
                    retry_in_ms = backoff.as_millis() as u64,
                    "Shipping audit events failed; they stay in the spool."
                );
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = stop.wait_for(|s| *s) => { stopping = true; deadline = Some(tokio::time::Instant::now() + FINAL_ATTEMPT); }
                }
                backoff = (backoff * 2).min(FLUSH_INTERVAL);
            }
        }
    }
}
