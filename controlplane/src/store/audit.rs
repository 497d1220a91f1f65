//! Audit events: idempotent inserts, keyset-paginated queries over the indexed columns, and
//! the retention purge.

use portcullis_shared::audit::{AuditEvent, AuditEventV1};
use serde_json::value::RawValue;

use super::db::{corrupt, Backend, Conn, StoreError};

/// The indexed columns of an event, and its text.
pub struct Columns<'a> {
    pub time_ms: i64,
    pub event: &'a AuditEvent<Box<RawValue>>,
    pub operation: &'a str,
    pub body: &'a str,
}

/// Rows per INSERT statement (17 parameters each); every row count up to it is a prepared
/// statement of its own in the connection's cache.
const ROWS_PER_STATEMENT: usize = 32;
const COLUMNS: usize = 17;

/// Stores events in multi-row statements; returns the ids that were new (an id already
/// stored is skipped, so re-sending is harmless).
pub async fn insert_many(
    conn: &mut Conn,
    backend: Backend,
    rows: &[Columns<'_>],
    now: i64,
) -> Result<std::collections::HashSet<String>, StoreError> {
    let mut stored = std::collections::HashSet::new();
    for chunk in rows.chunks(ROWS_PER_STATEMENT) {
        // On SQLite, `OR IGNORE` rather than `ON CONFLICT … DO NOTHING`: a statement that cannot
        // abort halfway needs no statement journal, which copied every page the statement
        // touched first (every value bound is set, so the other constraints it also ignores
        // never fail).
        let mut sql = String::from(match backend {
            Backend::Sqlite => "INSERT OR IGNORE",
            Backend::Postgres => "INSERT",
        });
        sql.push_str(
            " INTO audit_events (event_id, workspace_id, time_ms, type, result, agent_id, \
             actor_id, resource_kind, resource_id, resource_name, producer_service, surface, \
             operation, trace_id, activity_id, body, ingested_at) VALUES ",
        );
        push_placeholders(&mut sql, backend, chunk.len());
        sql.push_str(match backend {
            Backend::Sqlite => " RETURNING event_id",
            Backend::Postgres => " ON CONFLICT (event_id) DO NOTHING RETURNING event_id",
        });
        let mut query = sqlx::query_as::<_, (String,)>(&sql);
        for c in chunk {
            let e = c.event;
            query = query
                .bind(e.event_id.as_str())
                .bind(e.scope.workspace_id.as_str())
                .bind(c.time_ms)
                .bind(e.event_type.as_str())
                .bind(e.result.as_str())
                .bind(e.scope.agent_id.as_str())
                .bind(e.actor.id.as_str())
                .bind(e.resource.kind.as_str())
                .bind(e.resource.id.as_str())
                .bind(e.resource.name.as_str())
                .bind(e.producer.service.as_str())
                .bind(e.request.surface.as_str())
                .bind(c.operation)
                .bind(e.correlation.trace_id.as_str())
                .bind(e.correlation.activity_id.as_str())
                .bind(c.body)
                .bind(now);
        }
        for (id,) in query.fetch_all(&mut *conn).await? {
            stored.insert(id);
        }
    }
    Ok(stored)
}

/// `(…), (…)` for `rows` rows of [`COLUMNS`] parameters. SQLite gets anonymous `?`: binding a
/// numbered parameter looks its name up in a list as long as the statement's parameters, which
/// made binding a 272-parameter statement quadratic; PostgreSQL needs `$n`.
fn push_placeholders(sql: &mut String, backend: Backend, rows: usize) {
    use std::fmt::Write;
    for i in 0..rows {
        sql.push_str(if i == 0 { "(" } else { ", (" });
        for j in 0..COLUMNS {
            if j > 0 {
                sql.push_str(", ");
            }
            match backend {
                Backend::Sqlite => sql.push('?'),
                Backend::Postgres => {
                    let _ = write!(sql, "${}", i * COLUMNS + j + 1);
                }
            }
        }
        sql.push(')');
    }
}

pub async fn get(
    conn: &mut Conn,
    workspace_id: &str,
    event_id: &str,
) -> Result<Option<AuditEventV1>, StoreError> {
    let row: Option<(String,)> =
        sqlx::query_as("SELECT body FROM audit_events WHERE workspace_id = $1 AND event_id = $2")
            .bind(workspace_id)
            .bind(event_id)
            .fetch_optional(conn)
            .await?;
    row.map(|(body,)| serde_json::from_str(&body).map_err(corrupt))
        .transpose()
}

/// Columns whose index holds only non-empty values (`0015_audit_indexes.sql`).
const PARTIAL_INDEXES: [&str; 2] = ["trace_id", "activity_id"];

/// A column condition of a query.
pub enum Cond {
    Eq(&'static str, String),
    In(&'static str, Vec<String>),
    /// `resource_id = v OR resource_name = v`.
    Resource(String),
    TimeFrom(i64),
    TimeTo(i64),
    /// Keyset: strictly before (time, event id) in descending order.
    Before(i64, String),
}

/// Events of a workspace matching every condition, newest first: (time, id, event).
pub async fn query(
    conn: &mut Conn,
    workspace_id: &str,
    conds: &[Cond],
    limit: i64,
) -> Result<Vec<(i64, String, AuditEventV1)>, StoreError> {
    let (sql, args) = query_sql(workspace_id, conds, limit);
    let rows: Vec<(i64, String, String)> = bound(&sql, args).fetch_all(conn).await?;
    Ok(rows
        .into_iter()
        .map(|(t, id, body)| {
            let event = serde_json::from_str(&body).unwrap_or_else(|e| unreadable(&id, t, &e));
            (t, id, event)
        })
        .collect())
}

/// What a page shows for a stored event that cannot be read: its id and time, and why, so one
/// bad row neither fails the page nor disappears from it.
fn unreadable(event_id: &str, time_ms: i64, error: &serde_json::Error) -> AuditEventV1 {
    tracing::error!(event_id, %error, "A stored audit event cannot be read.");
    let time = chrono::DateTime::from_timestamp_millis(time_ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default();
    let envelope = AuditEventV1 {
        event_id: event_id.to_string(),
        time,
        result: portcullis_shared::audit::results::ERROR.into(),
        ..Default::default()
    };
    let payload = portcullis_shared::audit::catalog::AuditUnreadable {
        error: error.to_string(),
    };
    portcullis_shared::audit::with_payload(envelope, &payload)
}

/// The statement of [`query`] and its arguments.
fn query_sql(workspace_id: &str, conds: &[Cond], limit: i64) -> (String, Vec<SqlArg>) {
    let mut sql =
        String::from("SELECT time_ms, event_id, body FROM audit_events WHERE workspace_id = $1");
    let mut args: Vec<SqlArg> = vec![SqlArg::Text(workspace_id.to_string())];
    let next = |arg: SqlArg, args: &mut Vec<SqlArg>| {
        args.push(arg);
        format!("${}", args.len())
    };
    for c in conds {
        match c {
            Cond::Eq(col, v) => {
                let p = next(SqlArg::Text(v.clone()), &mut args);
                sql.push_str(&format!(" AND {col} = {p}"));
                if PARTIAL_INDEXES.contains(col) {
                    // The index leaves out empty values; saying so lets the planner use it.
                    sql.push_str(&format!(" AND {col} <> ''"));
                }
            }
            Cond::In(col, values) if !values.is_empty() => {
                let ps: Vec<String> = values
                    .iter()
                    .map(|v| next(SqlArg::Text(v.clone()), &mut args))
                    .collect();
                sql.push_str(&format!(" AND {col} IN ({})", ps.join(", ")));
            }
            Cond::In(_, _) => {}
            Cond::Resource(v) => {
                let p = next(SqlArg::Text(v.clone()), &mut args);
                sql.push_str(&format!(" AND (resource_id = {p} OR resource_name = {p})"));
            }
            Cond::TimeFrom(t) => {
                let p = next(SqlArg::Int(*t), &mut args);
                sql.push_str(&format!(" AND time_ms >= {p}"));
            }
            Cond::TimeTo(t) => {
                let p = next(SqlArg::Int(*t), &mut args);
                sql.push_str(&format!(" AND time_ms < {p}"));
            }
            Cond::Before(t, id) => {
                let pt = next(SqlArg::Int(*t), &mut args);
                let pi = next(SqlArg::Text(id.clone()), &mut args);
                sql.push_str(&format!(
                    " AND (time_ms < {pt} OR (time_ms = {pt} AND event_id < {pi}))"
                ));
            }
        }
    }
    let p = next(SqlArg::Int(limit), &mut args);
    sql.push_str(&format!(" ORDER BY time_ms DESC, event_id DESC LIMIT {p}"));
    (sql, args)
}

enum SqlArg {
    Text(String),
    Int(i64),
}

/// `sql` with `args` bound in order, its rows read as `O`.
fn bound<'q, O>(
    sql: &'q str,
    args: Vec<SqlArg>,
) -> sqlx::query::QueryAs<'q, sqlx::Any, O, sqlx::any::AnyArguments<'q>>
where
    O: for<'r> sqlx::FromRow<'r, sqlx::any::AnyRow>,
{
    args.into_iter()
        .fold(sqlx::query_as(sql), |q, arg| match arg {
            SqlArg::Text(t) => q.bind(t),
            SqlArg::Int(i) => q.bind(i),
        })
}

/// Deletes events older than `before` (Unix ms); returns how many.
pub async fn purge(conn: &mut Conn, before: i64) -> Result<u64, StoreError> {
    let done = sqlx::query("DELETE FROM audit_events WHERE time_ms < $1")
        .bind(before)
        .execute(conn)
        .await?;
    Ok(done.rows_affected())
}

/// Refreshes the statistics SQLite's planner chooses among the audit indexes by: without them
/// it reads the workspace's time index for every filter. `analysis_limit` bounds the work to
/// a sample of each index, however large the table. PostgreSQL's autovacuum keeps its own
/// statistics.
pub async fn analyze(conn: &mut Conn, backend: Backend) -> Result<(), StoreError> {
    if backend == Backend::Sqlite {
        sqlx::query("PRAGMA analysis_limit = 1000")
            .execute(&mut *conn)
            .await?;
        sqlx::query("ANALYZE audit_events")
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{SqliteSync, Store};
    use portcullis_shared::seal::Cipher;

    /// 3,000 events of workspace w1, 20 agents; every 100th carries a trace, every 150th an
    /// activity. Then, newest of all, three events of workspace w2 with the trace, the
    /// activity and the agent the test asks w1 for: the indexes on those ids leave the
    /// workspace out, so only the row check keeps them out of w1's answers.
    fn events() -> Vec<AuditEventV1> {
        let mut events: Vec<AuditEventV1> = (0..3000)
            .map(|i| {
                let mut e = AuditEventV1 {
                    event_id: format!("e{i:05}"),
                    event_type: "llm.call".into(),
                    result: "success".into(),
                    ..Default::default()
                };
                e.scope.workspace_id = "w1".into();
                e.scope.agent_id = format!("agent-{}", i % 20);
                if i % 100 == 0 {
                    e.correlation.trace_id = format!("trace-{i}");
                }
                if i % 150 == 0 {
                    e.correlation.activity_id = format!("activity-{i}");
                }
                e
            })
            .collect();
        for i in [2500, 1500, 2987] {
            let mut other = events[i].clone();
            other.event_id = format!("w2-{}", other.event_id);
            other.scope.workspace_id = "w2".into();
            events.push(other);
        }
        events
    }

    async fn plan(store: &Store, conds: &[Cond]) -> String {
        let (sql, args) = query_sql("w1", conds, 50);
        let explain = format!("EXPLAIN QUERY PLAN {sql}");
        let mut conn = store.read().await.unwrap();
        let rows: Vec<(i64, i64, i64, String)> =
            bound(&explain, args).fetch_all(&mut *conn).await.unwrap();
        rows.into_iter().map(|r| r.3).collect::<Vec<_>>().join("; ")
    }

    #[tokio::test]
    async fn filters_find_only_their_workspaces_events_through_their_indexes_once_analyzed() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("t.db").display());
        let store = Store::open(&url, Cipher::from_key(&[7; 32]), SqliteSync::Normal)
            .await
            .unwrap();
        let events: Vec<_> = events()
            .iter()
            .map(|e| crate::audit::Incoming::from_event(e).unwrap())
            .collect();
        let bodies: Vec<_> = events.iter().map(|e| e.body().unwrap()).collect();
        let rows: Vec<Columns<'_>> = (0..)
            .zip(events.iter().zip(&bodies))
            .map(|(t, (incoming, body))| Columns {
                time_ms: 1_000 + t,
                event: &incoming.event,
                operation: "",
                body,
            })
            .collect();
        let mut tx = store.write_unscoped().await.unwrap();
        let stored = insert_many(tx.conn(), Backend::Sqlite, &rows, 0)
            .await
            .unwrap();
        assert_eq!(stored.len(), 3003);
        let again = insert_many(tx.conn(), Backend::Sqlite, &rows[2990..], 0)
            .await
            .unwrap();
        assert!(again.is_empty(), "stored events are not stored again");
        analyze(tx.conn(), Backend::Sqlite).await.unwrap();
        tx.commit().await.unwrap();

        let by_trace = [Cond::Eq("trace_id", "trace-2500".into())];
        let by_activity = [Cond::Eq("activity_id", "activity-1500".into())];
        let by_agent = [Cond::In("agent_id", vec!["agent-7".into()])];
        let mut conn = store.read().await.unwrap();
        let found = query(&mut conn, "w1", &by_trace, 50).await.unwrap();
        assert_eq!(
            found.iter().map(|f| &f.1[..]).collect::<Vec<_>>(),
            ["e02500"]
        );
        let found = query(&mut conn, "w1", &by_activity, 50).await.unwrap();
        assert_eq!(
            found.iter().map(|f| &f.1[..]).collect::<Vec<_>>(),
            ["e01500"]
        );
        let found = query(&mut conn, "w1", &by_agent, 50).await.unwrap();
        assert_eq!(found.len(), 50);
        assert_eq!(found[0].1, "e02987", "newest first");
        assert!(found
            .iter()
            .all(|f| f.2.scope.agent_id == "agent-7" && f.2.scope.workspace_id == "w1"));
        drop(conn);

        assert!(plan(&store, &by_trace).await.contains("audit_trace"));
        assert!(plan(&store, &by_activity).await.contains("audit_activity"));
        assert!(plan(&store, &by_agent).await.contains("audit_agent"));
        assert!(plan(&store, &[]).await.contains("audit_time"));
    }

    #[test]
    fn placeholders_are_anonymous_on_sqlite_and_numbered_on_postgres() {
        let mut sqlite = String::new();
        push_placeholders(&mut sqlite, Backend::Sqlite, 2);
        let row = format!("({})", vec!["?"; COLUMNS].join(", "));
        assert_eq!(sqlite, format!("{row}, {row}"));
        let mut postgres = String::new();
        push_placeholders(&mut postgres, Backend::Postgres, 2);
        assert!(postgres.starts_with("($1, $2, "), "{postgres}");
        assert!(postgres.contains("$17), ($18, "), "{postgres}");
        assert!(postgres.ends_with("$34)"), "{postgres}");
    }
}
