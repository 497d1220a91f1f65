//! Spend enforcement for one gateway replica: in-memory counters per quota, window and (for
//! per-caller quotas) caller. Before a call the worst case is reserved against every quota that
//! applies, atomically for all of them; after it the reservation is settled to the metered cost
//! (or released when the call failed). Counters are seeded from the control plane's record
//! (`SyncService/GetSpend`) plus what this gateway's spool has not shipped yet; until then a
//! call that a quota applies to is refused rather than let through unmetered.

pub mod seed;
pub mod shared;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use portcullis_shared::api::quotas::{QuotaSubject, QuotaWindow};
use portcullis_shared::snapshot::{window_end, window_index, Charge, SpendKey};

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

/// Why a reservation was refused.
#[derive(Debug, Clone)]
pub enum Refusal {
    Exceeded {
        quota: Box<QuotaEntry>,
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

/// The quotas that apply to a call, with the counter each is charged on; non-model quotas
/// first, so a refusal by one of them is reported (no other pool member would help).
pub fn applicable(
    quotas: &[Arc<QuotaEntry>],
    scope: &CallScope<'_>,
    now_secs: i64,
) -> Vec<(Arc<QuotaEntry>, SpendKey)> {
    let mut out: Vec<(Arc<QuotaEntry>, SpendKey)> = quotas
        .iter()
        .filter(|q| scope.applies(q))
        .map(|q| {
            let key = SpendKey {
                quota_id: q.id.clone(),
                window_index: window_index(q.window, now_secs),
                caller: scope.caller(q),
            };
            (q.clone(), key)
        })
        .collect();
    out.sort_by_key(|(q, _)| q.subject == QuotaSubject::Model);
    out
}

/// A hold on the counters of one call, in memory or in the shared store.
pub enum Held<'a> {
    Memory(Reservation<'a>),
    Shared(shared::SharedHeld),
}

impl Held<'_> {
    pub fn held_micros(&self) -> u64 {
        match self {
            Held::Memory(r) => r.held_micros(),
            Held::Shared(h) => h.held_micros(),
        }
    }

    pub async fn settle(self, actual: u64) -> (Vec<Charge>, Vec<Crossing>) {
        match self {
            Held::Memory(r) => r.settle(actual),
            Held::Shared(h) => h.settle(actual).await,
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
    counters: Mutex<HashMap<SpendKey, Counter>>,
    seeded: AtomicBool,
}

/// Amounts held against some counters; settle or drop (which releases them).
pub struct Reservation<'a> {
    spend: &'a Spend,
    held: Vec<(SpendKey, u64)>,
    /// The quotas held against, in the order of `held`.
    quotas: Vec<Arc<QuotaEntry>>,
}

/// A quota whose spend crossed a threshold (80 % or 100 % of its limit) with a settled call.
#[derive(Debug, Clone)]
pub struct Crossing {
    pub quota: Arc<QuotaEntry>,
    pub percent: u64,
    pub spent: u64,
    pub key: SpendKey,
}

/// The thresholds that are reported, in percent of the limit.
pub const THRESHOLDS: [u64; 2] = [80, 100];

impl Spend {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SpendKey, Counter>> {
        self.counters.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds recorded spend (seeding); marks the counters ready.
    pub fn seed(&self, charges: impl IntoIterator<Item = Charge>) {
        let mut counters = self.lock();
        for c in charges {
            counters.entry(c.key).or_default().spent += c.micros;
        }
        self.seeded.store(true, Ordering::Release);
    }

    pub fn seeded(&self) -> bool {
        self.seeded.load(Ordering::Acquire)
    }

    /// Reserves `worst` micro-USD against every quota in `quotas` that applies to `scope`,
    /// all or none. An empty result means no quota applies.
    pub fn reserve<'a>(
        &'a self,
        quotas: &[Arc<QuotaEntry>],
        scope: &CallScope<'_>,
        worst: u64,
        now_secs: i64,
    ) -> Result<Reservation<'a>, Refusal> {
        let applicable: Vec<(&Arc<QuotaEntry>, SpendKey)> = quotas
            .iter()
            .filter(|q| scope.applies(q))
            .map(|q| {
                let key = SpendKey {
                    quota_id: q.id.clone(),
                    window_index: window_index(q.window, now_secs),
                    caller: scope.caller(q),
                };
                (q, key)
            })
            .collect();
        if applicable.is_empty() {
            return Ok(Reservation {
                spend: self,
                held: Vec::new(),
                quotas: Vec::new(),
            });
        }
        if !self.seeded() {
            return Err(Refusal::NotSeeded);
        }
        let mut counters = self.lock();
        // Check every quota first (non-model quotas first, so their refusal is reported: no
        // other member would help), then hold the amount on all of them.
        let mut order: Vec<&(&Arc<QuotaEntry>, SpendKey)> = applicable.iter().collect();
        order.sort_by_key(|(q, _)| q.subject == QuotaSubject::Model);
        for (q, key) in order {
            let c = counters.get(key);
            let used = c.map_or(0, |c| c.spent + c.reserved);
            if used.saturating_add(worst) > q.limit_micros {
                return Err(Refusal::Exceeded {
                    quota: Box::new(QuotaEntry::clone(q)),
                    spent: c.map_or(0, |c| c.spent),
                    resets_at: window_end(q.window, key.window_index),
                    model_only: q.subject == QuotaSubject::Model,
                });
            }
        }
        let mut held = Vec::with_capacity(applicable.len());
        let mut entries = Vec::with_capacity(applicable.len());
        for (q, key) in applicable {
            counters.entry(key.clone()).or_default().reserved += worst;
            held.push((key, worst));
            entries.push(q.clone());
        }
        Ok(Reservation {
            spend: self,
            held,
            quotas: entries,
        })
    }
}

impl Reservation<'_> {
    /// Whether any quota applied.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// The amount held (the same on every quota).
    pub fn held_micros(&self) -> u64 {
        self.held.first().map_or(0, |(_, amount)| *amount)
    }

