//! Spend counters shared by several gateway replicas in Redis (`--spend-store redis://…`).
//! Each counter is a hash `portcullis:spend:<quota>:<d|m><window index>:<caller>` with `spent`
//! and `reserved`; a reservation is a hash `portcullis:res:<request id>:<n>` of counter → amount.
//! Two Lua scripts make reserve (check every quota, then hold on all) and settle (move the hold
//! to spent, once: a settle of a reservation already settled does nothing) atomic.
//!
//! Seeding fills only counters Redis lacks (`HSETNX`), then sets the workspace's ready marker;
//! reserve refuses while the marker is missing, so a Redis that lost its data (restarted
//! without persistence, flushed) is re-seeded from the control plane's record before any call
//! is let through, instead of counting from zero. When Redis cannot be reached, calls a quota
//! applies to are refused: quotas fail closed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use portcullis_shared::api::quotas::QuotaWindow;
use portcullis_shared::snapshot::Charge;
use redis::aio::ConnectionManager;

use super::{counters_of, Applied, CounterKey, Crossing, Refusal};

/// Counters outlive their window by this long (for reports), then expire.
const COUNTER_TTL_SECS: u64 = 40 * 86_400;
/// A reservation a crashed replica never settled stops mattering after this.
const RESERVATION_TTL_SECS: u64 = 3_600;

