//! Spend counters shared by several gateway replicas in Redis (`--spend-store redis://…`).
//! Each counter is a hash `portcullis:spend:<quota>:<window index>:<caller>` with `spent` and
//! `reserved`; a reservation is a hash `portcullis:res:<request id>` of counter → amount. Two
//! Lua scripts make reserve (check every quota, then hold on all) and settle (move the hold to
//! spent, once: a settle of a reservation already settled does nothing) atomic. When Redis
//! cannot be reached, calls a quota applies to are refused: quotas fail closed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use portcullis_shared::snapshot::{window_end, Charge, SpendKey};
use redis::aio::ConnectionManager;

use super::{Crossing, QuotaEntry, Refusal, THRESHOLDS};

/// Counters outlive their window by this long (for reports), then expire.
const COUNTER_TTL_SECS: u64 = 40 * 86_400;
/// A reservation a crashed replica never settled stops mattering after this.
const RESERVATION_TTL_SECS: u64 = 3_600;

const RESERVE: &str = r#"
local worst = tonumber(ARGV[1])
local n = #KEYS - 1
for i = 1, n do
  local spent = tonumber(redis.call('HGET', KEYS[i], 'spent') or '0')
  local reserved = tonumber(redis.call('HGET', KEYS[i], 'reserved') or '0')
  if spent + reserved + worst > tonumber(ARGV[i + 1]) then
    return {i, spent}
  end
end
local res = KEYS[n + 1]
for i = 1, n do
  redis.call('HINCRBY', KEYS[i], 'reserved', worst)
  redis.call('EXPIRE', KEYS[i], tonumber(ARGV[n + 2]))
  redis.call('HSET', res, KEYS[i], worst)
end
redis.call('EXPIRE', res, tonumber(ARGV[n + 3]))
return {0, 0}
"#;

/// KEYS: the reservation, then its counters. ARGV: the metered cost, `settle` or `release`.
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
    seeded: AtomicBool,
}

fn counter_key(k: &SpendKey) -> String {
    format!(
        "portcullis:spend:{}:{}:{}",
        k.quota_id, k.window_index, k.caller
    )
}

/// A hold in Redis; settle it, or dropping it releases it (in the background).
pub struct SharedHeld {
    store: Arc<SharedSpend>,
    res_key: String,
    keys: Vec<SpendKey>,
    quotas: Vec<Arc<QuotaEntry>>,
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
        })
    }

    pub fn seeded(&self) -> bool {
        self.seeded.load(Ordering::Acquire)
    }

    /// Fills counters that Redis does not hold yet (a fresh or flushed store) from the
    /// control plane's record; counters it holds are left alone, so seeding never counts a
    /// charge twice.
    pub async fn seed(&self, charges: Vec<Charge>) -> Result<(), String> {
        let mut sums: std::collections::HashMap<SpendKey, u64> = Default::default();
        for c in charges {
            *sums.entry(c.key).or_default() += c.micros;
        }
        let mut conn = self.conn.clone();
        for (key, micros) in sums {
            let _: bool = redis::cmd("HSETNX")
                .arg(counter_key(&key))
                .arg("spent")
                .arg(micros)
                .query_async(&mut conn)
                .await
                .map_err(|e| format!("seeding the spend store: {e}"))?;
        }
        self.seeded.store(true, Ordering::Release);
        Ok(())
    }

    /// Reserves `worst` on every counter, all or none.
    pub async fn reserve(
        self: &Arc<Self>,
        applicable: Vec<(Arc<QuotaEntry>, SpendKey)>,
        worst: u64,
        request_id: &str,
        background: tokio::runtime::Handle,
    ) -> Result<SharedHeld, Refusal> {
        if !self.seeded() {
            return Err(Refusal::NotSeeded);
        }
        let res_key = format!("portcullis:res:{request_id}");
        let mut invocation = self.reserve.prepare_invoke();
        for (_, key) in &applicable {
            invocation.key(counter_key(key));
        }
        invocation.key(&res_key);
        invocation.arg(worst);
        for (q, _) in &applicable {
            invocation.arg(q.limit_micros);
        }
        invocation.arg(COUNTER_TTL_SECS).arg(RESERVATION_TTL_SECS);
        let mut conn = self.conn.clone();
        let (failed, spent): (usize, u64) = invocation
            .invoke_async(&mut conn)
            .await
            .map_err(|e| Refusal::StoreDown(format!("the shared spend store failed: {e}")))?;
        if failed > 0 {
            let (q, key) = &applicable[failed - 1];
            return Err(Refusal::Exceeded {
                quota: Box::new(QuotaEntry::clone(q)),
                spent,
                resets_at: window_end(q.window, key.window_index),
                model_only: q.subject == portcullis_shared::api::quotas::QuotaSubject::Model,
            });
        }
        let (quotas, keys) = applicable.into_iter().unzip();
        Ok(SharedHeld {
            store: self.clone(),
            res_key,
            keys,
            quotas,
            worst,
            done: false,
            background,
        })
    }
}

impl SharedHeld {
    pub fn held_micros(&self) -> u64 {
        self.worst
    }

    async fn finish(
        store: &SharedSpend,
        res_key: &str,
        keys: &[SpendKey],
        actual: u64,
        mode: &str,
    ) -> Result<Option<Vec<u64>>, redis::RedisError> {
        let mut invocation = store.settle.prepare_invoke();
        invocation.key(res_key);
        for k in keys {
            invocation.key(counter_key(k));
        }
        invocation.arg(actual).arg(mode);
        let mut conn = store.conn.clone();
        invocation.invoke_async(&mut conn).await
    }

    /// Moves the hold to spent at the metered cost (once); returns the charges and the
    /// thresholds crossed.
    pub async fn settle(mut self, actual: u64) -> (Vec<Charge>, Vec<Crossing>) {
        self.done = true;
        let after = match Self::finish(&self.store, &self.res_key, &self.keys, actual, "settle")
            .await
        {
            Ok(after) => after.unwrap_or_default(),
            Err(e) => {
                tracing::error!(error = %e, "Could not settle a call in the shared spend store; its reservation stays held until it expires.");
                Vec::new()
            }
        };
        let mut crossings = Vec::new();
        for ((key, quota), spent) in self.keys.iter().zip(&self.quotas).zip(&after) {
            let before = spent.saturating_sub(actual);
            let limit = u128::from(quota.limit_micros);
            for percent in THRESHOLDS {
                let line = limit * u128::from(percent);
                if u128::from(before) * 100 < line && u128::from(*spent) * 100 >= line {
                    crossings.push(Crossing {
                        quota: quota.clone(),
                        percent,
                        spent: *spent,
                        key: key.clone(),
                    });
                }
            }
        }
        let charges = self
            .keys
            .iter()
            .map(|k| Charge {
                key: k.clone(),
                micros: actual,
            })
            .collect();
        (charges, crossings)
    }
}

impl Drop for SharedHeld {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let (store, res_key, keys) = (
            self.store.clone(),
            self.res_key.clone(),
            std::mem::take(&mut self.keys),
        );
        self.background.spawn(async move {
            if let Err(e) = SharedHeld::finish(&store, &res_key, &keys, 0, "release").await {
                tracing::warn!(error = %e, "Could not release a reservation in the shared spend store; it expires by itself.");
            }
        });
    }
}
