//! Ships spooled events to `SyncService/IngestAudit` in batches of up to 100 (and about
//! 256 KiB): shortly after the writer reports new events, and at least every 5 s. The cursor
//! moves only when the control plane acknowledges a batch; failures back off and retry, so an
//! outage only delays events. A batch the control plane refuses as malformed is split until
//! the events it refuses stand alone: only those are dropped, each reported by an
//! `audit.dropped` event that names it, and their neighbours are stored.

use std::sync::Arc;
use std::time::Duration;

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{watch, Notify};

use super::spool::{Batch, Spool};
use crate::control::{Backoff, ControlPlane};

/// The spec's client defaults: batch size 100, flush interval 5 s.
pub const BATCH: usize = 100;
const FLUSH_INTERVAL: Duration = Duration::from_secs(5);
/// How long to let a burst gather before sending a batch that is not yet full.
const LINGER: Duration = Duration::from_millis(50);
/// On shutdown, how long a last attempt may take before events are left for the next start.
const FINAL_ATTEMPT: Duration = Duration::from_secs(2);

enum Sent {
    Acknowledged,
    Refused(String),
    Failed(String),
}

async fn send(control: &ControlPlane, body: Vec<u8>) -> Sent {
    match control.ingest_audit(body).await {
        Ok(()) => Sent::Acknowledged,
        // A malformed batch is refused the same way every time; anything else may pass later.
        Err(e) if e.is_bad_request() => Sent::Refused(e.to_string()),
        Err(e) => Sent::Failed(e.to_string()),
    }
}

/// A batch's lines that are JSON objects, and how many were not. Lines an earlier process
/// wrote are checked (without building them): what a crash garbled cannot be ingested. This
/// process's lines are whole events as serialized.
fn shippable(batch: &Batch) -> (Vec<&[u8]>, usize) {
    let (good, bad): (Vec<&[u8]>, Vec<&[u8]>) = batch
        .lines()
        .partition(|line| batch.own || is_json_object(line));
    (good, bad.len())
}

/// The request body for some events.
fn ingest_body(lines: &[&[u8]]) -> Vec<u8> {
    let mut body = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum::<usize>() + 16);
    body.extend_from_slice(b"{\"events\":[");
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(line);
    }
    body.extend_from_slice(b"]}");
    body
}

/// Sends `lines`; a refused part is split in halves and sent again, until each event the
/// control plane refuses stands alone. Returns those events with why they were refused, or the
/// failure that stopped shipping (then nothing is settled: the whole batch is sent again later,
/// and ingest keeps what it stored once).
async fn send_isolating<'a>(
    control: &ControlPlane,
    lines: &[&'a [u8]],
) -> Result<Vec<(&'a [u8], String)>, String> {
    let mut refused = Vec::new();
    let mut todo = vec![lines];
    while let Some(part) = todo.pop() {
        match send(control, ingest_body(part)).await {
            Sent::Acknowledged => {}
            Sent::Refused(why) if part.len() == 1 => refused.push((part[0], why)),
            Sent::Refused(_) => {
                let (first, second) = part.split_at(part.len() / 2);
                todo.push(second);
                todo.push(first);
            }
            Sent::Failed(why) => return Err(why),
        }
    }
    Ok(refused)
}

/// Drops an event the control plane refused, and records that with an `audit.dropped` event
/// naming it (counted as reported, so the writer does not report it again).
fn drop_refused(spool: &Spool, drops: &Drops, line: &[u8], why: &str) {
    let named = super::events::refused_line_event(line, why);
    let event_id = named.payload.event_id.as_deref().unwrap_or_default();
    tracing::error!(
        event_id,
        why,
        "The control plane refused an audit event; it is dropped."
    );
    drops.reported.fetch_add(1, Ordering::SeqCst);
    drops.dropped.fetch_add(1, Ordering::SeqCst);
    let Ok(mut out) = serde_json::to_vec(&named) else {
        return;
    };
    out.push(b'\n');
    if let Ok(pushed_out) = spool.append(&out) {
        drops.dropped.fetch_add(pushed_out, Ordering::SeqCst);
    }
}

/// Events dropped, and how many of those an `audit.dropped` event has reported.
#[derive(Clone, Default)]
pub struct Drops {
    pub dropped: Arc<AtomicU64>,
    pub reported: Arc<AtomicU64>,
}

