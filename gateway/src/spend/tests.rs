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

fn scope(agent: &str) -> CallScope<'_> {
    CallScope {
        agent_id: agent,
        gateway_id: "g",
        user: None,
        pool_id: None,
        model_id: "m",
    }
}

fn t(s: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(s).unwrap().timestamp()
}

/// Reserves for agent `agent` at time `now`.
fn reserve<'a>(
    spend: &'a Spend,
    quotas: &[Arc<QuotaEntry>],
    agent: &str,
    worst: u64,
    now: i64,
) -> Result<Reservation<'a>, Refusal> {
    spend.reserve(applicable(quotas, &scope(agent), now), worst)
}

#[test]
fn reservations_never_overshoot_and_release_on_failure() {
    let spend = Spend::default();
    spend.seed([]);
    let quotas = vec![quota(QuotaSubject::Agent, "a", 100, QuotaWindow::Monthly)];
    let r1 = reserve(&spend, &quotas, "a", 60, 0).unwrap();
    assert!(
        reserve(&spend, &quotas, "a", 60, 0).is_err(),
        "60 + 60 > 100"
    );
    assert!(
        reserve(&spend, &quotas, "b", 60, 0)
            .unwrap()
            .applied
            .is_empty(),
        "another agent"
    );
    let (charges, crossings) = r1.settle(30);
    assert_eq!(charges[0].micros, 30);
    assert!(crossings.is_empty());
    let r2 = reserve(&spend, &quotas, "a", 60, 0).unwrap();
    drop(r2); // a failed call releases its hold
    let r3 = reserve(&spend, &quotas, "a", 70, 0).unwrap();
    let (_, crossings) = r3.settle(70);
    let crossed: Vec<u64> = crossings.iter().map(|c| c.percent).collect();
    assert_eq!(
        crossed,
        [80, 100],
        "30 → 100 of 100 crosses both thresholds, once"
    );
    let refused = reserve(&spend, &quotas, "a", 1, 0);
    assert!(
        matches!(refused, Err(Refusal::Exceeded { spent: 100, .. })),
        "the quota is used up"
    );
}

#[test]
fn a_daily_window_resets_at_utc_midnight() {
    let spend = Spend::default();
    spend.seed([]);
    let quotas = vec![quota(QuotaSubject::Workspace, "w", 10, QuotaWindow::Daily)];
    reserve(&spend, &quotas, "a", 10, t("2026-11-22T23:59:58Z"))
        .unwrap()
        .settle(10);
    match reserve(&spend, &quotas, "a", 1, t("2026-11-22T23:59:59Z")) {
        Err(Refusal::Exceeded { resets_at, .. }) => {
            assert_eq!(resets_at, "2026-11-23T00:00:00Z")
        }
        _ => panic!("used up until midnight"),
    }
    assert!(reserve(&spend, &quotas, "a", 10, t("2026-11-23T00:00:00Z")).is_ok());
}

#[test]
fn a_monthly_window_resets_at_the_utc_month_start() {
    let spend = Spend::default();
    spend.seed([]);
    let quotas = vec![quota(QuotaSubject::Agent, "a", 10, QuotaWindow::Monthly)];
    reserve(&spend, &quotas, "a", 10, t("2026-11-01T00:00:00Z"))
        .unwrap()
        .settle(10);
    match reserve(&spend, &quotas, "a", 1, t("2026-11-30T23:59:59Z")) {
        Err(Refusal::Exceeded { resets_at, .. }) => {
            assert_eq!(resets_at, "2026-12-01T00:00:00Z")
        }
        _ => panic!("used up until the month ends"),
    }
    assert!(reserve(&spend, &quotas, "a", 10, t("2026-12-01T00:00:00Z")).is_ok());
}

#[test]
fn a_window_change_keeps_what_was_spent_in_the_new_window() {
    let spend = Spend::default();
    let day = day_index(t("2026-11-23T08:00:00Z"));
    // Recorded: 50 earlier this month, 30 today.
    spend.seed([
        Charge {
            quota_id: "q-a".into(),
            day: day - 5,
            caller: String::new(),
            micros: 50,
        },
        Charge {
            quota_id: "q-a".into(),
            day,
            caller: String::new(),
            micros: 30,
        },
    ]);
    let now = t("2026-11-23T09:00:00Z");
    let daily = vec![quota(QuotaSubject::Agent, "a", 40, QuotaWindow::Daily)];
    reserve(&spend, &daily, "a", 5, now).unwrap().settle(5);
    assert!(
        reserve(&spend, &daily, "a", 6, now).is_err(),
        "today: 30 recorded + 5 = 35 of 40"
    );
    // The admin switches it to a monthly limit of 90: the month so far is 85.
    let monthly = vec![quota(QuotaSubject::Agent, "a", 90, QuotaWindow::Monthly)];
    assert!(
        reserve(&spend, &monthly, "a", 6, now).is_err(),
        "85 + 6 > 90"
    );
    assert!(reserve(&spend, &monthly, "a", 5, now).is_ok());
}

