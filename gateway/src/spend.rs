//! Spend enforcement for one gateway replica: in-memory counters per quota, window and (for
//! per-caller quotas) caller. Before a call the worst case is reserved against every quota that
//! applies, atomically for all of them; after it the reservation is settled to the metered cost
//! (or released when the call failed). Counters are seeded from the control plane's record
//! (`SyncService/GetSpend`) plus what this gateway's spool has not shipped yet; until then a
//! call that a quota applies to is refused rather than let through unmetered.
//!
//! Every quota is counted in both a daily and a monthly counter; the one of its window is
//! enforced. So when an admin changes a quota's window, what was spent in the new window is
//! already counted.

pub mod redis;
pub mod seed;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use portcullis_shared::api::quotas::{QuotaSubject, QuotaWindow};
use portcullis_shared::snapshot::{day_index, window_end, window_of_day, Charge};

/// A quota as compiled from the snapshot (enabled ones only).
#[derive(Debug, Clone)]
pub struct QuotaEntry {
    pub id: String,
    pub name: String,
    pub subject: QuotaSubject,
    pub subject_id: String,
    pub subject_key: String,
    pub pool_id: String,
    pub per_caller: bool,
    pub window: QuotaWindow,
    pub limit_micros: u64,
}

/// The snapshot's enabled quotas (disabled ones are stored, not enforced).
pub fn compile(snap: &portcullis_shared::snapshot::Snapshot) -> Vec<Arc<QuotaEntry>> {
    let entry = |q: &portcullis_shared::snapshot::SnapQuota| QuotaEntry {
        id: q.quota_id.clone(),
        name: q.name.clone(),
        subject: q.subject_type,
        subject_id: q.subject_id.clone(),
        subject_key: q.subject_key.clone(),
        pool_id: q.pool_id.clone(),
        per_caller: q.per_caller,
        window: q.window,
        limit_micros: q.limit_micros,
    };
    snap.quotas
        .iter()
        .filter(|q| q.enabled)
        .map(|q| Arc::new(entry(q)))
        .collect()
}

impl QuotaEntry {
    pub fn describe(&self) -> String {
        let who = match self.subject {
            QuotaSubject::Workspace => "the workspace".to_string(),
            QuotaSubject::ActAs => format!("end user {}", self.subject_key),
            other => format!("{} {}", other.as_str(), self.subject_id),
        };
        let name = if self.name.is_empty() {
            String::new()
        } else {
            format!(" '{}'", self.name)
        };
        format!(
            "{} quota{name} of {} for {who}",
            self.window.as_str(),
            usd(self.limit_micros)
        )
    }
}

pub fn usd(micros: u64) -> String {
    format!("${:.6}", micros as f64 / 1e6)
        .trim_end_matches('0')
        .trim_end_matches('.')
        .to_string()
}

/// Who is calling and through what, to pick the quotas that apply.
pub struct CallScope<'a> {
    pub agent_id: &'a str,
    pub gateway_id: &'a str,
    /// The verified act-as `sub`, when there is one.
    pub user: Option<&'a str>,
    pub pool_id: Option<&'a str>,
    pub model_id: &'a str,
}

impl CallScope<'_> {
    fn applies(&self, q: &QuotaEntry) -> bool {
        match q.subject {
            QuotaSubject::Workspace => true,
            QuotaSubject::Agent => q.subject_id == self.agent_id,
            QuotaSubject::ActAs => self.user == Some(q.subject_key.as_str()),
            QuotaSubject::Pool => self.pool_id == Some(q.subject_id.as_str()),
            QuotaSubject::Gateway => q.subject_id == self.gateway_id,
            QuotaSubject::Model => {
                q.subject_id == self.model_id
                    && (q.pool_id.is_empty() || self.pool_id == Some(q.pool_id.as_str()))
            }
        }
    }

    fn caller(&self, q: &QuotaEntry) -> String {
        match (q.per_caller, self.user) {
            (false, _) => String::new(),
            (true, Some(sub)) => format!("user:{sub}"),
            (true, None) => format!("agent:{}", self.agent_id),
        }
    }
}

/// One counter: a quota's spend in one daily or monthly window, for one caller.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CounterKey {
    pub quota_id: String,
    pub window: QuotaWindow,
    /// Days since 1970 (daily) or months since January 1970 (monthly).
    pub index: i64,
    pub caller: String,
}