fn is_json_object(line: &[u8]) -> bool {
    line.first() == Some(&b'{') && serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok()
}

/// Runs until `stop` flips, then makes one short last attempt to empty the spool; the cursor
/// is saved on the way out.
pub async fn run(
    spool: Spool,
    control: ControlPlane,
    written: Arc<Notify>,
    drops: Drops,
    stop: watch::Receiver<bool>,
) {
    ship(&spool, control, written, drops, stop).await;
    spool.save_cursor();
}

async fn ship(
    spool: &Spool,
    control: ControlPlane,
    written: Arc<Notify>,
    drops: Drops,
    stop: watch::Receiver<bool>,
) {
    let mut shipper = Shipper {
        spool,
        control,
        drops,
        stop,
        stopping: false,
        deadline: None,
        backoff: Backoff::up_to(FLUSH_INTERVAL),
    };
    loop {
        if shipper.out_of_time() {
            return;
        }
        let batch = match spool.read_batch(BATCH) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(error = %e, "Reading the audit spool failed.");
                if shipper.stopping {
                    return;
                }
                shipper.pause(FLUSH_INTERVAL).await;
                continue;
            }
        };
        let more = if batch.is_empty() {
            shipper.idle(&written).await
        } else {
            shipper.send(batch).await
        };
        if !more {
            return;
        }
    }
}

/// The shipper's state: whether it is stopping (one last attempt, until `deadline`) and how
/// long it waits after a failed send.
struct Shipper<'a> {
    spool: &'a Spool,
    control: ControlPlane,
    drops: Drops,
    stop: watch::Receiver<bool>,
    stopping: bool,
    deadline: Option<tokio::time::Instant>,
    /// After a failed send, up to `FLUSH_INTERVAL`.
    backoff: Backoff,
}

