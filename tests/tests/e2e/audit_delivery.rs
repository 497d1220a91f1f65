//! Audit delivery over real processes: the live stream; zero loss across a control-plane
//! outage and a gateway restart; idempotent ingest and retention; the spool's bound; the rate of
//! refusals recorded before a caller is identified.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use portcullis_client::audit::WaitOptions;
use portcullis_shared::audit::{AuditEventV1, QueryEventsRequest};
use portcullis_tests::controlplane::{AGENTS, MGMT};
use portcullis_tests::{Backend, ControlPlane};
use serde_json::json;

use crate::audit::{activity, admin, all, by_activity, wait, Setup, PROMPT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_events_delivers_a_new_event_within_a_second() {
    let s = Setup::start(Backend::Sqlite, false).await;
    let client = admin(&s.cp);
    // The query-only filters are refused.
    for bad in [
        json!({"trace_id": "x"}),
        json!({"workspace_id": s.cp.workspace_id}),
        json!({"page_size": 5}),
        json!({"agent_ids": ["a"]}),
    ] {
        let filter: QueryEventsRequest = serde_json::from_value(bad.clone()).unwrap();
        let err = client
            .stream_events(&filter)
            .await
            .err()
            .unwrap_or_else(|| panic!("{bad} accepted"));
        assert_eq!(
            err.code().map(|c| c.as_str().to_string()).as_deref(),
            Some("invalid_argument"),
            "{err}"
        );
    }
    let mut stream = client
        .stream_events(&QueryEventsRequest {
            event_types: vec!["model.call".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    // A management event does not pass the type filter; the model call does.
    s.cp.ok(
        AGENTS,
        "RegisterAgent",
        s.cp.body(json!({"name": "another"})),
    )
    .await;
    for round in 0..3 {
        let a = activity();
        let started = Instant::now();
        assert_eq!(s.chat("gpt", &a, false).await.status, 200);
        let event = tokio::time::timeout(Duration::from_secs(5), stream.next())
            .await
            .expect("an event within 5 s")
            .expect("the stream is open")
            .unwrap();
        let took = started.elapsed();
        assert_eq!(
            (
                event.event_type.as_str(),
                event.correlation.activity_id.as_str()
            ),
            ("model.call", a.as_str())
        );
        assert!(
            took < Duration::from_secs(1),
            "round {round}: the event took {took:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_event_is_lost_across_an_outage_and_a_gateway_restart() {
    let mut s = Setup::start(Backend::Sqlite, false).await;
    s.cp.stop().await;
    let run = activity();
    let mut request_ids = HashSet::new();
    let client = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", s.base());
    for _ in 0..25 {
        let calls = (0..20).map(|_| {
            client
                .post(&url)
                .bearer_auth(&s.key)
                .header("x-svc-activity-id", &run)
                .json(&json!({"model": "gpt", "messages": [{"role": "user", "content": PROMPT}]}))
                .send()
        });
        for r in futures_util::future::join_all(calls).await {
            let r = r.unwrap();
            assert_eq!(r.status().as_u16(), 200);
            request_ids.insert(r.headers()["x-request-id"].to_str().unwrap().to_string());
        }
    }
    assert_eq!(request_ids.len(), 500);
    // Restart the gateway while the control plane is still down: events wait in the spool.
    s.gw.restart_gracefully().await;
    s.cp.restart().await;
    let filter = by_activity(&s.cp, &run, &["model.call"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let events = loop {
        let events = all(&s.cp, &filter, 1000).await;
        if events.len() >= 500 || Instant::now() > deadline {
            break events;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let ids: HashSet<&str> = events.iter().map(|e| e.event_id.as_str()).collect();
    let got: HashSet<String> = events
        .iter()
        .map(|e| e.correlation.request_id.clone())
        .collect();
    assert_eq!(
        events.len(),
        500,
        "every event arrives, once:\n{}",
        s.gw.logs()
    );
    assert_eq!(ids.len(), 500);
    assert_eq!(got, request_ids);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingest_is_idempotent_and_retention_purges_old_events() {
    let mut cp =
        ControlPlane::start_with(Backend::Sqlite, &[("PORTCULLIS_AUDIT_RETENTION_DAYS", "7")])
            .await;
    let token = cp
        .ok(
            MGMT,
            "CreateDeployment",
            cp.body(json!({"name": "gw", "public_url": "http://gateway.test"})),
        )
        .await["token"]
        .as_str()
        .unwrap()
        .to_string();
    let event = |id: &str, days_ago: i64| {
        let time = (chrono::Utc::now() - chrono::Duration::days(days_ago))
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        json!({"event_id": id, "type": "model.call", "time": time, "result": "RESULT_ALLOWED",
            "scope": {"kind": "agent", "workspace_id": cp.workspace_id}, "actor": {"kind": "ACTOR_KIND_AGENT", "id": "a"},
            "resource": {"kind": "model"}, "producer": {"service": "gateway", "instance_id": "i", "version": "0"},
            "request": {"surface": "INITIATOR_SURFACE_GATEWAY_LLM"}, "correlation": {}, "data_handling": {}, "payload": {}})
    };
    let (old, recent) = (
        uuid::Uuid::new_v4().to_string(),
        uuid::Uuid::new_v4().to_string(),
    );
    let batch = json!({"events": [event(&old, 10), event(&recent, 1)]});
    for expected in [2, 0] {
        let r = cp
            .call_as(
                &token,
                "svc.sync.v1.SyncService",
                "IngestAudit",
                batch.clone(),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(
            r.body["stored"], expected,
            "a re-sent batch stores nothing new"
        );
    }
    // Another workspace's event is refused; a platform key cannot ingest.
    cp.call_as(
        &cp.key.clone(),
        "svc.sync.v1.SyncService",
        "IngestAudit",
        batch.clone(),
    )
    .await
    .expect_error_any(&["unauthenticated", "permission_denied"]);
    let ids = |events: Vec<AuditEventV1>| {
        events
            .into_iter()
            .map(|e| e.event_id)
            .collect::<HashSet<_>>()
    };
    let q = QueryEventsRequest {
        workspace_id: Some(cp.workspace_id.clone()),
        event_types: vec!["model.call".into()],
        ..Default::default()
    };
    assert_eq!(
        ids(all(&cp, &q, 50).await),
        HashSet::from([old.clone(), recent.clone()])
    );
    // The purge runs at start and hourly.
    cp.restart().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = ids(all(&cp, &q, 50).await);
        if left == HashSet::from([recent.clone()]) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the old event was not purged: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_spool_drops_the_oldest_and_says_so() {
    let s = Setup::start_with(
        Backend::Sqlite,
        false,
        &[("PORTCULLIS_AUDIT_SPOOL_MAX_BYTES", "65536")],
    )
    .await;
    let mut s = s;
    s.cp.stop().await;
    let run = activity();
    let mut last = String::new();
    for _ in 0..400 {
        let r = s.chat("gpt", &run, false).await;
        assert_eq!(r.status, 200);
        last = r.headers["x-request-id"].to_str().unwrap().to_string();
    }
    let metrics = reqwest::get(format!("{}/metrics", s.gw.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let dropped_metric: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("portcullis_gateway_audit_dropped_total "))
        .expect("the counter is exported")
        .parse()
        .unwrap();
    assert!(dropped_metric > 0, "{metrics}");
    s.cp.restart().await;
    let cp = &s.cp;
    let dropped = wait(
        cp,
        &QueryEventsRequest {
            workspace_id: Some(cp.workspace_id.clone()),
            event_types: vec!["audit.dropped".into()],
            ..Default::default()
        },
    )
    .await;
    assert_eq!(dropped.result, "RESULT_ERROR");
    assert_eq!(dropped.producer.service, "gateway");
    // The newest events survive; the dropped ones are accounted for.
    let kept_filter = by_activity(cp, &run, &["model.call"]);
    let newest = admin(cp)
        .wait_for_event_where(&kept_filter, WaitOptions::default(), |e| {
            e.correlation.request_id == last
        })
        .await
        .expect("the newest event is kept");
    assert_eq!(newest.correlation.request_id, last);
    // Every event is either kept or counted in an `audit.dropped` event (whose count carries
    // over when a report is itself pushed out).
    let dropped_filter = QueryEventsRequest {
        workspace_id: Some(cp.workspace_id.clone()),
        event_types: vec!["audit.dropped".into()],
        ..Default::default()
    };
    // The wait ends as soon as every event is accounted for; the bound is for a loaded machine,
    // where the restarted control plane takes the re-shipped reports slowly.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (kept, reported) = loop {
        let kept = all(cp, &kept_filter, 1000).await.len() as u64;
        let reported: u64 = all(cp, &dropped_filter, 1000)
            .await
            .iter()
            .map(|e| e.payload["dropped"].as_u64().unwrap())
            .sum();
        if kept + reported >= 400 || Instant::now() > deadline {
            break (kept, reported);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(kept < 400, "the bound held: {kept} kept");
    assert_eq!(
        kept + reported,
        400,
        "{kept} kept + {reported} reported dropped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_bad_keys_is_recorded_at_a_bounded_rate() {
    let s = Setup::start(Backend::Sqlite, false).await;
    let run = activity();
    let client = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", s.base());
    for _ in 0..10 {
        let calls = (0..30).map(|_| {
            client
                .post(&url)
                .bearer_auth("svc_ak_flood")
                .header("x-svc-activity-id", &run)
                .json(&json!({"model": "gpt", "messages": []}))
                .send()
        });
        for r in futures_util::future::join_all(calls).await {
            assert_eq!(r.unwrap().status().as_u16(), 401);
        }
    }
    // A real call afterwards is recorded; events ship in order, so the refusals are in by then.
    let after = activity();
    assert_eq!(s.chat("gpt", &after, false).await.status, 200);
    wait(&s.cp, &by_activity(&s.cp, &after, &["model.call"])).await;
    let refused = all(&s.cp, &by_activity(&s.cp, &run, &["access.denied"]), 1000).await;
    assert!(
        !refused.is_empty() && refused.len() < 300,
        "{} of 300 recorded",
        refused.len()
    );
    assert!(
        refused.len() <= 150,
        "at most 50 a second: {} recorded",
        refused.len()
    );
    let skipped: u64 = refused
        .iter()
        .filter_map(|e| e.payload["unrecorded_before"].as_u64())
        .sum();
    assert!(skipped <= 300 - refused.len() as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_events_survive_a_kill_during_ingest_on_sqlite() {
    acknowledged_events_survive_a_kill_during_ingest(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_events_survive_a_kill_during_ingest_on_postgres() {
    acknowledged_events_survive_a_kill_during_ingest(Backend::Postgres).await;
}

/// Four shippers ingest batches as fast as they can; the control plane is killed (SIGKILL)
/// while batches are in flight. After a restart every event of every acknowledged batch is
/// stored (on SQLite with the default `sqlite_synchronous = normal`).
async fn acknowledged_events_survive_a_kill_during_ingest(backend: Backend) {
    let mut cp = ControlPlane::start(backend).await;
    let token = cp
        .ok(
            MGMT,
            "CreateDeployment",
            cp.body(json!({"name": "gw", "public_url": "http://gateway.test"})),
        )
        .await["token"]
        .as_str()
        .unwrap()
        .to_string();
    let acknowledged = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let mut shippers = Vec::new();
    for _ in 0..4 {
        let (url, token, ws) = (cp.url.clone(), token.clone(), cp.workspace_id.clone());
        let acknowledged = acknowledged.clone();
        shippers.push(tokio::spawn(async move {
            let http = reqwest::Client::new();
            loop {
                let ids: Vec<String> = (0..50).map(|_| uuid::Uuid::new_v4().to_string()).collect();
                let events: Vec<_> = ids
                    .iter()
                    .map(|id| {
                        json!({"event_id": id, "type": "model.call",
                            "time": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                            "result": "RESULT_ALLOWED", "scope": {"kind": "agent", "workspace_id": ws},
                            "actor": {"kind": "ACTOR_KIND_AGENT", "id": "a"}, "resource": {"kind": "model"},
                            "producer": {"service": "gateway", "instance_id": "i", "version": "0"},
                            "request": {"surface": "INITIATOR_SURFACE_GATEWAY_LLM"}, "correlation": {},
                            "data_handling": {}, "payload": {}})
                    })
                    .collect();
                let sent = http
                    .post(format!("{url}/svc.sync.v1.SyncService/IngestAudit"))
                    .bearer_auth(&token)
                    .json(&json!({"events": events}))
                    .send()
                    .await;
                match sent {
                    Ok(r) if r.status().is_success() => acknowledged.lock().unwrap().extend(ids),
                    _ => return,
                }
            }
        }));
    }
    // Kill it once a good number of batches were acknowledged, with others in flight.
    let deadline = Instant::now() + Duration::from_secs(30);
    while acknowledged.lock().unwrap().len() < 4000 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    cp.stop().await;
    for s in shippers {
        let _ = s.await;
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(acknowledged.len() >= 4000, "ingest was too slow to test");
    cp.restart().await;
    let stored: HashSet<String> = cp
        .db_strings(
            "SELECT event_id FROM audit_events WHERE workspace_id = $1",
            &cp.workspace_id,
        )
        .await
        .into_iter()
        .collect();
    let lost = acknowledged
        .iter()
        .filter(|id| !stored.contains(*id))
        .count();
    assert_eq!(
        lost,
        0,
        "{lost} of {} acknowledged events were lost",
        acknowledged.len()
    );
}

/// One agent request naming a 2.5 MB model must not cost other callers their events: its
/// event is stored with the name cut (and a hash of the whole), and every neighbour in its
/// batch is stored too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_model_name_costs_no_other_event() {
    let s = Setup::start(Backend::Sqlite, false).await;
    let run = activity();
    let client = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", s.base());
    let call = |model: String| {
        client
            .post(&url)
            .bearer_auth(&s.key)
            .header("x-svc-activity-id", &run)
            .json(&json!({"model": model, "messages": [{"role": "user", "content": PROMPT}]}))
            .send()
    };
    let huge = "m".repeat(2_500_000);
    let mut calls: Vec<_> = (0..30).map(|_| call("gpt".into())).collect();
    calls.push(call(huge.clone()));
    calls.extend((0..30).map(|_| call("gpt".into())));
    let mut statuses = Vec::new();
    for r in futures_util::future::join_all(calls).await {
        statuses.push(r.unwrap().status().as_u16());
    }
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 60);
    assert_eq!(
        statuses.iter().filter(|s| **s == 404).count(),
        1,
        "{statuses:?}"
    );

    let filter = by_activity(&s.cp, &run, &["model.call"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let events = loop {
        let events = all(&s.cp, &filter, 1000).await;
        if events.len() >= 61 || Instant::now() > deadline {
            break events;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(
        events.len(),
        61,
        "every call's event is stored:\n{}",
        s.gw.logs()
    );
    let named: Vec<&str> = events.iter().map(|e| e.resource.name.as_str()).collect();
    assert_eq!(named.iter().filter(|n| **n == "gpt").count(), 60);
    let cut = named.iter().find(|n| **n != "gpt").unwrap();
    assert!(
        cut.starts_with(&huge[..256]) && cut.contains("…#"),
        "{}",
        &cut[..300.min(cut.len())]
    );
    assert!(cut.len() < 400);
    let dropped = QueryEventsRequest {
        workspace_id: Some(s.cp.workspace_id.clone()),
        event_types: vec!["audit.dropped".into()],
        ..Default::default()
    };
    let dropped = all(&s.cp, &dropped, 100).await;
    assert!(dropped.is_empty(), "nothing had to be dropped: {dropped:?}");
}
