//! Beside every request: audit. Emitting an event is a non-blocking hand-off to a channel; a
//! writer thread appends events to an on-disk spool in the data dir; a shipper sends them to
//! the control plane (`SyncService/IngestAudit`) in batches of up to 100, shortly after they
//! are written and at least every 5 s. The spool survives restarts and control-plane outages;
//! it is bounded, and when full the oldest events are dropped, counted, and reported with an
//! `audit.dropped` event. Ingest is idempotent by event id, so re-sending is harmless.

mod events;
pub mod guards;
pub mod ship;
mod spool;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use portcullis_shared::audit::{bound, AuditEvent};
use tokio::sync::{mpsc, oneshot, watch, Notify};

pub use events::{denial_event, dropped_event, event, millis, refused_event, resource, PreAuth};

/// Events waiting for the writer; past this, emission drops and counts.
const CHANNEL: usize = 65_536;
/// The writer serializes up to this many queued events per spool write.
const WRITE_BATCH: usize = 512;
/// While events keep coming, the writer looks for more this often.
const POLL_WHEN_BUSY: std::time::Duration = std::time::Duration::from_millis(5);

enum Msg {
    /// One event as a JSON line (serialized by the emitting thread, so the many small
    /// allocations of an event are made and freed on one thread).
    Event(Vec<u8>),
    /// Everything sent before is written and synced; the writer stops.
    Close(oneshot::Sender<()>),
}

pub struct Audit {
    tx: Option<mpsc::Sender<Msg>>,
    spool: Option<spool::Spool>,
    /// Refusals made before a caller is identified (bad keys, disabled gateways) are recorded
    /// at a bounded rate, so a flood of bad keys cannot push real events out of the spool.
    anonymous: AnonymousLimit,
    /// Events dropped: the writer fell behind, the spool was full, a line was unreadable, or
    /// the control plane refused an event.
    drops: ship::Drops,
}

/// The background work, to finish on shutdown.
pub struct AuditTasks {
    tx: mpsc::Sender<Msg>,
    writer: std::thread::JoinHandle<()>,
    shipper: tokio::task::JoinHandle<()>,
    stop: watch::Sender<bool>,
}

impl AuditTasks {
    /// Writes what is queued, makes the spool durable, and gives the shipper one short last
    /// try; what it cannot send waits in the spool for the next start.
    pub async fn finish(self) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Msg::Close(done)).await.is_ok() {
            let _ = wait.await;
        }
        let writer = self.writer;
        let _ = tokio::task::spawn_blocking(move || writer.join()).await;
        let _ = self.stop.send(true);
        let _ = self.shipper.await;
    }
}