impl Shipper<'_> {
    fn out_of_time(&self) -> bool {
        self.stopping
            && self
                .deadline
                .is_some_and(|d| tokio::time::Instant::now() >= d)
    }

    fn begin_stopping(&mut self) {
        self.stopping = true;
        self.deadline = Some(tokio::time::Instant::now() + FINAL_ATTEMPT);
    }

    /// Waits `pause`, or until `stop` flips (then the last attempt begins).
    async fn pause(&mut self, pause: Duration) {
        let stopped = tokio::select! {
            _ = tokio::time::sleep(pause) => false,
            _ = self.stop.wait_for(|s| *s) => true,
        };
        if stopped {
            self.begin_stopping();
        }
    }

    /// Nothing left to ship: the cursor file catches up, then the shipper waits for events (a
    /// burst gathers into one batch); false when it is done.
    async fn idle(&mut self, written: &Notify) -> bool {
        if self.stopping {
            return false;
        }
        self.spool.save_cursor();
        let (woke, stopped) = tokio::select! {
            _ = written.notified() => (true, false),
            _ = tokio::time::sleep(FLUSH_INTERVAL) => (false, false),
            _ = self.stop.wait_for(|s| *s) => (false, true),
        };
        if stopped {
            self.begin_stopping();
        }
        if woke && self.spool.pending_bytes() < 64 * 1024 {
            tokio::time::sleep(LINGER).await;
        }
        true
    }

    /// Ships one batch (within the last attempt's time when stopping) and moves the cursor
    /// past it, or keeps it for the next try after the backoff; false when it is done.
    async fn send(&mut self, batch: Batch) -> bool {
        let (lines, bad) = shippable(&batch);
        if bad > 0 {
            tracing::error!(bad, "Unreadable lines in the audit spool were skipped.");
            self.drops.dropped.fetch_add(bad as u64, Ordering::SeqCst);
        }
        let sent = if lines.is_empty() {
            Ok(Vec::new())
        } else {
            let sending = send_isolating(&self.control, &lines);
            match self.stopping {
                true => tokio::time::timeout(FINAL_ATTEMPT, sending)
                    .await
                    .unwrap_or_else(|_| Err("timed out".into())),
                false => sending.await,
            }
        };
        match sent {
            Ok(refused) => {
                for (line, why) in refused {
                    drop_refused(self.spool, &self.drops, line, &why);
                }
                self.spool.advance(batch.from, batch.next);
                self.backoff.reset();
                true
            }
            Err(why) => self.failed(&why).await,
        }
    }

    /// After a failed send: the events stay in the spool; false when it is done.
    async fn failed(&mut self, why: &str) -> bool {
        if self.stopping {
            tracing::warn!(
                pending_bytes = self.spool.pending_bytes(),
                why,
                "Audit events stay in the spool until the next start."
            );
            return false;
        }
        tracing::warn!(
            why,
            retry_in_ms = self.backoff.peek().as_millis() as u64,
            "Shipping audit events failed; they stay in the spool."
        );
        let wait = self.backoff.take();
        self.pause(wait).await;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A control plane that refuses (400) any batch holding an event marked `bad`, and records
    /// the events of every batch it stores.
    async fn picky_ingest() -> (ControlPlane, Arc<std::sync::Mutex<Vec<String>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let stored = Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = stored.clone();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let mut data = Vec::new();
                let mut buf = [0u8; 4096];
                let body = loop {
                    let n = conn.read(&mut buf).await.unwrap();
                    data.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&data).to_string();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let len: usize = head
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length: ")
                                    .map(|v| v.trim().parse().unwrap())
                            })
                            .unwrap();
                        if body.len() >= len {
                            break body.to_string();
                        }
                    }
                };
                let events: serde_json::Value = serde_json::from_str(&body).unwrap();
                let names: Vec<String> = events["events"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e["n"].as_str().unwrap().to_string())
                    .collect();
                let status = if names.iter().any(|n| n.starts_with("bad")) {
                    "400 Bad Request"
                } else {
                    kept.lock().unwrap().extend(names);
                    "200 OK"
                };
                let reply = format!(
                    "HTTP/1.1 {status}\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}"
                );
                conn.write_all(reply.as_bytes()).await.unwrap();
            }
        });
        (ControlPlane::new(&url, "svc_dt_test"), stored)
    }

    #[tokio::test]
    async fn a_refused_batch_loses_only_the_events_refused_alone() {
        let (control, stored) = picky_ingest().await;
        let lines: Vec<Vec<u8>> = (0..100)
            .map(|i| {
                let n = if i == 37 || i == 80 {
                    format!("bad{i}")
                } else {
                    format!("ok{i}")
                };
                format!("{{\"n\":\"{n}\"}}").into_bytes()
            })
            .collect();
        let refs: Vec<&[u8]> = lines.iter().map(Vec::as_slice).collect();
        let refused = send_isolating(&control, &refs).await.unwrap();
        let refused: Vec<&[u8]> = refused.into_iter().map(|(l, _)| l).collect();
        assert_eq!(
            refused,
            [&b"{\"n\":\"bad37\"}"[..], &b"{\"n\":\"bad80\"}"[..]]
        );
        let mut stored = stored.lock().unwrap().clone();
        stored.sort_by_key(|n| n[2..].parse::<u32>().unwrap());
        let expected: Vec<String> = (0..100)
            .filter(|i| *i != 37 && *i != 80)
            .map(|i| format!("ok{i}"))
            .collect();
        assert_eq!(stored, expected, "every other event is stored, once");
    }

    #[test]
    fn a_refused_event_is_reported_by_name() {
        let e = crate::audit::events::refused_line_event(
            br#"{"event_id":"ev-1","type":"model.call","payload":{}}"#,
            "400: too large",
        );
        assert_eq!(e.event_type, "audit.dropped");
        let payload = serde_json::to_value(&e.payload).unwrap();
        assert_eq!(payload["event_id"], "ev-1");
        assert_eq!(payload["event_type"], "model.call");
        assert_eq!(payload["dropped"], 1);
        assert_eq!(payload["bytes"], 52);
        assert!(payload["refusal"].as_str().unwrap().contains("too large"));
    }

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
        let (lines, bad) = shippable(&batch);
        assert_eq!((lines.len(), bad), (3, 2));
        let body: serde_json::Value = serde_json::from_slice(&ingest_body(&lines)).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"events": [{"n": 1}, {"n": 2}, {"n": 4}]})
        );
        spool.advance(batch.from, batch.next);
        let own = spool.read_batch(10).unwrap();
        assert!(own.own);
        let (lines, bad) = shippable(&own);
        assert_eq!((lines.len(), bad), (1, 0));
        assert_eq!(ingest_body(&lines), b"{\"events\":[{\"n\":5}]}");
    }
}
