//! Spend enforcement at the gateway over real processes: a quota is never exceeded by calls
//! racing it; streamed calls are charged their real usage; disabled quotas are not enforced;
//! a pool reroutes past a member whose model quota is used up; counters survive a restart.

use std::time::Duration;

use portcullis_client::audit::WaitOptions;
use portcullis_client::AdminClient;
use portcullis_shared::audit::{PayloadFilter, QueryEventsRequest};
use portcullis_tests::controlplane::{AGENTS, MGMT};
use serde_json::{json, Value};

use portcullis_tests::FakeLlm;

use crate::world::{agent_id, model, register_with_key, world, World};

/// Runs a test on a world with its control plane on SQLite and on PostgreSQL (the record of
/// spend lives in either).
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name(crate::world::world_on(portcullis_tests::Backend::Sqlite).await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name(crate::world::world_on(portcullis_tests::Backend::Postgres).await).await;
            }
        }
    )*};
}

on_both_backends!(
    racing_calls_never_exceed_a_quota_and_counters_survive_a_restart,
    streamed_calls_are_charged_and_disabled_quotas_are_not_enforced,
    abandoned_calls_are_charged_and_a_window_change_keeps_the_days_spend,
);

/// The fake upstream reports 9 prompt and 12 completion tokens; at gpt-4o-mini's $0.15 and
/// $0.60 per million that is 8.55, charged as 9 micro-USD.
pub(crate) const CALL_MICROS: u64 = 9;

async fn quota(w: &World, fields: Value) -> String {
    w.cp.ok(MGMT, "CreateLLMQuota", w.cp.body(fields)).await["quota"]["quota_id"]
        .as_str()
        .unwrap()
        .to_string()
}

pub(crate) fn body(model: &str, stream: bool) -> Value {
    json!({"model": model, "max_tokens": 12, "stream": stream, "messages": [{"role": "user", "content": "hi"}]})
}

