//! The control plane's side of audit: storing events (from gateways, and its own management
//! operations), matching them against filters, fanning new ones out to live tails, and the
//! retention purge.

use std::sync::Arc;
use std::time::Duration;

use portcullis_shared::audit::catalog::MgmtOperation;
use portcullis_shared::audit::{
    self, AuditEvent, AuditEventV1, AuditPayload, PayloadFilter, QueryEventsRequest,
};
use portcullis_shared::prices::MAX_COST_MICROS;
use portcullis_shared::snapshot::Charge;
use serde_json::Value;
use tokio::sync::broadcast;

use crate::store::{self, now_ms, Store, StoreError};

#[cfg(test)]
mod catalog_tests;
mod incoming;
pub mod tails;
pub mod webhook_types;
mod writer;

pub use incoming::Incoming;

/// Who hears of newly stored events: live tails, and the webhook dispatcher.
#[derive(Clone)]
struct Fanout {
    sender: broadcast::Sender<Arc<AuditEventV1>>,
    /// Poked when events are queued for webhooks.
    stored: Arc<tokio::sync::Notify>,
}

/// The audit writer (one per service, started on first use), the fan-out of what it
/// stored, and the live tails open per platform key.
pub struct Hub {
    fanout: Fanout,
    writer: std::sync::OnceLock<writer::Writer>,
    pub tails: tails::Tails,
}

impl Default for Hub {
    fn default() -> Self {
        Self {
            fanout: Fanout {
                sender: broadcast::channel(4096).0,
                stored: Arc::default(),
            },
            writer: std::sync::OnceLock::new(),
            tails: tails::Tails::default(),
        }
    }
}

impl Hub {
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<AuditEventV1>> {
        self.fanout.sender.subscribe()
    }

    /// What wakes the webhook dispatcher.
    pub fn stored(&self) -> Arc<tokio::sync::Notify> {
        self.fanout.stored.clone()
    }
}

/// Milliseconds of an RFC 3339 time.
pub fn time_ms(text: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.timestamp_millis())
}

/// The operation an event is about: the RPC method, else the payload's `operation`.
pub fn operation(e: &AuditEventV1) -> String {
    operation_of(
        &e.request.rpc_method,
        e.payload.get("operation").and_then(Value::as_str),
    )
}

fn operation_of(rpc_method: &str, payload_operation: Option<&str>) -> String {
    if rpc_method.is_empty() {
        payload_operation.unwrap_or_default().to_string()
    } else {
        rpc_method.to_string()
    }
}

/// Stores events made in this process (each payload serialized as it is written); see
/// [`store_incoming`].
pub async fn store<P: serde::Serialize>(
    store: &Store,
    hub: &Hub,
    events: Vec<AuditEvent<P>>,
) -> Result<u64, StoreError> {
    let incoming = events
        .iter()
        .map(Incoming::from_event)
        .collect::<Result<Vec<_>, _>>()
        .map_err(store::corrupt)?;
    store_incoming(store, hub, incoming).await
}

/// Stores events (skipping ones already stored) and tells live tails about the new ones;
/// how many were new. Answers once they are committed: the writer stores what arrives while it
/// is busy together, in one transaction (group commit).
pub async fn store_incoming(
    store: &Store,
    hub: &Hub,
    events: Vec<Incoming>,
) -> Result<u64, StoreError> {
    if events.is_empty() {
        return Ok(0);
    }
    let writer = hub
        .writer
        .get_or_init(|| writer::Writer::start(store.clone(), hub.fanout.clone()));
    writer.write(events).await
}

