//! The dispatcher: takes queued events from the outbox, matches each against the enabled
//! subscriptions of its workspace (type, then filters) and creates a delivery per match, in
//! one transaction with taking them off the queue, so an event is matched exactly once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use portcullis_shared::audit::AuditEventV1;
use serde_json::{Map, Value};
use tokio::sync::watch;

use super::events;
use super::filter::Filters;
use super::{idle, Settings, Wake};
use crate::audit::webhook_types;
use crate::store::webhooks::{self as rows, DeliveryRow, SubscriptionRow};
use crate::store::{now_ms, Conn, Store, StoreError};

/// Events taken per transaction.
const BATCH: i64 = 200;

pub async fn run(
    store: Store,
    settings: Arc<Settings>,
    wake: Wake,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let wait = match dispatch_once(&store, &settings).await {
            Ok(0) => Duration::from_millis(500),
            Ok(n) => {
                wake.deliveries.notify_one();
                if n as i64 >= BATCH {
                    Duration::ZERO
                } else {
                    Duration::from_millis(500)
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "Matching events to webhook subscriptions failed; retrying.");
                Duration::from_secs(5)
            }
        };
        if idle(wait, &wake.events, &mut stop).await {
            return;
        }
    }
}

/// A subscription as the dispatcher matches it.
struct Matcher {
    row: SubscriptionRow,
    types: Vec<String>,
    filters: Filters,
}

/// Matches one batch; returns how many events it took off the queue.
pub async fn dispatch_once(store: &Store, settings: &Settings) -> Result<usize, StoreError> {
    if !rows::has_queued(&mut *store.read().await?).await? {
        return Ok(0);
    }
    let mut tx = store.write_unscoped().await?;
    let queued = rows::take_queued(tx.conn(), store.backend(), BATCH).await?;
    if queued.is_empty() {
        return Ok(0);
    }
    let now = now_ms();
    let mut subscriptions: HashMap<String, Vec<Matcher>> = HashMap::new();
    let mut names = Names::default();
    let mut taken = Vec::with_capacity(queued.len());
    for q in queued {
        taken.push(q.event_id.clone());
        let Some(body) = q.body else {
            continue;
        };
        let Ok(event) = serde_json::from_str::<AuditEventV1>(&body) else {
            continue;
        };
        let Some(kind) = webhook_types::webhook_type(&event.event_type) else {
            continue;
        };
        if !subscriptions.contains_key(&q.workspace_id) {
            let list = matchers(tx.conn(), &q.workspace_id).await?;
            subscriptions.insert(q.workspace_id.clone(), list);
        }
        let mut data = events::data(&event);
        names.resolve(tx.conn(), &q.workspace_id, &mut data).await?;
        let body = events::body(kind, &event.time, data.clone()).to_string();
        for m in &subscriptions[&q.workspace_id] {
            // A subscription receives what was stored after it was created.
            if m.row.created_at > q.queued_at
                || !m.types.iter().any(|t| t == kind)
                || !m.filters.matches(&data)
            {
                continue;
            }
            let delivery = new_delivery(&m.row, &event.event_id, kind, body.clone(), now, settings);
            rows::insert_delivery(tx.conn(), &delivery).await?;
        }
    }
    rows::dequeue(tx.conn(), &taken).await?;
    tx.commit().await?;
    Ok(taken.len())
}

/// Agent and connection names as they are now, looked up by id (a rename since the event
/// is what filters see); names of deleted ones stay as recorded.
#[derive(Default)]
struct Names {
    agents: HashMap<String, Option<String>>,
    connections: HashMap<String, Option<String>>,
}

impl Names {
    async fn resolve(
        &mut self,
        conn: &mut Conn,
        ws: &str,
        data: &mut Map<String, Value>,
    ) -> Result<(), StoreError> {
        if let Some(id) = data
            .get("agent_id")
            .and_then(Value::as_str)
            .map(str::to_string)
        {
            if !self.agents.contains_key(&id) {
                let row = crate::store::agents::get(conn, ws, &id).await?;
                self.agents.insert(id.clone(), row.map(|a| a.name));
            }
            if let Some(Some(name)) = self.agents.get(&id) {
                data.insert("agent_name".into(), Value::String(name.clone()));
            }
        }
        if !data.contains_key("connection_name") {
            return Ok(());
        }
        let id = data
            .get("connection_id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| data["resource"]["id"].as_str().map(str::to_string))
            .unwrap_or_default();
        if id.is_empty() {
            return Ok(());
        }
        if !self.connections.contains_key(&id) {
            let row = crate::store::tools::get(conn, ws, &id).await?;
            self.connections.insert(id.clone(), row.map(|t| t.name));
        }
        if let Some(Some(name)) = self.connections.get(&id) {
            data.insert("connection_name".into(), Value::String(name.clone()));
        }
        Ok(())
    }
}

async fn matchers(conn: &mut Conn, workspace_id: &str) -> Result<Vec<Matcher>, StoreError> {
    let mut out = Vec::new();
    for row in rows::enabled_subscriptions(conn, workspace_id).await? {
        let types: Vec<String> = serde_json::from_str(&row.event_types).unwrap_or_default();
        let filters: Vec<String> = serde_json::from_str(&row.filters).unwrap_or_default();
        // Filters were checked when written; one that no longer parses matches nothing.
        let Ok(filters) = Filters::parse(&filters) else {
            continue;
        };
        out.push(Matcher {
            row,
            types,
            filters,
        });
    }
    Ok(out)
}

/// A delivery due now, its body kept for replay until the retention period ends.
pub fn new_delivery(
    sub: &SubscriptionRow,
    event_id: &str,
    event_type: &str,
    body: String,
    now: i64,
    settings: &Settings,
) -> DeliveryRow {
    DeliveryRow {
        id: uuid::Uuid::new_v4().to_string(),
        workspace_id: sub.workspace_id.clone(),
        subscription_id: sub.id.clone(),
        destination_id: sub.destination_id.clone(),
        event_id: event_id.to_string(),
        event_type: event_type.to_string(),
        status: "pending".into(),
        attempts: 0,
        next_attempt_at: Some(now + settings.schedule[0].as_millis() as i64),
        lease_owner: None,
        lease_until: None,
        last_status_code: None,
        last_error: String::new(),
        replay_of: String::new(),
        replayed_by: String::new(),
        body: Some(body),
        body_expires_at: now + settings.body_retention.as_millis() as i64,
        created_at: now,
        updated_at: now,
    }
}