/// KEYS: the ready marker, the reservation, then per quota its enforced counter and its other
/// one. ARGV: the amount, the counter TTL, the reservation TTL, then each quota's limit.
/// Returns {-1, 0} when the store is not seeded, {i, spent} when quota i has no room, else {0, 0}.
const RESERVE: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {-1, 0}
end
local worst = tonumber(ARGV[1])
local n = (#KEYS - 2) / 2
for i = 1, n do
  local key = KEYS[1 + 2 * i]
  local spent = tonumber(redis.call('HGET', key, 'spent') or '0')
  local reserved = tonumber(redis.call('HGET', key, 'reserved') or '0')
  if spent + reserved + worst > tonumber(ARGV[3 + i]) then
    return {i, spent}
  end
end
local res = KEYS[2]
for k = 3, #KEYS do
  redis.call('HINCRBY', KEYS[k], 'reserved', worst)
  redis.call('EXPIRE', KEYS[k], tonumber(ARGV[2]))
  redis.call('HSET', res, KEYS[k], worst)
end
redis.call('EXPIRE', res, tonumber(ARGV[3]))
return {0, 0}
"#;

/// KEYS: the reservation, then its counters. ARGV: the metered cost, `settle` or `release`.
/// Returns each counter's spend after, or nil when the reservation is gone (settled already,
/// expired, or lost with the store's data).
const SETTLE: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 0 then
  return false
end
local out = {}
for i = 2, #KEYS do
  local held = tonumber(redis.call('HGET', KEYS[1], KEYS[i]) or '0')
  redis.call('HINCRBY', KEYS[i], 'reserved', -held)
  local spent = tonumber(redis.call('HGET', KEYS[i], 'spent') or '0')
  if ARGV[2] == 'settle' then
    spent = redis.call('HINCRBY', KEYS[i], 'spent', tonumber(ARGV[1]))
  end
  out[#out + 1] = spent
end
redis.call('DEL', KEYS[1])
return out
"#;

pub struct SharedSpend {
    conn: ConnectionManager,
    reserve: redis::Script,
    settle: redis::Script,
    /// Set once this replica has seeded; cleared when the store says it lost its data.
    seeded: AtomicBool,
    /// Wakes the seeding task when the store needs seeding again.
    pub reseed: tokio::sync::Notify,
    /// Tells apart the reservations of one request (one per pool member tried).
    attempts: AtomicU64,
}

fn counter_key(k: &CounterKey) -> String {
    let w = match k.window {
        QuotaWindow::Daily => 'd',
        QuotaWindow::Monthly => 'm',
    };
    format!(
        "portcullis:spend:{}:{w}{}:{}",
        k.quota_id, k.index, k.caller
    )
}

fn ready_key(workspace_id: &str) -> String {
    format!("portcullis:spend:ready:{workspace_id}")
}

/// A hold in Redis; settle it, or dropping it releases it (in the background).
pub struct SharedHeld {
    store: Arc<SharedSpend>,
    res_key: String,
    applied: Vec<Applied>,
    worst: u64,
    done: bool,
    background: tokio::runtime::Handle,
}

impl SharedSpend {
    /// Connects (the connection reconnects by itself later).
    pub async fn connect(url: &str) -> Result<Self, String> {
        let client = redis::Client::open(url).map_err(|e| format!("spend store {url}: {e}"))?;
        let conn = ConnectionManager::new(client)
            .await
            .map_err(|e| format!("spend store unreachable: {e}"))?;
        Ok(Self {
            conn,
            reserve: redis::Script::new(RESERVE),
            settle: redis::Script::new(SETTLE),
            seeded: AtomicBool::new(false),
            reseed: tokio::sync::Notify::new(),
            attempts: AtomicU64::new(0),
        })
    }

    pub fn seeded(&self) -> bool {
        self.seeded.load(Ordering::Acquire)
    }

    /// Fills counters that Redis does not hold yet (a fresh or emptied store) from the control
    /// plane's record, then marks the workspace's counters ready. Counters it holds are left
    /// alone, so seeding never counts a charge twice.
    pub async fn seed(&self, workspace_id: &str, charges: Vec<Charge>) -> Result<(), String> {
        let mut pipe = redis::pipe();
        for (key, micros) in counters_of(charges) {
            let k = counter_key(&key);
            pipe.cmd("HSETNX").arg(&k).arg("spent").arg(micros).ignore();
            pipe.cmd("EXPIRE").arg(&k).arg(COUNTER_TTL_SECS).ignore();
        }
        pipe.cmd("SET").arg(ready_key(workspace_id)).arg(1).ignore();
        let mut conn = self.conn.clone();
        pipe.query_async::<()>(&mut conn)
            .await
            .map_err(|e| format!("seeding the spend store: {e}"))?;
        self.seeded.store(true, Ordering::Release);
        Ok(())
    }

    /// Reserves `worst` on every counter of every applicable quota, all or none.
    pub async fn reserve(
        self: &Arc<Self>,
        workspace_id: &str,
        applied: Vec<Applied>,
        worst: u64,
        request_id: &str,
        background: tokio::runtime::Handle,
    ) -> Result<SharedHeld, Refusal> {
        if !self.seeded() {
            return Err(Refusal::NotSeeded);
        }
        // A request that fails over reserves again while its first hold is being released in
        // the background: each hold has its own key.
        let attempt = self.attempts.fetch_add(1, Ordering::Relaxed);
        let res_key = format!("portcullis:res:{request_id}:{attempt}");
        let mut invocation = self.reserve.prepare_invoke();
        invocation.key(ready_key(workspace_id)).key(&res_key);
        for key in applied.iter().flat_map(Applied::keys) {
            invocation.key(counter_key(&key));
        }
        invocation
            .arg(worst)
            .arg(COUNTER_TTL_SECS)
            .arg(RESERVATION_TTL_SECS);
        for a in &applied {
            invocation.arg(a.quota.limit_micros);
        }
        let mut conn = self.conn.clone();
        let (failed, spent): (i64, u64) = invocation
            .invoke_async(&mut conn)
            .await
            .map_err(|e| Refusal::StoreDown(format!("the shared spend store failed: {e}")))?;
        match usize::try_from(failed) {
            Err(_) => {
                tracing::warn!("The shared spend store has no counters for this workspace (restarted or emptied); seeding it again from the control plane's record.");
                self.seeded.store(false, Ordering::Release);
                self.reseed.notify_one();
                Err(Refusal::NotSeeded)
            }
            Ok(0) => Ok(SharedHeld {
                store: self.clone(),
                res_key,
                applied,
                worst,
                done: false,
                background,
            }),
            Ok(i) => Err(applied[i - 1].refusal(spent)),
        }
    }
}

impl SharedHeld {
    pub fn held_micros(&self) -> u64 {
        self.worst
    }

    async fn finish(
        store: &SharedSpend,
        res_key: &str,
        applied: &[Applied],
        actual: u64,
        mode: &str,
    ) -> Result<Option<Vec<u64>>, redis::RedisError> {
        let mut invocation = store.settle.prepare_invoke();
        invocation.key(res_key);
        for key in applied.iter().flat_map(Applied::keys) {
            invocation.key(counter_key(&key));
        }
        invocation.arg(actual).arg(mode);
        let mut conn = store.conn.clone();
        invocation.invoke_async(&mut conn).await
    }

    /// Moves the hold to spent at the metered cost (once); returns the charges and the
    /// thresholds crossed.
    pub async fn settle(mut self, actual: u64) -> (Vec<Charge>, Vec<Crossing>) {
        self.done = true;
        let after = match Self::finish(&self.store, &self.res_key, &self.applied, actual, "settle")
            .await
        {
            Ok(after) => after.unwrap_or_default(),
            Err(e) => {
                tracing::error!(error = %e, "Could not settle a call in the shared spend store; its reservation stays held until it expires, and the charge reaches the record with the call's event.");
                Vec::new()
            }
        };
        // Two counters per quota, the enforced one first.
        let crossings = self
            .applied
            .iter()
            .zip(after.chunks(2))
            .flat_map(|(a, spent)| a.crossings(spent[0], actual))
            .collect();
        let charges = self.applied.iter().map(|a| a.charge(actual)).collect();
        (charges, crossings)
    }
}

impl Drop for SharedHeld {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let (store, res_key, applied) = (
            self.store.clone(),
            std::mem::take(&mut self.res_key),
            std::mem::take(&mut self.applied),
        );
        self.background.spawn(async move {
            if let Err(e) = SharedHeld::finish(&store, &res_key, &applied, 0, "release").await {
                tracing::warn!(error = %e, "Could not release a reservation in the shared spend store; it expires by itself.");
            }
        });
    }
}