    /// Replaces the held amounts with the metered cost; returns the charges (for the event)
    /// and the thresholds this call crossed.
    pub fn settle(mut self, actual: u64) -> (Vec<Charge>, Vec<Crossing>) {
        let held = std::mem::take(&mut self.held);
        let quotas = std::mem::take(&mut self.quotas);
        let mut counters = self.spend.lock();
        let mut charges = Vec::with_capacity(held.len());
        let mut crossings = Vec::new();
        for ((key, amount), quota) in held.into_iter().zip(quotas) {
            let c = counters.entry(key.clone()).or_default();
            c.reserved = c.reserved.saturating_sub(amount);
            let before = c.spent;
            c.spent += actual;
            let limit = u128::from(quota.limit_micros);
            for percent in THRESHOLDS {
                let line = limit * u128::from(percent);
                if u128::from(before) * 100 < line && u128::from(c.spent) * 100 >= line {
                    crossings.push(Crossing {
                        quota: quota.clone(),
                        percent,
                        spent: c.spent,
                        key: key.clone(),
                    });
                }
            }
            charges.push(Charge {
                key,
                micros: actual,
            });
        }
        (charges, crossings)
    }
}

impl Drop for Reservation<'_> {
    /// An unsettled reservation (the call failed) is released.
    fn drop(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let mut counters = self.spend.lock();
        for (key, amount) in self.held.drain(..) {
            if let Some(c) = counters.get_mut(&key) {
                c.reserved = c.reserved.saturating_sub(amount);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota(subject: QuotaSubject, id: &str, limit: u64, window: QuotaWindow) -> Arc<QuotaEntry> {
        Arc::new(QuotaEntry {
            id: format!("q-{id}"),
            name: String::new(),
            subject,
            subject_id: id.into(),
            subject_key: String::new(),
            pool_id: String::new(),
            per_caller: false,
            window,
            limit_micros: limit,
        })
    }

    fn scope<'a>(agent: &'a str) -> CallScope<'a> {
        CallScope {
            agent_id: agent,
            gateway_id: "g",
            user: None,
            pool_id: None,
            model_id: "m",
        }
    }

    #[test]
    fn reservations_never_overshoot_and_release_on_failure() {
        let spend = Spend::default();
        spend.seed([]);
        let quotas = vec![quota(QuotaSubject::Agent, "a", 100, QuotaWindow::Monthly)];
        let r1 = spend.reserve(&quotas, &scope("a"), 60, 0).unwrap();
        assert!(
            spend.reserve(&quotas, &scope("a"), 60, 0).is_err(),
            "60 + 60 > 100"
        );
        assert!(
            spend
                .reserve(&quotas, &scope("b"), 60, 0)
                .unwrap()
                .is_empty(),
            "another agent"
        );
        let (charges, crossings) = r1.settle(30);
        assert_eq!(charges[0].micros, 30);
        assert!(crossings.is_empty());
        let r2 = spend.reserve(&quotas, &scope("a"), 60, 0).unwrap();
        drop(r2); // a failed call releases its hold
        let r3 = spend.reserve(&quotas, &scope("a"), 70, 0).unwrap();
        let (_, crossings) = r3.settle(70);
        let crossed: Vec<u64> = crossings.iter().map(|c| c.percent).collect();
        assert_eq!(
            crossed,
            [80, 100],
            "30 → 100 of 100 crosses both thresholds, once"
        );
        let refused = spend.reserve(&quotas, &scope("a"), 1, 0);
        match refused {
            Err(Refusal::Exceeded { spent, .. }) => assert_eq!(spent, 100),
            _ => panic!("the quota is used up"),
        }
    }

    #[test]
    fn a_daily_window_resets_at_utc_midnight() {
        let spend = Spend::default();
        spend.seed([]);
        let quotas = vec![quota(QuotaSubject::Workspace, "w", 10, QuotaWindow::Daily)];
        let t = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap().timestamp();
        spend
            .reserve(&quotas, &scope("a"), 10, t("2026-11-22T23:59:58Z"))
            .unwrap()
            .settle(10);
        match spend.reserve(&quotas, &scope("a"), 1, t("2026-11-22T23:59:59Z")) {
            Err(Refusal::Exceeded { resets_at, .. }) => {
                assert_eq!(resets_at, "2026-11-23T00:00:00Z")
            }
            _ => panic!("used up until midnight"),
        }
        assert!(spend
            .reserve(&quotas, &scope("a"), 10, t("2026-11-23T00:00:00Z"))
            .is_ok());
    }

    #[test]
    fn unseeded_counters_refuse_only_where_a_quota_applies() {
        let spend = Spend::default();
        let quotas = vec![quota(QuotaSubject::Agent, "a", 100, QuotaWindow::Monthly)];
        assert!(matches!(
            spend.reserve(&quotas, &scope("a"), 1, 0),
            Err(Refusal::NotSeeded)
        ));
        assert!(spend.reserve(&quotas, &scope("b"), 1, 0).is_ok());
        spend.seed([Charge {
            key: SpendKey {
                quota_id: "q-a".into(),
                window_index: 0,
                caller: String::new(),
            },
            micros: 99,
        }]);
        assert!(
            spend.reserve(&quotas, &scope("a"), 2, 0).is_err(),
            "seeded spend counts"
        );
        assert!(spend.reserve(&quotas, &scope("a"), 1, 0).is_ok());
    }

    #[test]
    fn per_caller_model_quotas_keep_separate_budgets() {
        let spend = Spend::default();
        spend.seed([]);
        let mut q = (*quota(QuotaSubject::Model, "m", 10, QuotaWindow::Monthly)).clone();
        q.per_caller = true;
        let quotas = vec![Arc::new(q)];
        spend
            .reserve(&quotas, &scope("a"), 10, 0)
            .unwrap()
            .settle(10);
        assert!(spend.reserve(&quotas, &scope("a"), 1, 0).is_err());
        assert!(
            spend.reserve(&quotas, &scope("b"), 10, 0).is_ok(),
            "b has its own budget"
        );
    }
}