#[test]
fn unseeded_counters_refuse_only_where_a_quota_applies() {
    let spend = Spend::default();
    let quotas = vec![quota(QuotaSubject::Agent, "a", 100, QuotaWindow::Monthly)];
    assert!(matches!(
        reserve(&spend, &quotas, "a", 1, 0),
        Err(Refusal::NotSeeded)
    ));
    assert!(reserve(&spend, &quotas, "b", 1, 0).is_ok());
    spend.seed([Charge {
        quota_id: "q-a".into(),
        day: 0,
        caller: String::new(),
        micros: 99,
    }]);
    assert!(
        reserve(&spend, &quotas, "a", 2, 0).is_err(),
        "seeded spend counts"
    );
    assert!(reserve(&spend, &quotas, "a", 1, 0).is_ok());
}

#[test]
fn per_caller_model_quotas_keep_separate_budgets() {
    let spend = Spend::default();
    spend.seed([]);
    let mut q = (*quota(QuotaSubject::Model, "m", 10, QuotaWindow::Monthly)).clone();
    q.per_caller = true;
    let quotas = vec![Arc::new(q)];
    reserve(&spend, &quotas, "a", 10, 0).unwrap().settle(10);
    assert!(reserve(&spend, &quotas, "a", 1, 0).is_err());
    assert!(
        reserve(&spend, &quotas, "b", 10, 0).is_ok(),
        "b has its own budget"
    );
    let user = CallScope {
        user: Some("oidc|u-1"),
        ..scope("a")
    };
    let applied = applicable(&quotas, &user, 0);
    assert_eq!(
        applied[0].caller, "user:oidc|u-1",
        "a verified end user is its own caller"
    );
    assert!(spend.reserve(applied, 10).is_ok());
}

#[test]
fn quotas_apply_by_subject_and_pool_scope() {
    let pooled = Arc::new(QuotaEntry {
        pool_id: "p".into(),
        ..(*quota(QuotaSubject::Model, "m", 1, QuotaWindow::Monthly)).clone()
    });
    let quotas = vec![
        quota(QuotaSubject::Workspace, "w", 1, QuotaWindow::Monthly),
        quota(QuotaSubject::Gateway, "g", 1, QuotaWindow::Monthly),
        quota(QuotaSubject::Gateway, "other", 1, QuotaWindow::Monthly),
        quota(QuotaSubject::Pool, "p", 1, QuotaWindow::Monthly),
        pooled,
    ];
    let ids = |s: &CallScope<'_>| -> Vec<String> {
        applicable(&quotas, s, 0)
            .into_iter()
            .map(|a| a.quota.id.clone())
            .collect()
    };
    assert_eq!(ids(&scope("a")), ["q-w", "q-g"], "direct: no pool quotas");
    let through_pool = CallScope {
        pool_id: Some("p"),
        ..scope("a")
    };
    assert_eq!(
        ids(&through_pool),
        ["q-w", "q-g", "q-p", "q-m"],
        "model quotas come last"
    );
}

#[test]
fn pruning_forgets_ended_windows_only() {
    let spend = Spend::default();
    spend.seed([]);
    let quotas = vec![quota(QuotaSubject::Agent, "a", 100, QuotaWindow::Daily)];
    let before = t("2026-11-22T12:00:00Z");
    reserve(&spend, &quotas, "a", 10, before)
        .unwrap()
        .settle(10);
    let held = reserve(&spend, &quotas, "a", 10, before).unwrap();
    spend.prune(t("2026-11-23T12:00:00Z"));
    assert_eq!(
        spend.lock().len(),
        2,
        "yesterday's counter holds a call; the month's stays"
    );
    drop(held);
    spend.prune(t("2026-11-23T12:00:00Z"));
    assert_eq!(spend.lock().len(), 1, "only this month's counter is left");
    assert!(reserve(&spend, &quotas, "a", 100, t("2026-11-23T12:00:00Z")).is_ok());
}
