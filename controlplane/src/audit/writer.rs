//! Group commit for audit ingest. Every batch to store (a gateway's `IngestAudit`, the control
//! plane's own events) goes to one writer task; what arrives while it writes is stored
//! together in its next transaction, up to [`GROUP_EVENTS`], and each caller is answered once
//! that transaction committed. Many gateways shipping at once then cost one commit — one log
//! append of each page touched — instead of one each, and SQLite's single writer is taken once.

use std::collections::HashSet;

use futures_util::FutureExt;
use tokio::sync::{mpsc, oneshot};

use super::{write_now, Fanout, Incoming};
use crate::store::{Store, StoreError};

/// Most events in one transaction (a request's batch is never split).
const GROUP_EVENTS: usize = 2000;

struct Job {
    events: Vec<Incoming>,
    done: oneshot::Sender<Result<u64, StoreError>>,
}

pub(super) struct Writer {
    jobs: mpsc::UnboundedSender<Job>,
}

impl Writer {
    /// Starts the writer task; it ends when the hub (its only sender) is dropped.
    pub(super) fn start(store: Store, fanout: Fanout) -> Self {
        let (jobs, queue) = mpsc::unbounded_channel();
        tokio::spawn(run(store, fanout, queue));
        Self { jobs }
    }

    /// Stores the events with whatever else is waiting; how many of them were new.
    pub(super) async fn write(&self, events: Vec<Incoming>) -> Result<u64, StoreError> {
        let (done, answer) = oneshot::channel();
        self.jobs
            .send(Job { events, done })
            .map_err(|_| StoreError::Batch("the audit writer has stopped".into()))?;
        answer
            .await
            .unwrap_or_else(|_| Err(StoreError::Batch("the audit writer has stopped".into())))
    }
}

async fn run(store: Store, fanout: Fanout, mut queue: mpsc::UnboundedReceiver<Job>) {
    while let Some(first) = queue.recv().await {
        let mut size = first.events.len();
        let mut group = vec![first];
        while size < GROUP_EVENTS {
            match queue.try_recv() {
                Ok(job) => {
                    size += job.events.len();
                    group.push(job);
                }
                Err(_) => break,
            }
        }
        // A panic fails this group's callers (their answers are dropped), not the writer.
        let committed = std::panic::AssertUnwindSafe(commit(&store, &fanout, group));
        if committed.catch_unwind().await.is_err() {
            tracing::error!("The audit writer failed on a group; its callers were told to retry.");
        }
    }
}

/// Writes a group in one transaction and answers each of its callers. When the group fails
/// and holds more than one batch, each is written alone, so one batch the database refuses
/// never holds back the others.
async fn commit(store: &Store, fanout: &Fanout, group: Vec<Job>) {
    let mut events = Vec::with_capacity(group.iter().map(|j| j.events.len()).sum());
    let mut answers = Vec::with_capacity(group.len());
    for job in group {
        let start = events.len();
        events.extend(job.events);
        answers.push((start..events.len(), job.done));
    }
    match write_now(store, fanout, &events).await {
        Ok(new_ids) => {
            for (range, done) in answers {
                let _ = done.send(Ok(new_in(&events[range], &new_ids)));
            }
        }
        Err(e) if answers.len() == 1 => {
            if let Some((_, done)) = answers.pop() {
                let _ = done.send(Err(e));
            }
        }
        Err(_) => {
            for (range, done) in answers {
                let alone = write_now(store, fanout, &events[range.clone()]).await;
                let _ = done.send(alone.map(|new_ids| new_in(&events[range], &new_ids)));
            }
        }
    }
}

/// How many of a caller's events were new, each id once.
fn new_in(events: &[Incoming], new_ids: &HashSet<String>) -> u64 {
    let mut seen = HashSet::new();
    events
        .iter()
        .map(|e| e.event.event_id.as_str())
        .filter(|id| new_ids.contains(*id) && seen.insert(*id))
        .count() as u64
}