/// A quota that applies to a call, on the UTC day of the call.
#[derive(Debug, Clone)]
pub struct Applied {
    pub quota: Arc<QuotaEntry>,
    pub day: i64,
    pub caller: String,
}

impl Applied {
    fn key(&self, window: QuotaWindow) -> CounterKey {
        CounterKey {
            quota_id: self.quota.id.clone(),
            window,
            index: window_of_day(window, self.day),
            caller: self.caller.clone(),
        }
    }

    /// The counter that is enforced (the quota's window), then the other one.
    pub fn keys(&self) -> [CounterKey; 2] {
        let other = match self.quota.window {
            QuotaWindow::Daily => QuotaWindow::Monthly,
            QuotaWindow::Monthly => QuotaWindow::Daily,
        };
        [self.key(self.quota.window), self.key(other)]
    }

    pub fn resets_at(&self) -> String {
        let w = self.quota.window;
        window_end(w, window_of_day(w, self.day))
    }

    pub fn charge(&self, micros: u64) -> Charge {
        Charge {
            quota_id: self.quota.id.clone(),
            day: self.day,
            caller: self.caller.clone(),
            micros,
        }
    }

    /// The refusal of a call whose worst case does not fit in this quota.
    fn refusal(&self, spent: u64) -> Refusal {
        Refusal::Exceeded {
            quota: self.quota.clone(),
            spent,
            resets_at: self.resets_at(),
            model_only: self.quota.subject == QuotaSubject::Model,
        }
    }

    /// The thresholds a settled call of `actual` took this quota past, its spend now `spent`.
    fn crossings(&self, spent: u64, actual: u64) -> Vec<Crossing> {
        let before = u128::from(spent.saturating_sub(actual));
        let limit = u128::from(self.quota.limit_micros);
        THRESHOLDS
            .into_iter()
            .filter(|p| {
                let line = limit * u128::from(*p);
                before * 100 < line && u128::from(spent) * 100 >= line
            })
            .map(|percent| Crossing {
                applied: self.clone(),
                percent,
                spent,
            })
            .collect()
    }
}

/// The quotas that apply to a call; non-model quotas first, so a refusal by one of them is
/// reported (no other pool member would help).
pub fn applicable(
    quotas: &[Arc<QuotaEntry>],
    scope: &CallScope<'_>,
    now_secs: i64,
) -> Vec<Applied> {
    let day = day_index(now_secs);
    let mut out: Vec<Applied> = quotas
        .iter()
        .filter(|q| scope.applies(q))
        .map(|q| Applied {
            quota: q.clone(),
            day,
            caller: scope.caller(q),
        })
        .collect();
    out.sort_by_key(|a| a.quota.subject == QuotaSubject::Model);
    out
}

/// Why a reservation was refused.
#[derive(Debug, Clone)]
pub enum Refusal {
    Exceeded {
        quota: Arc<QuotaEntry>,
        spent: u64,
        resets_at: String,
        /// A model quota: another pool member may still have room.
        model_only: bool,
    },
    /// Quotas apply but the counters are not loaded yet.
    NotSeeded,
    /// The shared spend store failed: quotas fail closed.
    StoreDown(String),
}

/// A quota whose spend crossed a threshold (80 % or 100 % of its limit) with a settled call.
#[derive(Debug, Clone)]
pub struct Crossing {
    pub applied: Applied,
    pub percent: u64,
    pub spent: u64,
}

/// The thresholds that are reported, in percent of the limit.
pub const THRESHOLDS: [u64; 2] = [80, 100];

/// A hold on the counters of one call, in memory or in the shared store.
pub enum Held<'a> {
    Memory(Reservation<'a>),
    Redis(redis::RedisHeld),
}

impl Held<'_> {
    pub fn held_micros(&self) -> u64 {
        match self {
            Held::Memory(r) => r.worst,
            Held::Redis(h) => h.held_micros(),
        }
    }

    /// Charges the hold's whole amount without waiting (for a request being dropped midway):
    /// in memory at once, in the shared store in the background. Returns the charges.
    pub fn charge_worst_now(self) -> Vec<Charge> {
        match self {
            Held::Memory(r) => {
                let worst = r.worst;
                r.settle(worst).0
            }
            Held::Redis(h) => h.charge_worst_now(),
        }
    }

    /// Replaces the hold with the metered cost; returns the charges (for the call's event) and
    /// the thresholds the call crossed.
    pub async fn settle(self, actual: u64) -> (Vec<Charge>, Vec<Crossing>) {
        match self {
            Held::Memory(r) => r.settle(actual),
            Held::Redis(h) => h.settle(actual).await,
        }
    }
}

