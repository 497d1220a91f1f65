//! Deliveries, a queue claimed with leases, and their attempts.

use crate::store::{Backend, Conn, StoreError};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DeliveryRow {
    pub id: String,
    pub workspace_id: String,
    pub subscription_id: String,
    pub destination_id: String,
    pub event_id: String,
    pub event_type: String,
    pub status: String,
    pub attempts: i64,
    pub next_attempt_at: Option<i64>,
    pub lease_owner: Option<String>,
    pub lease_until: Option<i64>,
    pub last_status_code: Option<i64>,
    pub last_error: String,
    pub replay_of: String,
    pub replayed_by: String,
    /// The JSON body as sent; NULL once past retention.
    pub body: Option<String>,
    pub body_expires_at: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

impl DeliveryRow {
    /// The body while it is retained: the hourly purge clears it, but past `body_expires_at`
    /// it is neither sent, shown nor replayed before then either.
    pub fn retained_body(&self, now_ms: i64) -> Option<&str> {
        self.body
            .as_deref()
            .filter(|_| now_ms < self.body_expires_at)
    }
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct AttemptRow {
    pub delivery_id: String,
    pub attempt: i64,
    pub webhook_id: String,
    pub started_at: i64,
    pub duration_ms: i64,
    pub status_code: Option<i64>,
    pub error: String,
}

pub async fn insert_delivery(conn: &mut Conn, r: &DeliveryRow) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO webhook_deliveries (id, workspace_id, subscription_id, destination_id, \
         event_id, event_type, status, attempts, next_attempt_at, last_error, replay_of, body, \
         body_expires_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, \
         $10, $11, $12, $13, $14, $15)",
    )
    .bind(&r.id)
    .bind(&r.workspace_id)
    .bind(&r.subscription_id)
    .bind(&r.destination_id)
    .bind(&r.event_id)
    .bind(&r.event_type)
    .bind(&r.status)
    .bind(r.attempts)
    .bind(r.next_attempt_at)
    .bind(&r.last_error)
    .bind(&r.replay_of)
    .bind(&r.body)
    .bind(r.body_expires_at)
    .bind(r.created_at)
    .bind(r.updated_at)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn delivery(
    conn: &mut Conn,
    workspace_id: &str,
    id: &str,
) -> Result<Option<DeliveryRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM webhook_deliveries WHERE workspace_id = $1 AND id = $2")
            .bind(workspace_id)
            .bind(id)
            .fetch_optional(conn)
            .await?,
    )
}

/// Whether an attempt is due that no live lease holds.
pub async fn has_due(conn: &mut Conn, now: i64) -> Result<bool, StoreError> {
    let row: Option<(String,)> = sqlx::query_as(
        "SELECT id FROM webhook_deliveries WHERE next_attempt_at <= $1 AND (lease_until IS NULL \
         OR lease_until < $1) LIMIT 1",
    )
    .bind(now)
    .fetch_optional(conn)
    .await?;
    Ok(row.is_some())
}

/// Claims up to `limit` deliveries whose attempt is due and that no live lease holds, for
/// `owner` until `lease_until`. A lease of a process that died runs out on its own.
pub async fn claim_due(
    conn: &mut Conn,
    backend: Backend,
    owner: &str,
    now: i64,
    lease_until: i64,
    limit: i64,
) -> Result<Vec<DeliveryRow>, StoreError> {
    let lock = match backend {
        Backend::Postgres => " FOR UPDATE SKIP LOCKED",
        Backend::Sqlite => "",
    };
    let sql = format!(
        "UPDATE webhook_deliveries SET lease_owner = $1, lease_until = $2 WHERE id IN (SELECT id \
         FROM webhook_deliveries WHERE next_attempt_at <= $3 AND (lease_until IS NULL OR \
         lease_until < $3) ORDER BY next_attempt_at LIMIT $4{lock}) RETURNING *"
    );
    Ok(sqlx::query_as(&sql)
        .bind(owner)
        .bind(lease_until)
        .bind(now)
        .bind(limit)
        .fetch_all(conn)
        .await?)
}

/// The outcome of an attempt, written only while `owner` still holds the lease (a canceled
/// delivery, or one another replica took over, is left as it is).
pub struct Settled<'a> {
    pub id: &'a str,
    pub owner: &'a str,
    pub status: &'a str,
    pub next_attempt_at: Option<i64>,
    pub status_code: Option<i64>,
    pub error: &'a str,
    pub attempt: &'a AttemptRow,
}

pub async fn settle(conn: &mut Conn, s: &Settled<'_>, now: i64) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE webhook_deliveries SET status = $1, attempts = attempts + 1, next_attempt_at = \
         $2, lease_owner = NULL, lease_until = NULL, last_status_code = $3, last_error = $4, \
         updated_at = $5 WHERE id = $6 AND lease_owner = $7 AND next_attempt_at IS NOT NULL",
    )
    .bind(s.status)
    .bind(s.next_attempt_at)
    .bind(s.status_code)
    .bind(s.error)
    .bind(now)
    .bind(s.id)
    .bind(s.owner)
    .execute(&mut *conn)
    .await?;
    if done.rows_affected() == 0 {
        return Ok(false);
    }
    let a = s.attempt;
    sqlx::query(
        "INSERT INTO webhook_attempts (delivery_id, attempt, webhook_id, started_at, \
         duration_ms, status_code, error) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(&a.delivery_id)
    .bind(a.attempt)
    .bind(&a.webhook_id)
    .bind(a.started_at)
    .bind(a.duration_ms)
    .bind(a.status_code)
    .bind(&a.error)
    .execute(conn)
    .await?;
    Ok(true)
}

