//! Spend counters shared by several gateway replicas in Redis (`--spend-store redis://…`).
//!
//! Keys carry the workspace as a hash tag, so every key a script touches is in one slot (Redis
//! Cluster works too):
//! - a counter is a hash `portcullis:{<ws>}:spend:<quota>:<d|m><window index>:<caller>` with
//!   `spent` and `reserved`, beside a sorted set `…:holds` of the holds on it (member
//!   `<amount>:<reservation>`, scored by when the hold lapses);
//! - a reservation is a hash `portcullis:{<ws>}:res:<request id>:<n>` of counter → amount;
//! - `portcullis:{<ws>}:ready` marks the counters seeded.
//!
//! Two Lua scripts make reserve (take back lapsed holds, check every quota, then hold on all)
//! and settle (move the hold to spent, once: a settle of a reservation already settled does
//! nothing) atomic. A hold lapses after an hour, so the holds of a replica that died mid-call
//! stop counting against the quota; the reservation record lives a day, so a call that runs
//! longer than an hour is still settled, once.
//!
//! Seeding fills only counters Redis lacks (`HSETNX`), then sets the ready marker; reserve
//! refuses while the marker is missing, so a Redis that lost its data (restarted without
//! persistence, flushed) is re-seeded from the control plane's record before any call is let
//! through, instead of counting from zero. When Redis cannot be reached, calls a quota applies
//! to are refused: quotas fail closed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use portcullis_shared::api::quotas::QuotaWindow;
use portcullis_shared::snapshot::Charge;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::{counters_of, Applied, CounterKey, Crossing, Refusal};

/// Counters outlive their window by this long (for reports), then expire.
const COUNTER_TTL_SECS: u64 = 40 * 86_400;
/// A hold stops counting against its quotas this long after it was taken, settled or not.
const HOLD_TTL_MS: u64 = 3_600_000;
/// A reservation can be settled (once) for this long.
const RESERVATION_TTL_SECS: u64 = 86_400;