#[derive(Default)]
struct Counter {
    spent: u64,
    reserved: u64,
}

#[derive(Default)]
pub struct Spend {
    counters: Mutex<HashMap<CounterKey, Counter>>,
    seeded: AtomicBool,
}

/// Amounts held against some counters; settle it, or dropping it releases them.
pub struct Reservation<'a> {
    spend: &'a Spend,
    applied: Vec<Applied>,
    worst: u64,
}

impl Spend {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<CounterKey, Counter>> {
        self.counters.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds recorded spend (seeding) to the daily and monthly counters of each charge's day;
    /// marks the counters ready.
    pub fn seed(&self, charges: impl IntoIterator<Item = Charge>) {
        let mut counters = self.lock();
        for (key, micros) in counters_of(charges) {
            let c = counters.entry(key).or_default();
            c.spent = c.spent.saturating_add(micros);
        }
        self.seeded.store(true, Ordering::Release);
    }

    pub fn seeded(&self) -> bool {
        self.seeded.load(Ordering::Acquire)
    }

    /// Forgets counters of windows that have ended and hold nothing.
    pub fn prune(&self, now_secs: i64) {
        let day = day_index(now_secs);
        self.lock()
            .retain(|k, c| c.reserved > 0 || k.index >= window_of_day(k.window, day));
    }

    /// Reserves `worst` micro-USD against every quota in `applied`, all or none.
    pub fn reserve(&self, applied: Vec<Applied>, worst: u64) -> Result<Reservation<'_>, Refusal> {
        if !applied.is_empty() && !self.seeded() {
            return Err(Refusal::NotSeeded);
        }
        let keys: Vec<[CounterKey; 2]> = applied.iter().map(Applied::keys).collect();
        let mut counters = self.lock();
        // Check every quota first, then hold the amount on all of them.
        for (a, [enforced, _]) in applied.iter().zip(&keys) {
            let c = counters.get(enforced);
            let used = c.map_or(0, |c| c.spent.saturating_add(c.reserved));
            if used.saturating_add(worst) > a.quota.limit_micros {
                return Err(a.refusal(c.map_or(0, |c| c.spent)));
            }
        }
        for key in keys.into_iter().flatten() {
            let c = counters.entry(key).or_default();
            c.reserved = c.reserved.saturating_add(worst);
        }
        Ok(Reservation {
            spend: self,
            applied,
            worst,
        })
    }
}

/// The daily and monthly counters recorded charges add up to.
pub fn counters_of(charges: impl IntoIterator<Item = Charge>) -> HashMap<CounterKey, u64> {
    let mut sums: HashMap<CounterKey, u64> = HashMap::new();
    for c in charges {
        for window in [QuotaWindow::Daily, QuotaWindow::Monthly] {
            let key = CounterKey {
                quota_id: c.quota_id.clone(),
                window,
                index: window_of_day(window, c.day),
                caller: c.caller.clone(),
            };
            let sum = sums.entry(key).or_default();
            *sum = sum.saturating_add(c.micros);
        }
    }
    sums
}

impl Reservation<'_> {
    fn settle(mut self, actual: u64) -> (Vec<Charge>, Vec<Crossing>) {
        let applied = std::mem::take(&mut self.applied);
        let mut counters = self.spend.lock();
        let mut charges = Vec::with_capacity(applied.len());
        let mut crossings = Vec::new();
        for a in applied {
            let [enforced, other] = a.keys();
            let mut add = |key| {
                let c: &mut Counter = counters.entry(key).or_default();
                c.reserved = c.reserved.saturating_sub(self.worst);
                c.spent = c.spent.saturating_add(actual);
                c.spent
            };
            let spent = add(enforced);
            add(other);
            crossings.extend(a.crossings(spent, actual));
            charges.push(a.charge(actual));
        }
        (charges, crossings)
    }
}

impl Drop for Reservation<'_> {
    /// An unsettled reservation (the call failed) is released.
    fn drop(&mut self) {
        if self.applied.is_empty() {
            return;
        }
        let mut counters = self.spend.lock();
        for key in self.applied.drain(..).flat_map(|a| a.keys()) {
            if let Some(c) = counters.get_mut(&key) {
                c.reserved = c.reserved.saturating_sub(self.worst);
            }
        }
    }
}

#[cfg(test)]
mod tests;