/// Stores events in one transaction; the ids that were new.
async fn write_now(
    store: &Store,
    fanout: &Fanout,
    events: &[Incoming],
) -> Result<std::collections::HashSet<String>, StoreError> {
    let now = now_ms();
    let extras: Vec<(String, Vec<Charge>)> =
        events.iter().map(Incoming::operation_and_charges).collect();
    let bodies = events
        .iter()
        .map(Incoming::body)
        .collect::<Result<Vec<_>, _>>()
        .map_err(store::corrupt)?;
    let rows: Vec<store::audit::Columns<'_>> = events
        .iter()
        .zip(extras.iter().zip(&bodies))
        .map(|(e, ((op, _), body))| store::audit::Columns {
            time_ms: time_ms(&e.event.time).unwrap_or(now),
            event: &e.event,
            operation: op,
            body,
        })
        .collect();
    let new_ids = {
        let mut tx = store.write_unscoped().await?;
        let ids = store::audit::insert_many(tx.conn(), store.backend(), &rows, now).await?;
        // Spend travels with the events: a newly stored call adds its charges to the record,
        // in the same transaction, so no charge is counted twice or lost. Summed per counter
        // first: a batch is mostly calls on the same few quotas.
        let mut sums: std::collections::BTreeMap<(&str, &str, i64, &str), u64> = Default::default();
        let mut charged = std::collections::HashSet::new();
        let charges = events
            .iter()
            .zip(&extras)
            .filter(|(e, _)| {
                e.event.event_type == audit::types::MODEL_CALL
                    && ids.contains(&e.event.event_id)
                    && charged.insert(e.event.event_id.as_str())
            })
            .map(|(e, (_, charges))| (&e.event, charges));
        for (e, list) in charges {
            for c in list {
                let key = (
                    e.scope.workspace_id.as_str(),
                    c.quota_id.as_str(),
                    c.day,
                    c.caller.as_str(),
                );
                let sum = sums.entry(key).or_default();
                *sum = sum.saturating_add(c.micros.min(MAX_COST_MICROS));
            }
        }
        for ((ws, quota_id, day, caller), micros) in sums {
            let micros = i64::try_from(micros).unwrap_or(i64::MAX / 2);
            store::quotas::add_spend(tx.conn(), ws, quota_id, day, caller, micros).await?;
        }
        let queued = queue_for_webhooks(tx.conn(), events, &ids, now).await?;
        tx.commit().await?;
        if queued {
            fanout.stored.notify_one();
        }
        ids
    };
    // Copies only for live tails that are listening: in batch order, each new event once (a
    // batch may repeat an id).
    if fanout.sender.receiver_count() > 0 {
        let mut seen = std::collections::HashSet::new();
        for e in events {
            let id = e.event.event_id.as_str();
            if new_ids.contains(id) && seen.insert(id) {
                if let Ok(event) = e.to_event() {
                    let _ = fanout.sender.send(Arc::new(event));
                }
            }
        }
    }
    Ok(new_ids)
}

/// Queues the new events webhooks can carry, in the ingest's own transaction, so an event
/// is stored and queued or neither. Only workspaces with an enabled subscription queue
/// anything; true when something was queued.
async fn queue_for_webhooks(
    conn: &mut store::Conn,
    events: &[Incoming],
    new_ids: &std::collections::HashSet<String>,
    now: i64,
) -> Result<bool, StoreError> {
    let eligible: Vec<&AuditEvent<_>> = events
        .iter()
        .map(|e| &e.event)
        .filter(|e| {
            new_ids.contains(&e.event_id) && webhook_types::webhook_type(&e.event_type).is_some()
        })
        .collect();
    if eligible.is_empty() {
        return Ok(false);
    }
    let subscribed = store::webhooks::subscribed_workspaces(conn).await?;
    let queued: Vec<(&str, &str)> = eligible
        .iter()
        .filter(|e| subscribed.contains(&e.scope.workspace_id))
        .map(|e| (e.event_id.as_str(), e.scope.workspace_id.as_str()))
        .collect();
    store::webhooks::enqueue_events(conn, &queued, now).await?;
    Ok(!queued.is_empty())
}

fn payload_value<'a>(payload: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(payload, |v, key| v.get(key))
}

pub fn payload_matches(filters: &[PayloadFilter], e: &AuditEventV1) -> bool {
    filters.iter().all(|f| {
        let Some(v) = payload_value(&e.payload, &f.field) else {
            return false;
        };
        let text = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        f.values.contains(&text)
    })
}

/// Whether an event passes the filters a live tail may use.
pub fn stream_matches(q: &QueryEventsRequest, e: &AuditEventV1) -> bool {
    let opt = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
    opt(&q.actor, &e.actor.id)
        && opt(&q.producer_service, &e.producer.service)
        && opt(&q.request_surface, &e.request.surface)
        && q.operation.as_deref().is_none_or(|w| w == operation(e))
        && q.resource
            .as_deref()
            .is_none_or(|w| w == e.resource.id || w == e.resource.name)
        && (q.event_types.is_empty() || q.event_types.contains(&e.event_type))
        && (q.results.is_empty() || q.results.contains(&e.result))
        && payload_matches(&q.payload_filters, e)
}

/// Days of the record of spend kept: the current month's days are all a gateway needs; the
/// month before stays for reports.
const SPEND_KEPT_DAYS: i64 = 62;

/// Deletes events past the retention period, and the record of spend past what any window
/// needs, and refreshes the audit table's query statistics, every hour (first at start), until
/// `stop` turns true. The running service owns the task and stops it.
pub fn spawn_retention(
    store: Store,
    days: u32,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(3600));
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    purge_expired(&store, days).await;
                    refresh_statistics(&store).await;
                }
                _ = async { drop(stop.wait_for(|s| *s).await) } => return,
            }
        }
    })
}

