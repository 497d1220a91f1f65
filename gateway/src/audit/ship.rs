//! Ships spooled events to `SyncService/IngestAudit` in batches of up to 100: shortly after
//! the writer reports new events, and at least every 5 s. The cursor moves only when the control
//! plane acknowledges a batch; failures back off and retry, so an outage only delays events.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Notify};

use super::spool::{Batch, Spool};

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

async fn send(http: &reqwest::Client, target: &Target, body: Vec<u8>) -> Sent {
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

/// The request body for a batch: its lines that are JSON objects, with how many that is and
/// how many were not. Lines an earlier process wrote are checked (without building them): what
/// a crash garbled cannot be ingested. This process's lines are whole events as serialized.
fn ingest_body(batch: &Batch) -> (Vec<u8>, usize, usize) {
    let mut body = Vec::with_capacity(batch.lines().map(|l| l.len() + 1).sum::<usize>() + 16);
    body.extend_from_slice(b"{\"events\":[");
    let (mut kept, mut bad) = (0, 0);
    for line in batch.lines() {
        if !batch.own && !is_json_object(line) {
            bad += 1;
            continue;
        }
        if kept > 0 {
            body.push(b',');
        }
        body.extend_from_slice(line);
        kept += 1;
    }
    body.extend_from_slice(b"]}");
    (body, kept, bad)
}

fn is_json_object(line: &[u8]) -> bool {
    line.first() == Some(&b'{') && serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok()
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
        if batch.is_empty() {
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
        let (body, events, bad) = ingest_body(&batch);
        if bad > 0 {
            tracing::error!(bad, "Unreadable lines in the audit spool were skipped.");
            dropped.fetch_add(bad as u64, std::sync::atomic::Ordering::Relaxed);
        }
        let sent = if events == 0 {
            Sent::Acknowledged
        } else if stopping {
            match tokio::time::timeout(FINAL_ATTEMPT, send(&http, &target, body)).await {
                Ok(s) => s,
                Err(_) => Sent::Failed("timed out".into()),
            }
        } else {
            send(&http, &target, body).await
        };
        match sent {
            Sent::Acknowledged => {
                spool.advance(batch.from, batch.next);
                backoff = Duration::from_millis(250);
            }
            Sent::Refused(why) => {
                tracing::error!(
                    events,
                    why,
                    "The control plane refused an audit batch; it is dropped."
                );
                dropped.fetch_add(events as u64, std::sync::atomic::Ordering::Relaxed);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_ships_its_well_formed_lines_and_counts_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        // Lines an earlier process left (a crash can garble them).
        let earlier = Spool::open(dir.path(), 1 << 30).unwrap();
        earlier
            .append(b"{\"n\":1}\n  {\"n\":2} \n{\"n\":\n[3]\n\n{\"n\":4}\n")
            .unwrap();
        drop(earlier);
        let spool = Spool::open(dir.path(), 1 << 30).unwrap();
        spool.append(b"{\"n\":5}\n").unwrap();
        let batch = spool.read_batch(10).unwrap();
        assert!(!batch.own);
        let (body, kept, bad) = ingest_body(&batch);
        assert_eq!((kept, bad), (3, 2));
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"events": [{"n": 1}, {"n": 2}, {"n": 4}]})
        );
        spool.advance(batch.from, batch.next);
        let own = spool.read_batch(10).unwrap();
        assert!(own.own);
        let (body, kept, bad) = ingest_body(&own);
        assert_eq!((kept, bad), (1, 0));
        assert_eq!(body, b"{\"events\":[{\"n\":5}]}");
    }
}