/// Waits until the gateway's snapshot has the quota (a call answers 429 or the check holds).
async fn until(w: &World, check: impl Fn(u16, &Value) -> bool) -> (u16, Value) {
    for _ in 0..200 {
        let r = w
            .chat_as(Some(&w.key), &w.gateway_id, body("gpt", false))
            .await;
        if check(r.status, &r.body) {
            return (r.status, r.body);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "the gateway never reached the expected state:\n{}",
        w.gw.logs()
    );
}

/// The control plane's record of spend for a quota (what `GetSpend` seeds gateways with).
async fn recorded(w: &World, quota_id: &str) -> u64 {
    let r =
        w.cp.call_as(
            &w.gw.token,
            "svc.sync.v1.SyncService",
            "GetSpend",
            json!({}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.body["spend"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["quota_id"] == quota_id)
        .map(|c| c["micros"].as_u64().unwrap())
        .sum()
}

async fn racing_calls_never_exceed_a_quota_and_counters_survive_a_restart(mut w: World) {
    let limit = 300;
    let q = agent_quota(&w, limit).await;
    // The gateway enforces it from here on (a call answers once its counters are loaded).
    w.gw.caught_up(&w.cp).await;
    until(&w, |s, _| s == 200).await;
    let sample = a_burst_of_racing_calls_stays_within_the_quota(&w, &q, limit).await;

    // One by one, calls go through until the worst case no longer fits (past 80 % of it).
    let (status, _) = until(&w, |s, _| s == 429).await;
    assert_eq!(status, 429);
    // The crossing of 80 % and the refusals are events (for webhooks to deliver).
    the_crossing_and_the_refusals_are_events(&w, &q, limit, &sample).await;

    // A restarted gateway seeds its counters from the record: still refused.
    w.gw.restart_gracefully().await;
    w.gw.wait_ready().await;
    let (status, b) = until(&w, |s, _| s == 429).await;
    assert_eq!(
        (status, b["error"]["code"].as_str()),
        (429, Some("quota_exceeded"))
    );

    // Raising the limit takes effect with the next snapshot.
    w.cp.ok(
        MGMT,
        "UpdateLLMQuota",
        w.cp.body(json!({"quota_id": q, "limit_micros": limit + 1000})),
    )
    .await;
    until(&w, |s, _| s == 200).await;
}

/// 200 concurrent calls: how many were allowed and refused, and a refusal's body.
async fn two_hundred_racing_calls(w: &World) -> (u64, u64, Value) {
    let client = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", w.gw.gateway_url(&w.gateway_id));
    let calls = (0..200).map(|_| {
        client
            .post(&url)
            .bearer_auth(&w.key)
            .json(&body("gpt", false))
            .send()
    });
    let mut ok = 0u64;
    let mut refused = 0u64;
    let mut sample = Value::Null;
    for r in futures_util::future::join_all(calls).await {
        let r = r.unwrap();
        match r.status().as_u16() {
            200 => ok += 1,
            429 => {
                refused += 1;
                let header = |name: &str| {
                    r.headers()
                        .get(name)
                        .map(|v| v.to_str().unwrap().to_string())
                        .unwrap_or_default()
                };
                // The official SDKs would retry a 429; they are told not to, and when to.
                assert_eq!(header("x-should-retry"), "false");
                let retry_after: u64 = header("retry-after").parse().unwrap();
                assert!((1..=31 * 86_400).contains(&retry_after), "{retry_after}");
                sample = r.json().await.unwrap();
            }
            other => panic!("unexpected {other}"),
        }
    }
    (ok, refused, sample)
}

/// The burst is refused once the quota `q` of `limit` is used, and every allowed call is
/// charged within it: a refusal's body.
async fn a_burst_of_racing_calls_stays_within_the_quota(w: &World, q: &str, limit: u64) -> Value {
    let (ok, refused, sample) = two_hundred_racing_calls(w).await;
    assert!(refused > 0, "the quota refused some calls");
    assert_eq!(sample["error"]["code"], "quota_exceeded", "{sample}");
    assert_eq!(sample["error"]["quota_id"], q);
    assert!(
        sample["error"]["resets_at"]
            .as_str()
            .unwrap()
            .ends_with("-01T00:00:00Z"),
        "a monthly window resets at the month start: {sample}"
    );
    // Everything charged, counting the first calls that waited for enforcement.
    let spent = recorded_at_least(w, q, ok * CALL_MICROS).await;
    assert!(spent <= limit, "spent {spent} of {limit}: exceeded");
    assert!(
        spent >= ok * CALL_MICROS,
        "every allowed call is charged ({ok} calls, {spent} recorded)"
    );
    // Reservations hold the worst case (about 24 µUSD: each of the ~110 request bytes as a
    // prompt token plus 12 output tokens) only while a call runs, so the burst gets at least
    // (300 − 9) / 24 calls.
    assert!(ok >= 10, "only {ok} calls were allowed");
    sample
}

async fn the_crossing_and_the_refusals_are_events(w: &World, q: &str, limit: u64, sample: &Value) {
    let client = AdminClient::new(&w.cp.url, &w.cp.key).unwrap();
    let filter = |t: &str| QueryEventsRequest {
        workspace_id: Some(w.cp.workspace_id.clone()),
        event_types: vec![t.to_string()],
        payload_filters: vec![PayloadFilter {
            field: "quota_id".into(),
            values: vec![q.to_string()],
        }],
        ..Default::default()
    };
    let crossed = client
        .wait_for_event_where(&filter("quota.threshold"), WaitOptions::default(), |e| {
            e.payload["percent"] == 80
        })
        .await
        .expect("the 80 % crossing is recorded");
    assert!(crossed.payload["spent_micros"].as_u64().unwrap() * 100 >= limit * 80);
    assert!(recorded(w, q).await <= limit, "still within the limit");
    let refusal = client
        .wait_for_event(&filter("quota.exceeded"), WaitOptions::default())
        .await
        .unwrap();
    assert_eq!(refusal.result, "RESULT_DENIED");
    assert_eq!(refusal.payload["resets_at"], sample["error"]["resets_at"]);
}

async fn streamed_calls_are_charged_and_disabled_quotas_are_not_enforced(w: World) {
    let q = agent_quota(&w, 1_000_000).await;
    w.gw.caught_up(&w.cp).await;
    let r = w
        .chat_as(Some(&w.key), &w.gateway_id, body("gpt", true))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(
        !r.text.contains("\"usage\""),
        "the caller did not ask for usage"
    );
    assert_eq!(
        recorded_at_least(&w, &q, CALL_MICROS).await,
        CALL_MICROS,
        "charged its real usage, not the worst case"
    );

    // A disabled quota with no room left is stored but not enforced.
    w.cp.ok(
        MGMT,
        "UpdateLLMQuota",
        w.cp.body(json!({"quota_id": q, "limit_micros": 1, "enabled": false})),
    )
    .await;
    w.gw.caught_up(&w.cp).await;
    for _ in 0..3 {
        assert_eq!(w.chat("gpt").await.status, 200);
    }
    w.cp.ok(
        MGMT,
        "UpdateLLMQuota",
        w.cp.body(json!({"quota_id": q, "enabled": true})),
    )
    .await;
    let (_, b) = until(&w, |s, _| s == 429).await;
    assert_eq!(b["error"]["quota_id"], q);
}

/// Waits (up to 15 s) until the record holds at least `want` for the quota; returns what it
/// holds then, for the caller to judge.
pub(crate) async fn recorded_at_least(w: &World, quota_id: &str, want: u64) -> u64 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let spent = recorded(w, quota_id).await;
        if spent >= want || tokio::time::Instant::now() > deadline {
            return spent;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An agent quota of `limit` micro-USD a month on `bot`.
pub(crate) async fn agent_quota(w: &World, limit: u64) -> String {
    let agent = agent_id(&w.cp, "bot").await;
    quota(
        w,
        json!({"subject_type": "agent", "subject_id": agent, "limit_micros": limit}),
    )
    .await
}

/// A second model, `slow`, on its own fake upstream, attached and allowed to `bot`.
async fn slow_model(w: &World, fake: FakeLlm) -> portcullis_tests::fake_llm::RunningFake {
    let cp = &w.cp;
    let fake = fake.start().await;
    let slow = model(cp, "slow", &fake.base_url()).await;
    cp.ok(
        MGMT,
        "AddGatewayModel",
        cp.body(json!({"gateway_id": w.gateway_id, "connection_id": slow})),
    )
    .await;
    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": "bot", "allowed_direct_model_names": ["gpt", "slow"]})),
    )
    .await;
    fake
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_reroutes_past_a_used_up_member_and_unpriced_models_are_refused() {
    let w = world().await;
    a_pool_passes_over_a_used_up_member(&w).await;

    // A model no price is known for, under a quota: refused, never charged zero.
    let cp = &w.cp;
    let odd = cp
        .ok(
            MGMT,
            "CreateLLMModelConnection",
            cp.body(json!({"name": "odd", "provider": "openai_compatible",
            "provider_config": {"model": "in-house-7b", "base_url": w.fake.base_url()},
            "secret_values": {"Authorization": "Bearer sk-odd"}})),
        )
        .await["connection_id"]
        .as_str()
        .unwrap()
        .to_string();
    cp.ok(
        MGMT,
        "AddGatewayModel",
        cp.body(json!({"gateway_id": w.gateway_id, "connection_id": odd})),
    )
    .await;
    quota(
        &w,
        json!({"subject_type": "workspace", "limit_micros": 1_000_000}),
    )
    .await;
    let mut r = w
        .chat_as(Some(&w.key), &w.gateway_id, body("odd", false))
        .await;
    for _ in 0..200 {
        if r.status == 403 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        r = w
            .chat_as(Some(&w.key), &w.gateway_id, body("odd", false))
            .await;
    }
    assert_eq!(
        r.status, 403,
        "the unpriced model is refused under a quota: {}",
        r.text
    );
    assert_eq!(r.body["error"]["code"], "unpriced_model", "{}", r.text);
    assert!(r.text.contains("provider_config.pricing"), "{}", r.text);
}

/// Pool `team` of `first` (with a quota of 1 µUSD) and `second`: calls end up on `second`.
async fn a_pool_passes_over_a_used_up_member(w: &World) {
    let cp = &w.cp;
    let first = model(cp, "first", &w.fake.base_url()).await;
    let second = model(cp, "second", &w.fake.base_url()).await;
    let pool = cp
        .ok(MGMT, "CreateLLMPool", cp.body(json!({"name": "team", "strategy": "priority",
            "members": [{"connection_id": first, "priority": 0}, {"connection_id": second, "priority": 1}]})))
        .await["pool"]["pool_id"]
        .as_str()
        .unwrap()
        .to_string();
    cp.ok(
        MGMT,
        "AddGatewayPool",
        cp.body(json!({"gateway_id": w.gateway_id, "pool_id": pool})),
    )
    .await;
    cp.ok(AGENTS, "UpdateAgent", cp.body(json!({"agent_id": "bot", "allowed_pool_names": ["team"], "allowed_direct_model_names": ["gpt", "odd"]}))).await;
    quota(
        w,
        json!({"subject_type": "model", "subject_id": first, "limit_micros": 1}),
    )
    .await;
    let mut served = String::new();
    for _ in 0..200 {
        let r = w
            .chat_as(Some(&w.key), &w.gateway_id, body("team", false))
            .await;
        served = r
            .headers
            .get("x-portcullis-model")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        if r.status == 200 && served == "second" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(served, "second", "the used-up member is passed over");
}

async fn abandoned_calls_are_charged_and_a_window_change_keeps_the_days_spend(w: World) {
    let cp = &w.cp;
    let _slow = slow_model(
        &w,
        FakeLlm::openai().reply_delay_ms(800).chunk_delay_ms(150),
    )
    .await;
    let q = agent_quota(&w, 1_000_000).await;
    w.gw.caught_up(cp).await;
    for _ in 0..3 {
        assert_eq!(w.chat("gpt").await.status, 200);
    }
    assert_eq!(settled(&w, &q, 3 * CALL_MICROS).await, 3 * CALL_MICROS);

    // The caller gives up before the upstream answers: the upstream still did the work, and
    // the call is charged its metered usage.
    let url = format!("{}/v1/chat/completions", w.gw.gateway_url(&w.gateway_id));
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let gave_up = impatient
        .post(&url)
        .bearer_auth(&w.key)
        .json(&body("slow", false))
        .send()
        .await;
    assert!(gave_up.is_err(), "the caller timed out");
    assert_eq!(settled(&w, &q, 4 * CALL_MICROS).await, 4 * CALL_MICROS);

    // A streamed call the caller leaves after the first event: charged too (its usage, or
    // its worst case when the usage event never came).
    let mut stream = reqwest::Client::new()
        .post(&url)
        .bearer_auth(&w.key)
        .json(&body("slow", true))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    assert!(stream.chunk().await.unwrap().is_some());
    drop(stream);
    let spent = settled(&w, &q, 5 * CALL_MICROS).await;

    // The admin turns the monthly quota into a daily one of exactly what was spent today: the
    // day's spend counts in the new window, so the next call is refused.
    a_daily_window_counts_todays_spend(&w, &q, spent).await;
}

/// What the record holds for quota `q` once it holds at least `want`.
async fn settled(w: &World, q: &str, want: u64) -> u64 {
    let spent = recorded_at_least(w, q, want).await;
    assert!(
        spent >= want,
        "recorded {spent}, expected at least {want}:\n{}",
        w.gw.logs()
    );
    spent
}

async fn a_daily_window_counts_todays_spend(w: &World, q: &str, spent: u64) {
    let cp = &w.cp;
    cp.ok(
        MGMT,
        "UpdateLLMQuota",
        cp.body(json!({"quota_id": q, "window": "daily", "limit_micros": spent})),
    )
    .await;
    w.gw.caught_up(cp).await;
    let r = w
        .chat_as(Some(&w.key), &w.gateway_id, body("gpt", false))
        .await;
    assert_eq!(r.status, 429, "{}", r.text);
    assert_eq!(r.body["error"]["quota_id"], q);
    let today = portcullis_shared::snapshot::day_index(chrono::Utc::now().timestamp());
    assert_eq!(
        r.body["error"]["resets_at"],
        portcullis_shared::snapshot::window_end(
            portcullis_shared::api::quotas::QuotaWindow::Daily,
            today
        ),
        "a daily window resets at the next UTC midnight"
    );
    cp.ok(
        MGMT,
        "UpdateLLMQuota",
        cp.body(json!({"quota_id": q, "limit_micros": spent + 1000})),
    )
    .await;
    w.gw.caught_up(cp).await;
    let r = w
        .chat_as(Some(&w.key), &w.gateway_id, body("gpt", false))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cut_off_by_a_stopping_gateway_is_still_charged() {
    let w = world().await;
    let cp = &w.cp;
    // An upstream that streams for about ten seconds, and a gateway that waits one second for
    // calls in flight when it is stopped.
    let _slow = slow_model(
        &w,
        FakeLlm::openai()
            .reply("one two three four five six seven eight nine ten")
            .chunk_delay_ms(1000),
    )
    .await;
    let q = agent_quota(&w, 1_000_000).await;
    let mut gw = portcullis_tests::GatewayProcess::start_with(
        cp,
        &[("PORTCULLIS_SHUTDOWN_GRACE_SECS", "1")],
    )
    .await;
    gw.caught_up(cp).await;
    let url = format!("{}/v1/chat/completions", gw.gateway_url(&w.gateway_id));
    let mut stream = reqwest::Client::new()
        .post(&url)
        .bearer_auth(&w.key)
        .json(&body("slow", true))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200, "{}", gw.logs());
    assert!(stream.chunk().await.unwrap().is_some());
    // Stopped mid-stream: the call is cut off after the grace period. The restarted gateway
    // ships what the stopped one recorded.
    gw.restart_gracefully().await;
    gw.wait_ready().await;
    let spent = recorded_at_least(&w, &q, 1).await;
    assert!(
        spent > CALL_MICROS,
        "the cut-off call is charged its worst case ({spent} recorded):\n{}",
        gw.logs()
    );
    let client = AdminClient::new(&cp.url, &cp.key).unwrap();
    let filter = QueryEventsRequest {
        workspace_id: Some(cp.workspace_id.clone()),
        event_types: vec!["model.call".into()],
        payload_filters: vec![PayloadFilter {
            field: "served_by".into(),
            values: vec!["slow".into()],
        }],
        ..Default::default()
    };
    let cut = client
        .wait_for_event(&filter, WaitOptions::default())
        .await
        .expect("the cut-off call is recorded");
    assert!(
        cut.payload["error"].as_str().unwrap().contains("cut off"),
        "{}",
        cut.payload
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn act_as_and_per_caller_quotas_follow_the_verified_end_user() {
    let w = world().await;
    let secret = "0123456789abcdef-act-as";
    let (person, per_caller) = an_act_as_quota_on_u1_and_a_per_caller_one_on_gpt(&w, secret).await;
    let caller = HmacCaller {
        w: &w,
        url: format!("{}/v1/chat/completions", w.gw.gateway_url(&w.gateway_id)),
        secret,
    };

    // u1 runs out of its own (act-as) quota first.
    let (n, refusal) = caller.until_refused(Some("u1")).await;
    assert!(n >= 1, "u1 had room for a call");
    assert_eq!(refusal["error"]["quota_id"], person, "{refusal}");
    // u2 is not u1: the act-as quota does not apply, and its per-caller model budget is its own.
    let (m, refusal) = caller.until_refused(Some("u2")).await;
    assert!(
        m > n,
        "u2 got its own, larger budget ({m} calls against u1's {n})"
    );
    assert_eq!(refusal["error"]["quota_id"], per_caller, "{refusal}");
    // Another agent, calling for nobody, has a per-caller budget of its own too.
    let other = another_agent_calls_for_nobody(&w).await;

    // The record keeps the per-caller budgets apart.
    the_record_keeps_per_caller_budgets_apart(&w, &per_caller, &other, n, m).await;
}

/// `bot` acts for `u1` and `u2` (HMAC with `secret`); an act-as quota on `u1` and a
/// per-caller one on `gpt`: their ids.
async fn an_act_as_quota_on_u1_and_a_per_caller_one_on_gpt(
    w: &World,
    secret: &str,
) -> (String, String) {
    let cp = &w.cp;
    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(
            json!({"agent_id": "bot", "actas_method": "hmac", "actas_hmac_secret": secret,
            "actas_allowed_subjects": ["u1", "u2"]}),
        ),
    )
    .await;
    let model_id = cp
        .ok(MGMT, "ListLLMModelConnections", cp.body(json!({})))
        .await["models"][0]["connection_id"]
        .as_str()
        .unwrap()
        .to_string();
    let person = quota(
        w,
        json!({"subject_type": "act-as", "subject_key": "u1", "limit_micros": 40}),
    )
    .await;
    let per_caller = quota(
        w,
        json!({"subject_type": "model", "subject_id": model_id, "per_caller": true, "limit_micros": 60}),
    )
    .await;
    w.gw.caught_up(cp).await;
    (person, per_caller)
}

/// `bot` calling `gpt`, for a person (an HMAC act-as header signed with `secret`) or none.
struct HmacCaller<'a> {
    w: &'a World,
    url: String,
    secret: &'a str,
}

impl HmacCaller<'_> {
    async fn call(&self, sub: Option<&str>) -> (u16, Value) {
        let mut request = reqwest::Client::new()
            .post(&self.url)
            .bearer_auth(&self.w.key)
            .json(&body("gpt", false));
        if let Some(sub) = sub {
            request = request.header(
                "x-svc-act-as",
                portcullis_tests::act_as::hmac_header(sub, self.secret),
            );
        }
        let r = request.send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json::<Value>().await.unwrap())
    }

    /// Calls until one is refused; returns how many went through and the refusal.
    async fn until_refused(&self, sub: Option<&'static str>) -> (usize, Value) {
        for n in 0..20 {
            let (status, b) = self.call(sub).await;
            match status {
                200 => continue,
                429 => return (n, b),
                other => panic!("{sub:?}: unexpected {other}: {b}"),
            }
        }
        panic!("{sub:?} was never refused");
    }
}

/// Agent `other` makes one call for nobody: its id.
async fn another_agent_calls_for_nobody(w: &World) -> String {
    let cp = &w.cp;
    let other_key = register_with_key(cp, json!({"name": "other", "allowed_gateway_ids": [w.gateway_id], "allowed_direct_model_names": ["gpt"]})).await;
    w.gw.caught_up(cp).await;
    let r = w
        .chat_as(Some(&other_key), &w.gateway_id, body("gpt", false))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    agent_id(cp, "other").await
}

async fn the_record_keeps_per_caller_budgets_apart(
    w: &World,
    per_caller: &str,
    other: &str,
    n: usize,
    m: usize,
) {
    let cp = &w.cp;
    let expected = (n + m + 1) as u64 * CALL_MICROS;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let r = cp
            .call_as(
                &w.gw.token,
                "svc.sync.v1.SyncService",
                "GetSpend",
                json!({}),
            )
            .await;
        let callers: std::collections::BTreeMap<String, u64> = r.body["spend"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["quota_id"] == per_caller)
            .map(|c| {
                (
                    c["caller"].as_str().unwrap_or_default().to_string(),
                    c["micros"].as_u64().unwrap(),
                )
            })
            .collect();
        if callers.values().sum::<u64>() >= expected {
            assert_eq!(
                callers,
                [
                    (format!("agent:{other}"), CALL_MICROS),
                    ("user:u1".to_string(), n as u64 * CALL_MICROS),
                    ("user:u2".to_string(), m as u64 * CALL_MICROS),
                ]
                .into_iter()
                .collect(),
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "recorded {callers:?}, expected {expected} in all"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