impl Audit {
    /// Audit off: events are discarded.
    pub fn disabled() -> Self {
        Self {
            tx: None,
            spool: None,
            anonymous: AnonymousLimit::default(),
            drops: ship::Drops::default(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.tx.is_some()
    }

    /// Opens the spool in `dir/audit`, starts the writer thread and the shipper (on the
    /// current runtime).
    pub fn start(
        dir: &Path,
        max_bytes: u64,
        control: crate::control::ControlPlane,
    ) -> std::io::Result<(Self, AuditTasks)> {
        let spool = spool::Spool::open(&dir.join("audit"), max_bytes)?;
        let (tx, rx) = mpsc::channel(CHANNEL);
        let drops = ship::Drops::default();
        let written = Arc::new(Notify::new());
        let writer = {
            let (spool, written, drops) = (spool.clone(), written.clone(), drops.clone());
            std::thread::Builder::new()
                .name("audit-writer".into())
                .spawn(move || write(spool, rx, written, drops))?
        };
        let (stop, stop_rx) = watch::channel(false);
        let shipper = tokio::spawn(ship::run(
            spool.clone(),
            control,
            written,
            drops.clone(),
            stop_rx,
        ));
        let tasks = AuditTasks {
            tx: tx.clone(),
            writer,
            shipper,
            stop,
        };
        Ok((
            Self {
                tx: Some(tx),
                spool: Some(spool),
                anonymous: AnonymousLimit::default(),
                drops,
            },
            tasks,
        ))
    }

    /// Whether a refusal of an unidentified caller is recorded now; `Some(n)` carries how many
    /// were left unrecorded since the last one that was.
    pub fn admit_anonymous(&self) -> Option<u64> {
        self.enabled().then(|| self.anonymous.admit()).flatten()
    }

    /// The quota charges of events this gateway recorded but has not shipped yet: the control
    /// plane's record of spend does not hold them until it stores the events.
    pub fn unshipped_charges(&self) -> Vec<portcullis_shared::snapshot::Charge> {
        #[derive(serde::Deserialize)]
        struct Line {
            #[serde(default)]
            payload: Payload,
        }
        #[derive(Default, serde::Deserialize)]
        struct Payload {
            #[serde(default)]
            charges: Vec<portcullis_shared::snapshot::Charge>,
        }
        let Some(spool) = &self.spool else {
            return Vec::new();
        };
        spool
            .unshipped()
            .iter()
            .filter(|l| l.windows(10).any(|w| w == b"\"charges\""))
            .filter_map(|l| serde_json::from_slice::<Line>(l).ok())
            .flat_map(|l| l.payload.charges)
            .collect()
    }

    /// The audit lines of `/metrics`.
    pub fn render_metrics(&self, out: &mut String) {
        use std::fmt::Write as _;
        out.push_str("# TYPE portcullis_gateway_audit_dropped_total counter\n");
        let _ = writeln!(
            out,
            "portcullis_gateway_audit_dropped_total {}",
            self.drops.dropped.load(Ordering::Relaxed)
        );
        out.push_str("# TYPE portcullis_gateway_audit_spool_pending_bytes gauge\n");
        let _ = writeln!(
            out,
            "portcullis_gateway_audit_spool_pending_bytes {}",
            self.spool.as_ref().map_or(0, spool::Spool::pending_bytes)
        );
    }

    /// Hands an event over without waiting; a full channel drops it (and counts it). Its
    /// caller-supplied strings are cut and its size bounded first (`bound`), so that it ships.
    pub fn emit<P: serde::Serialize>(&self, mut event: AuditEvent<P>) {
        let Some(tx) = &self.tx else { return };
        bound::clip_envelope(&mut event);
        let mut line = Vec::with_capacity(1024);
        if serde_json::to_writer(&mut line, &event).is_err() {
            self.drops.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let Some(mut line) = bound::bounded_line(line) else {
            self.drops.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        line.push(b'\n');
        if tx.try_send(Msg::Event(line)).is_err() {
            self.drops.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The writer thread: appends what arrives, in order, and reports drops.
fn write(
    spool: spool::Spool,
    mut rx: mpsc::Receiver<Msg>,
    written: Arc<Notify>,
    drops: ship::Drops,
) {
    let dropped = &drops.dropped;
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut busy = false;
    let mut full = false;
    loop {
        // Under load, poll every few milliseconds instead of waiting on the channel: a waiting
        // receiver makes every sender pay a thread wake-up. When a poll finds nothing, wait.
        let first = if busy {
            if !full {
                std::thread::sleep(POLL_WHEN_BUSY);
            }
            match rx.try_recv() {
                Ok(m) => m,
                Err(mpsc::error::TryRecvError::Empty) => {
                    busy = false;
                    continue;
                }
                Err(mpsc::error::TryRecvError::Disconnected) => break,
            }
        } else {
            match rx.blocking_recv() {
                Some(m) => m,
                None => break,
            }
        };
        busy = true;
        buf.clear();
        let mut close = None;
        let mut next = Some(first);
        let mut n = 0;
        while let Some(msg) = next.take() {
            match msg {
                Msg::Event(line) => {
                    buf.extend_from_slice(&line);
                    n += 1;
                }
                Msg::Close(done) => {
                    close = Some(done);
                    break;
                }
            }
            if n < WRITE_BATCH {
                next = rx.try_recv().ok();
            }
        }
        full = n >= WRITE_BATCH;
        if !buf.is_empty() {
            match spool.append(&buf) {
                Ok(0) => {}
                Ok(pushed_out) => {
                    tracing::error!(
                        dropped = pushed_out,
                        "The audit spool is full; its oldest events were dropped."
                    );
                    dropped.fetch_add(pushed_out, Ordering::Relaxed);
                }
                Err(e) => {
                    tracing::error!(error = %e, events = n, "Writing to the audit spool failed; these events are lost.");
                    dropped.fetch_add(n as u64, Ordering::Relaxed);
                }
            }
            report_drops(&spool, &drops);
            written.notify_one();
        }
        if let Some(done) = close {
            spool.sync();
            let _ = done.send(());
            return;
        }
    }
    spool.sync();
}

/// Drops since the last report become an `audit.dropped` event of their own. The shipper
/// reports the events it drops itself, counting them as reported before it counts them as
/// dropped, so they are never reported twice.
fn report_drops(spool: &spool::Spool, drops: &ship::Drops) {
    let (dropped, reported) = (&drops.dropped, &drops.reported);
    let total = dropped.load(Ordering::SeqCst);
    let before = reported.load(Ordering::SeqCst);
    if total <= before
        || reported
            .compare_exchange(before, total, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
    {
        return;
    }
    let e = dropped_event(total - before, "the audit spool or its queue was full");
    let Ok(mut line) = serde_json::to_vec(&e) else {
        return;
    };
    line.push(b'\n');
    // Whatever this pushes out is counted and reported with the next write.
    if let Ok(n) = spool.append(&line) {
        dropped.fetch_add(n, Ordering::Relaxed);
    }
}

/// At most [`AnonymousLimit::PER_SECOND`] events a second; the rest are counted.
#[derive(Default)]
struct AnonymousLimit {
    second: AtomicU64,
    count: AtomicU64,
    suppressed: AtomicU64,
}

impl AnonymousLimit {
    const PER_SECOND: u64 = 50;

    fn admit(&self) -> Option<u64> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if self.second.swap(now, Ordering::AcqRel) != now {
            self.count.store(0, Ordering::Release);
        }
        if self.count.fetch_add(1, Ordering::AcqRel) < Self::PER_SECOND {
            Some(self.suppressed.swap(0, Ordering::AcqRel))
        } else {
            self.suppressed.fetch_add(1, Ordering::AcqRel);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anonymous_refusals_are_rate_limited_and_counted() {
        let limit = AnonymousLimit::default();
        let admissions: Vec<u64> = (0..200).filter_map(|_| limit.admit()).collect();
        let admitted = admissions.len() as u64;
        // Within one second (or straddling two), at most two seconds' worth get through.
        assert!((AnonymousLimit::PER_SECOND..=2 * AnonymousLimit::PER_SECOND).contains(&admitted));
        // Every refusal is counted: reported by a later admission (after a second boundary)
        // or still pending.
        let reported: u64 = admissions.iter().sum();
        let pending = limit.suppressed.load(Ordering::Acquire);
        assert_eq!(admitted + reported + pending, 200);
    }
}