/// KEYS: the ready marker, the reservation, then per quota its enforced counter and holds and
/// its other counter and holds. ARGV: the amount, now (ms), when the hold lapses (ms), the
/// hold's member, the counter TTL, the reservation TTL, then each quota's limit.
/// Returns {-1, 0} when the store is not seeded, {i, spent} when quota i has no room, else
/// {0, 0}.
const RESERVE: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {-1, 0}
end
local worst = tonumber(ARGV[1])
local n = (#KEYS - 2) / 4
-- Take back holds that lapsed (their replica died, or the call outlived them).
for k = 3, #KEYS, 2 do
  local lapsed = redis.call('ZRANGEBYSCORE', KEYS[k + 1], '-inf', ARGV[2])
  if #lapsed > 0 then
    local sum = 0
    for _, m in ipairs(lapsed) do
      sum = sum + tonumber(string.match(m, '^(%d+):'))
    end
    redis.call('HINCRBY', KEYS[k], 'reserved', string.format('%d', -sum))
    redis.call('ZREMRANGEBYSCORE', KEYS[k + 1], '-inf', ARGV[2])
  end
end
for i = 1, n do
  local key = KEYS[4 * i - 1]
  local spent = tonumber(redis.call('HGET', key, 'spent') or '0')
  local reserved = tonumber(redis.call('HGET', key, 'reserved') or '0')
  if spent + reserved + worst > tonumber(ARGV[6 + i]) then
    return {i, spent}
  end
end
for k = 3, #KEYS, 2 do
  redis.call('HINCRBY', KEYS[k], 'reserved', ARGV[1])
  redis.call('ZADD', KEYS[k + 1], ARGV[3], ARGV[4])
  redis.call('EXPIRE', KEYS[k], ARGV[5])
  redis.call('EXPIRE', KEYS[k + 1], ARGV[5])
  redis.call('HSET', KEYS[2], KEYS[k], ARGV[1])
end
redis.call('EXPIRE', KEYS[2], ARGV[6])
return {0, 0}
"#;

/// KEYS: the reservation, then each counter and its holds. ARGV: the metered cost, `settle`
/// or `release`, the hold's member. Returns each counter's spend after, or nil when the
/// reservation is gone (settled already, or lost with the store's data).
const SETTLE: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 0 then
  return false
end
local out = {}
for k = 2, #KEYS, 2 do
  -- A hold that lapsed was taken back by a reserve already.
  if redis.call('ZREM', KEYS[k + 1], ARGV[3]) == 1 then
    local held = tonumber(redis.call('HGET', KEYS[1], KEYS[k]) or '0')
    redis.call('HINCRBY', KEYS[k], 'reserved', string.format('%d', -held))
  end
  local spent
  if ARGV[2] == 'settle' then
    spent = redis.call('HINCRBY', KEYS[k], 'spent', ARGV[1])
  else
    spent = tonumber(redis.call('HGET', KEYS[k], 'spent') or '0')
  end
  out[#out + 1] = spent
end
redis.call('DEL', KEYS[1])
return out
"#;

/// A call waits this long for the store before it is refused (quotas fail closed).
const STORE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

thread_local! {
    /// Each worker thread's connection to the spend store, so a script's round trip stays on
    /// the thread that serves the request (the store it belongs to, by address).
    static CONN: std::cell::RefCell<Option<(usize, ConnectionManager)>> =
        const { std::cell::RefCell::new(None) };
}

fn config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_number_of_retries(1)
        .set_connection_timeout(STORE_TIMEOUT)
        .set_response_timeout(STORE_TIMEOUT)
}

pub struct RedisSpend {
    client: redis::Client,
    /// For seeding and background work.
    conn: ConnectionManager,
    reserve: redis::Script,
    settle: redis::Script,
    /// Set once this replica has seeded; cleared when the store says it lost its data.
    seeded: AtomicBool,
    /// Wakes the seeding task when the store needs seeding again.
    pub reseed: tokio::sync::Notify,
    /// Tells apart the reservations of one request (one per pool member tried).
    attempts: AtomicU64,
    /// How long a hold counts ([`HOLD_TTL_MS`]; shorter in tests).
    hold_ttl_ms: u64,
}

fn counter_key(ws: &str, k: &CounterKey) -> String {
    let w = match k.window {
        QuotaWindow::Daily => 'd',
        QuotaWindow::Monthly => 'm',
    };
    format!(
        "portcullis:{{{ws}}}:spend:{}:{w}{}:{}",
        k.quota_id, k.index, k.caller
    )
}

fn ready_key(ws: &str) -> String {
    format!("portcullis:{{{ws}}}:ready")
}

/// Each counter of the applied quotas (the enforced one of each quota first), with its holds.
fn counter_keys<'a>(ws: &'a str, applied: &'a [Applied]) -> impl Iterator<Item = String> + 'a {
    applied.iter().flat_map(Applied::keys).flat_map(move |k| {
        let counter = counter_key(ws, &k);
        let holds = format!("{counter}:holds");
        [counter, holds]
    })
}

/// A hold in Redis; settle it, or dropping it releases it (in the background).
pub struct RedisHeld {
    store: Arc<RedisSpend>,
    workspace_id: String,
    res_key: String,
    /// The hold's member in each counter's holds: `<amount>:<reservation>`.
    member: String,
    applied: Vec<Applied>,
    worst: u64,
    done: bool,
    background: tokio::runtime::Handle,
}

impl RedisSpend {
    /// Connects (the connection reconnects by itself later).
    pub async fn connect(url: &str) -> Result<Self, String> {
        let client = redis::Client::open(url).map_err(|e| format!("spend store {url}: {e}"))?;
        let mut conn = ConnectionManager::new_with_config(client.clone(), config())
            .await
            .map_err(|e| format!("spend store unreachable: {e}"))?;
        warn_if_evicting(&mut conn).await;
        Ok(Self {
            client,
            conn,
            reserve: redis::Script::new(RESERVE),
            settle: redis::Script::new(SETTLE),
            seeded: AtomicBool::new(false),
            reseed: tokio::sync::Notify::new(),
            attempts: AtomicU64::new(0),
            hold_ttl_ms: HOLD_TTL_MS,
        })
    }

    pub fn seeded(&self) -> bool {
        self.seeded.load(Ordering::Acquire)
    }

    /// This thread's connection (made on first use; it reconnects by itself).
    async fn local_conn(&self) -> redis::RedisResult<ConnectionManager> {
        let id = self as *const Self as usize;
        let cached = CONN.with(|c| {
            c.borrow()
                .as_ref()
                .filter(|(owner, _)| *owner == id)
                .map(|(_, conn)| conn.clone())
        });
        if let Some(conn) = cached {
            return Ok(conn);
        }
        let conn = ConnectionManager::new_with_config(self.client.clone(), config()).await?;
        CONN.with(|c| *c.borrow_mut() = Some((id, conn.clone())));
        Ok(conn)
    }

    /// Fills counters that Redis does not hold yet (a fresh or emptied store) from the control
    /// plane's record, then marks the workspace's counters ready. Counters it holds are left
    /// alone, so seeding never counts a charge twice.
    pub async fn seed(&self, workspace_id: &str, charges: Vec<Charge>) -> Result<(), String> {
        let mut pipe = redis::pipe();
        for (key, micros) in counters_of(charges) {
            let k = counter_key(workspace_id, &key);
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
    ) -> Result<RedisHeld, Refusal> {
        if !self.seeded() {
            return Err(Refusal::NotSeeded);
        }
        // A request that fails over reserves again while its first hold is being released in
        // the background: each hold has its own key.
        let attempt = self.attempts.fetch_add(1, Ordering::Relaxed);
        let res_key = format!("portcullis:{{{workspace_id}}}:res:{request_id}:{attempt}");
        let member = format!("{worst}:{res_key}");
        let now = portcullis_shared::unix_millis();
        let mut invocation = self.reserve.prepare_invoke();
        invocation.key(ready_key(workspace_id)).key(&res_key);
        for key in counter_keys(workspace_id, &applied) {
            invocation.key(key);
        }
        invocation
            .arg(worst)
            .arg(now)
            .arg(now + self.hold_ttl_ms)
            .arg(&member)
            .arg(COUNTER_TTL_SECS)
            .arg(RESERVATION_TTL_SECS);
        for a in &applied {
            invocation.arg(a.quota.limit_micros);
        }
        let down = |e: redis::RedisError| {
            Refusal::StoreDown(format!("the shared spend store failed: {e}"))
        };
        let mut conn = self.local_conn().await.map_err(down)?;
        let (failed, spent): (i64, u64) = invocation.invoke_async(&mut conn).await.map_err(down)?;
        match usize::try_from(failed) {
            Err(_) => {
                tracing::warn!("The shared spend store has no counters for this workspace (restarted or emptied); seeding it again from the control plane's record.");
                self.seeded.store(false, Ordering::Release);
                self.reseed.notify_one();
                Err(Refusal::NotSeeded)
            }
            Ok(0) => Ok(RedisHeld {
                store: self.clone(),
                workspace_id: workspace_id.to_string(),
                res_key,
                member,
                applied,
                worst,
                done: false,
                background,
            }),
            Ok(i) => Err(applied[i - 1].refusal(spent)),
        }
    }
}

/// Counters expire (after their window), so a Redis that evicts keys with a TTL under memory
/// pressure could drop a live counter and count it again from zero. Says so when it can tell.
async fn warn_if_evicting(conn: &mut ConnectionManager) {
    let policy: Result<Vec<String>, _> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory*")
        .query_async(conn)
        .await;
    let Ok(pairs) = policy else {
        return; // CONFIG is often disabled on managed Redis: nothing to tell.
    };
    let get = |name: &str| {
        pairs
            .chunks(2)
            .find(|p| p[0] == name)
            .and_then(|p| p.get(1))
            .cloned()
            .unwrap_or_default()
    };
    let (limit, policy) = (get("maxmemory"), get("maxmemory-policy"));
    if limit != "0" && !limit.is_empty() && policy != "noeviction" {
        tracing::warn!(maxmemory = %limit, maxmemory_policy = %policy, "The spend store may evict keys under memory pressure; an evicted counter would be counted again from zero. Use maxmemory-policy noeviction (or no maxmemory) for the spend store.");
    }
}

impl RedisHeld {
    pub fn held_micros(&self) -> u64 {
        self.worst
    }

    async fn finish(&self, actual: u64, mode: &str) -> Result<Option<Vec<u64>>, redis::RedisError> {
        let mut invocation = self.store.settle.prepare_invoke();
        invocation.key(&self.res_key);
        for key in counter_keys(&self.workspace_id, &self.applied) {
            invocation.key(key);
        }
        invocation.arg(actual).arg(mode).arg(&self.member);
        let mut conn = self.store.local_conn().await?;
        invocation.invoke_async(&mut conn).await
    }

    /// Moves the hold to spent at the metered cost (once); returns the charges and the
    /// thresholds crossed.
    pub async fn settle(mut self, actual: u64) -> (Vec<Charge>, Vec<Crossing>) {
        self.done = true;
        let after = match self.finish(actual, "settle").await {
            Ok(after) => after.unwrap_or_default(),
            Err(e) => {
                tracing::error!(error = %e, "Could not settle a call in the shared spend store; its hold lapses within the hour, and the charge reaches the record with the call's event.");
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

impl RedisHeld {
    /// Moves the hold out (to finish it in the background); this one is left done.
    fn take(&mut self) -> RedisHeld {
        self.done = true;
        RedisHeld {
            store: self.store.clone(),
            workspace_id: std::mem::take(&mut self.workspace_id),
            res_key: std::mem::take(&mut self.res_key),
            member: std::mem::take(&mut self.member),
            applied: std::mem::take(&mut self.applied),
            worst: self.worst,
            done: false,
            background: self.background.clone(),
        }
    }

    /// Charges the whole hold in the background; returns the charges at once.
    pub fn charge_worst_now(mut self) -> Vec<Charge> {
        let worst = self.worst;
        let charges = self.applied.iter().map(|a| a.charge(worst)).collect();
        let held = self.take();
        self.background.spawn(async move {
            held.settle(worst).await;
        });
        charges
    }
}

impl Drop for RedisHeld {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut held = self.take();
        held.done = true;
        self.background.spawn(async move {
            if let Err(e) = held.finish(0, "release").await {
                tracing::warn!(error = %e, "Could not release a reservation in the shared spend store; its hold lapses within the hour.");
            }
        });
    }
}

#[cfg(test)]
mod tests;
