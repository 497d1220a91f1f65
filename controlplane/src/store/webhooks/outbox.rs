//! The outbox: stored events waiting to be matched against the subscriptions.

use crate::store::{Backend, Conn, StoreError};

/// Whether any event is queued (read before taking the writer: an idle queue costs no write).
pub async fn has_queued(conn: &mut Conn) -> Result<bool, StoreError> {
    let row: Option<(String,)> = sqlx::query_as("SELECT event_id FROM webhook_outbox LIMIT 1")
        .fetch_optional(conn)
        .await?;
    Ok(row.is_some())
}

pub async fn enqueue_events(
    conn: &mut Conn,
    events: &[(&str, &str)],
    now: i64,
) -> Result<(), StoreError> {
    for chunk in events.chunks(300) {
        let mut sql =
            String::from("INSERT INTO webhook_outbox (event_id, workspace_id, queued_at) VALUES ");
        for i in 0..chunk.len() {
            if i > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&format!("(${}, ${}, ${})", i * 3 + 1, i * 3 + 2, i * 3 + 3));
        }
        sql.push_str(" ON CONFLICT (event_id) DO NOTHING");
        let mut query = sqlx::query(&sql);
        for (event_id, workspace_id) in chunk {
            query = query.bind(*event_id).bind(*workspace_id).bind(now);
        }
        query.execute(&mut *conn).await?;
    }
    Ok(())
}

/// The oldest queued events with their stored bodies, locked for this transaction on
/// PostgreSQL (other replicas skip them). An event whose audit record is gone comes back with
/// no body.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct QueuedRow {
    pub event_id: String,
    pub workspace_id: String,
    pub queued_at: i64,
    /// The stored audit event, JSON.
    pub body: Option<String>,
}

pub async fn take_queued(
    conn: &mut Conn,
    backend: Backend,
    limit: i64,
) -> Result<Vec<QueuedRow>, StoreError> {
    let lock = match backend {
        Backend::Postgres => " FOR UPDATE OF o SKIP LOCKED",
        Backend::Sqlite => "",
    };
    let sql = format!(
        "SELECT o.event_id, o.workspace_id, o.queued_at, a.body FROM webhook_outbox o LEFT JOIN audit_events \
         a ON a.event_id = o.event_id ORDER BY o.queued_at, o.event_id LIMIT $1{lock}"
    );
    Ok(sqlx::query_as(&sql).bind(limit).fetch_all(conn).await?)
}

pub async fn dequeue(conn: &mut Conn, event_ids: &[String]) -> Result<(), StoreError> {
    for id in event_ids {
        sqlx::query("DELETE FROM webhook_outbox WHERE event_id = $1")
            .bind(id)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}