async fn purge_expired(store: &Store, days: u32) {
    let before = now_ms() - i64::from(days) * 24 * 3600 * 1000;
    let purged = async {
        let mut tx = store.write_unscoped().await?;
        let n = store::audit::purge(tx.conn(), before).await?;
        let today = portcullis_shared::snapshot::day_index(now_ms() / 1000);
        store::quotas::purge_spend(tx.conn(), today - SPEND_KEPT_DAYS).await?;
        // Provision links last minutes; a day later nobody needs to be told one expired.
        store::provision::purge(tx.conn(), now_ms() - 24 * 3600 * 1000).await?;
        store::oauth_flows::purge(tx.conn(), now_ms()).await?;
        let clients = store::interactive::purge(tx.conn(), now_ms()).await?;
        tx.commit().await?;
        if clients > 0 {
            tracing::info!(clients, "Registered clients never used in a day deleted.");
        }
        Ok::<u64, StoreError>(n)
    }
    .await;
    match purged {
        Ok(0) => {}
        Ok(n) => tracing::info!(purged = n, days, "Audit events past retention deleted."),
        Err(e) => tracing::warn!(error = %e, "Audit retention purge failed; retrying in an hour."),
    }
}

/// Refreshes the audit table's query statistics, in a transaction of its own: statistics that
/// cannot be refreshed must not hold back deleting what retention says to delete.
async fn refresh_statistics(store: &Store) {
    let analyzed = async {
        let mut tx = store.write_unscoped().await?;
        store::audit::analyze(tx.conn(), store.backend()).await?;
        tx.commit().await
    }
    .await;
    if let Err(e) = analyzed {
        tracing::warn!(error = %e, "Refreshing the audit table's statistics failed; retrying in an hour.");
    }
}

/// Who called a management operation: a platform key (id, name), or an agent with one of
/// its keys (agent id, key id).
pub enum Caller<'a> {
    PlatformKey { id: &'a str, name: &'a str },
    Agent { agent_id: &'a str, key_id: &'a str },
}

/// The `mgmt.operation` event a management operation leaves behind (the caller adds the door
/// it came through); its envelope is also that of the events of the changes it made.
pub fn mgmt_event(
    workspace_id: &str,
    caller: Caller<'_>,
    path: &str,
    code: &str,
    request_id: &str,
) -> AuditEvent<MgmtOperation> {
    let (service, method) = path.split_once('/').unwrap_or(("", path));
    let result = match code {
        "ok" => audit::results::ALLOWED,
        "permission_denied" | "unauthenticated" => audit::results::DENIED,
        _ => audit::results::ERROR,
    };
    AuditEvent {
        event_id: audit::new_event_id(),
        event_type: MgmtOperation::EVENT_TYPE.to_string(),
        time: crate::store::ts(now_ms()),
        result: result.to_string(),
        scope: audit::Scope {
            kind: "workspace".into(),
            workspace_id: workspace_id.to_string(),
            agent_id: match caller {
                Caller::Agent { agent_id, .. } => agent_id.to_string(),
                Caller::PlatformKey { .. } => String::new(),
            },
            ..Default::default()
        },
        actor: match caller {
            Caller::PlatformKey { id, name } => audit::Actor {
                kind: audit::actors::PLATFORM_KEY.into(),
                id: id.to_string(),
                display: name.to_string(),
                ..Default::default()
            },
            Caller::Agent { agent_id, key_id } => audit::Actor {
                kind: audit::actors::AGENT.into(),
                id: agent_id.to_string(),
                display: format!("agent key {key_id}"),
                ..Default::default()
            },
        },
        on_behalf_of: None,
        resource: audit::ResourceRef {
            kind: "operation".into(),
            name: method.to_string(),
            workspace_id: workspace_id.to_string(),
            ..Default::default()
        },
        producer: audit::Producer {
            service: "controlplane".into(),
            instance_id: instance_id().to_string(),
            version: env!("CARGO_PKG_VERSION").into(),
            region: String::new(),
        },
        request: audit::RequestSurface {
            surface: audit::surfaces::MANAGEMENT_API.into(),
            rpc_service: service.to_string(),
            rpc_method: method.to_string(),
            http_route: format!("/{path}"),
            user_agent_class: String::new(),
        },
        correlation: audit::Correlation {
            request_id: request_id.to_string(),
            ..Default::default()
        },
        data_handling: audit::DataHandling {
            omitted: vec!["request_body".into()],
            ..Default::default()
        },
        payload: MgmtOperation {
            operation: method.to_string(),
            code: code.to_string(),
            surface: None,
            tool: None,
        },
    }
}

/// An event a person caused on a page of this service (a provision link), as that person.
pub fn person_event<P: AuditPayload>(
    workspace_id: &str,
    subject: &str,
    resource: audit::ResourceRef,
    payload: P,
) -> AuditEvent<P> {
    let caller = Caller::PlatformKey { id: "", name: "" };
    let request_id = uuid::Uuid::new_v4().to_string();
    let mut e = mgmt_event(workspace_id, caller, "", "ok", &request_id).typed(payload);
    e.actor = audit::Actor {
        kind: audit::actors::USER.into(),
        id: subject.to_string(),
        display: subject.to_string(),
        ..Default::default()
    };
    e.resource = audit::ResourceRef {
        workspace_id: workspace_id.to_string(),
        ..resource
    };
    e.request.http_route = "/provision/{token}".into();
    e
}

/// This process's id in events.
pub fn instance_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| uuid::Uuid::new_v4().to_string())
}
