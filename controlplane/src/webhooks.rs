//! Webhooks: workspace events delivered as signed POSTs (DESIGN §8). Stored audit events of
//! the kinds subscriptions can name are queued in the ingest's own transaction (the outbox);
//! the dispatcher matches them against subscriptions and creates deliveries; the sender
//! claims due deliveries with a lease (so several control-plane replicas send each attempt
//! once), signs each attempt (Standard Webhooks), records it, and schedules the next on the
//! retry schedule until one is acknowledged or the delivery goes to `dlq`. Everything lives in
//! the store and survives a restart; a slow receiver holds only the sender's own tasks.

pub mod dispatch;
pub mod events;
pub mod filter;
pub mod providers;
pub mod send;
pub mod target;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use crate::store::{now_ms, Store};

/// What governs delivery, from the configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The wait before each attempt: the first is the initial one (normally immediate).
    pub schedule: Vec<Duration>,
    /// How long bodies are kept for replay.
    pub body_retention: Duration,
    /// Whether endpoints may be plain-http, loopback or private addresses.
    pub allow_private: bool,
    /// How long settled deliveries and their attempts are kept.
    pub history_retention: Duration,
}

/// A claim lasts this long; a process that dies mid-attempt leaves it to run out.
pub const LEASE: Duration = Duration::from_secs(30);

impl Settings {
    pub fn from_config(c: &crate::config::Config) -> Result<Self, String> {
        let schedule = c
            .webhook_retry_schedule
            .split(',')
            .map(|s| parse_duration(s.trim()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("webhook_retry_schedule: {e}"))?;
        if schedule.is_empty() || schedule.len() > 20 {
            return Err("webhook_retry_schedule: list 1 to 20 waits, like 0s,5s,5m".into());
        }
        let day = Duration::from_secs(24 * 3600);
        Ok(Self {
            schedule,
            body_retention: day * c.webhook_body_retention_days,
            allow_private: c.allow_private_webhook_targets || c.allow_private_targets,
            history_retention: day * c.audit_retention_days.max(c.webhook_body_retention_days),
        })
    }

    /// When the attempt after `attempts` failed ones is due, or `None` when they are used up.
    /// Waits get up to 10 % jitter; a receiver's `Retry-After` can lengthen one (to 24 h).
    pub fn next_attempt(&self, attempts: usize, retry_after: Option<Duration>) -> Option<Duration> {
        let wait = *self.schedule.get(attempts)?;
        let jitter = wait.mul_f64(rand::random::<f64>() * 0.1);
        let wait = wait + jitter;
        Some(match retry_after {
            Some(r) => wait.max(r.min(Duration::from_secs(24 * 3600))),
            None => wait,
        })
    }
}

/// `250ms`, `5s`, `5m`, `2h` or `1d`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 5s, 5m or 2h"))?;
    let secs = match unit {
        "ms" => return Ok(Duration::from_millis(n)),
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86400,
        _ => return Err(format!("{s:?} is not a duration like 5s, 5m or 2h")),
    };
    Ok(Duration::from_secs(secs))
}

/// The running workers, stopped with the service.
pub struct Workers {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

/// Wakes the workers early: new events were stored, or a delivery was queued.
#[derive(Debug, Default, Clone)]
pub struct Wake {
    pub events: Arc<Notify>,
    pub deliveries: Arc<Notify>,
}

/// What the API's eventing operations need of the running service.
pub struct Hooks {
    pub settings: Arc<Settings>,
    pub wake: Wake,
}

impl Hooks {
    /// `stored` is poked when ingest queues events (the audit hub's).
    pub fn new(settings: Settings, stored: Arc<Notify>) -> Self {
        Self {
            settings: Arc::new(settings),
            wake: Wake {
                events: stored,
                deliveries: Arc::default(),
            },
        }
    }
}

impl Workers {
    pub fn start(store: Store, settings: Arc<Settings>, wake: Wake) -> Self {
        let (stop, stopped) = watch::channel(false);
        let owner = format!("{}:{}", crate::audit::instance_id(), uuid::Uuid::new_v4());
        let tasks = vec![
            tokio::spawn(dispatch::run(
                store.clone(),
                settings.clone(),
                wake.clone(),
                stopped.clone(),
            )),
            tokio::spawn(send::run(
                store.clone(),
                settings.clone(),
                owner,
                wake,
                stopped.clone(),
            )),
            tokio::spawn(purge(store, settings, stopped)),
        ];
        Self { stop, tasks }
    }

    /// Stops the workers; an attempt in flight is abandoned and its lease runs out.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// Sleeps for `wait`, or less if woken or told to stop; true when told to stop.
pub async fn idle(wait: Duration, wake: &Notify, stop: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(wait) => {}
        _ = wake.notified() => {}
        _ = stop.wait_for(|s| *s) => return true,
    }
    *stop.borrow()
}

/// Drops bodies past retention and settled deliveries past the history period, hourly.
async fn purge(store: Store, settings: Arc<Settings>, mut stop: watch::Receiver<bool>) {
    let never = Notify::new();
    loop {
        let now = now_ms();
        let settled_before = now - settings.history_retention.as_millis() as i64;
        let purged = async {
            let mut tx = store.write_unscoped().await?;
            let n = crate::store::webhooks::purge(tx.conn(), now, settled_before).await?;
            tx.commit().await?;
            Ok::<u64, crate::store::StoreError>(n)
        }
        .await;
        if let Err(e) = purged {
            tracing::warn!(error = %e, "Webhook retention purge failed; retrying in an hour.");
        }
        if idle(Duration::from_secs(3600), &never, &mut stop).await {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_schedule_is_read_and_followed_then_ends() {
        let config = crate::config::Config {
            webhook_retry_schedule: "0s, 5s ,2h".into(),
            ..Default::default()
        };
        let s = Settings::from_config(&config).unwrap();
        assert_eq!(s.schedule[2], Duration::from_secs(7200));
        let second = s.next_attempt(1, None).unwrap();
        assert!(second >= Duration::from_secs(5) && second <= Duration::from_millis(5500));
        assert_eq!(s.next_attempt(3, None), None);
        let later = s.next_attempt(1, Some(Duration::from_secs(60))).unwrap();
        assert_eq!(later, Duration::from_secs(60));
        let bad = crate::config::Config {
            webhook_retry_schedule: "5x".into(),
            ..Default::default()
        };
        assert!(Settings::from_config(&bad).unwrap_err().contains("5x"));
        assert_eq!(
            Settings::from_config(&Default::default())
                .unwrap()
                .schedule
                .len(),
            8
        );
    }
}