/// Ends the retries of a live delivery; false when it was not live.
pub async fn cancel(conn: &mut Conn, id: &str, now: i64) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE webhook_deliveries SET status = 'canceled', next_attempt_at = NULL, \
         lease_owner = NULL, lease_until = NULL, updated_at = $1 WHERE id = $2 AND \
         next_attempt_at IS NOT NULL",
    )
    .bind(now)
    .bind(id)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() > 0)
}

/// Ends the live deliveries to a destination as `failed` (it is gone or deleted).
pub async fn fail_destination(
    conn: &mut Conn,
    destination_id: &str,
    reason: &str,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, lease_owner = \
         NULL, lease_until = NULL, last_error = $1, updated_at = $2 WHERE destination_id = $3 \
         AND next_attempt_at IS NOT NULL",
    )
    .bind(reason)
    .bind(now)
    .bind(destination_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// Cancels the live deliveries of a subscription (it is being deleted).
pub async fn cancel_subscription(
    conn: &mut Conn,
    subscription_id: &str,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE webhook_deliveries SET status = 'canceled', next_attempt_at = NULL, lease_owner \
         = NULL, lease_until = NULL, updated_at = $1 WHERE subscription_id = $2 AND \
         next_attempt_at IS NOT NULL",
    )
    .bind(now)
    .bind(subscription_id)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn mark_replayed(
    conn: &mut Conn,
    id: &str,
    replay_id: &str,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE webhook_deliveries SET replayed_by = $1, updated_at = $2 WHERE id = $3")
        .bind(replay_id)
        .bind(now)
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}

pub async fn attempts(conn: &mut Conn, delivery_id: &str) -> Result<Vec<AttemptRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM webhook_attempts WHERE delivery_id = $1 ORDER BY attempt")
            .bind(delivery_id)
            .fetch_all(conn)
            .await?,
    )
}

/// What `ListDeliveries` and bulk replay select on. `leaves_only` leaves out deliveries that
/// were replayed since (the last delivery of a chain stands for it).
#[derive(Debug, Default)]
pub struct DeliveryQuery<'a> {
    pub workspace_id: &'a str,
    pub statuses: Vec<String>,
    pub since: Option<i64>,
    pub subscription_id: Option<&'a str>,
    pub destination_id: Option<&'a str>,
    pub event_type: Option<&'a str>,
    pub leaves_only: bool,
    /// Keyset: deliveries before this `(created_at, id)`, newest first.
    pub before: Option<(i64, String)>,
    pub limit: i64,
}

pub async fn query_deliveries(
    conn: &mut Conn,
    q: &DeliveryQuery<'_>,
) -> Result<Vec<DeliveryRow>, StoreError> {
    let mut sql = String::from("SELECT * FROM webhook_deliveries WHERE workspace_id = $1");
    let mut n = 1;
    let mut next = |sql: &mut String, clause: &str| {
        n += 1;
        sql.push_str(&clause.replace('?', &format!("${n}")));
    };
    if !q.statuses.is_empty() {
        sql.push_str(" AND status IN (");
        for i in 0..q.statuses.len() {
            next(&mut sql, if i == 0 { "?" } else { ", ?" });
        }
        sql.push(')');
    }
    if q.since.is_some() {
        next(&mut sql, " AND created_at >= ?");
    }
    if q.subscription_id.is_some() {
        next(&mut sql, " AND subscription_id = ?");
    }
    if q.destination_id.is_some() {
        next(&mut sql, " AND destination_id = ?");
    }
    if q.event_type.is_some() {
        next(&mut sql, " AND event_type = ?");
    }
    if q.leaves_only {
        sql.push_str(" AND replayed_by = ''");
    }
    if q.before.is_some() {
        next(&mut sql, " AND (created_at < ?");
        next(&mut sql, " OR (created_at = ?");
        next(&mut sql, " AND id < ?))");
    }
    next(&mut sql, " ORDER BY created_at DESC, id DESC LIMIT ?");
    let mut query = sqlx::query_as(&sql).bind(q.workspace_id);
    for s in &q.statuses {
        query = query.bind(s);
    }
    if let Some(since) = q.since {
        query = query.bind(since);
    }
    for v in [q.subscription_id, q.destination_id, q.event_type]
        .into_iter()
        .flatten()
    {
        query = query.bind(v);
    }
    if let Some((at, id)) = &q.before {
        query = query.bind(*at).bind(*at).bind(id);
    }
    Ok(query.bind(q.limit).fetch_all(conn).await?)
}

/// Drops retained bodies past their time, and deliveries (with their attempts) settled
/// before `settled_before`.
pub async fn purge(conn: &mut Conn, now: i64, settled_before: i64) -> Result<u64, StoreError> {
    let bodies = sqlx::query(
        "UPDATE webhook_deliveries SET body = NULL WHERE body IS NOT NULL AND body_expires_at < $1",
    )
    .bind(now)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries \
         WHERE next_attempt_at IS NULL AND updated_at < $1)",
    )
    .bind(settled_before)
    .execute(&mut *conn)
    .await?;
    sqlx::query("DELETE FROM webhook_deliveries WHERE next_attempt_at IS NULL AND updated_at < $1")
        .bind(settled_before)
        .execute(conn)
        .await?;
    Ok(bodies.rows_affected())
}
