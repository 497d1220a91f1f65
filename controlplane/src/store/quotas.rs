//! LLM spend quotas.

use super::db::{Conn, StoreError};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct QuotaRow {
    pub id: String,
    pub workspace_id: String,
    pub subject_type: String,
    /// Empty when the subject has no id (`act_as`).
    pub subject_id: String,
    /// Empty unless `act_as`.
    pub subject_key: String,
    /// Empty unless a model quota is scoped to a pool.
    pub pool_id: String,
    pub per_caller: i64,
    pub quota_window: String,
    pub limit_micros: i64,
    pub name: String,
    pub enabled: i64,
    pub scope: String,
    pub created_at: i64,
    pub updated_at: i64,
}

pub async fn insert(conn: &mut Conn, row: &QuotaRow) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO llm_quotas (id, workspace_id, subject_type, subject_id, subject_key, pool_id, \
         per_caller, quota_window, limit_micros, name, enabled, scope, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
    )
    .bind(&row.id)
    .bind(&row.workspace_id)
    .bind(&row.subject_type)
    .bind(&row.subject_id)
    .bind(&row.subject_key)
    .bind(&row.pool_id)
    .bind(row.per_caller)
    .bind(&row.quota_window)
    .bind(row.limit_micros)
    .bind(&row.name)
    .bind(row.enabled)
    .bind(&row.scope)
    .bind(row.created_at)
    .bind(row.updated_at)
    .execute(conn)
    .await?;
    Ok(())
}

/// Writes the mutable fields (name, limit, window, enabled).
pub async fn update(conn: &mut Conn, row: &QuotaRow) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE llm_quotas SET name = $1, limit_micros = $2, quota_window = $3, enabled = $4, \
         updated_at = $5 WHERE id = $6 AND workspace_id = $7",
    )
    .bind(&row.name)
    .bind(row.limit_micros)
    .bind(&row.quota_window)
    .bind(row.enabled)
    .bind(row.updated_at)
    .bind(&row.id)
    .bind(&row.workspace_id)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn get(
    conn: &mut Conn,
    workspace_id: &str,
    id: &str,
) -> Result<Option<QuotaRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM llm_quotas WHERE workspace_id = $1 AND id = $2")
            .bind(workspace_id)
            .bind(id)
            .fetch_optional(conn)
            .await?,
    )
}

pub async fn list(conn: &mut Conn, workspace_id: &str) -> Result<Vec<QuotaRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM llm_quotas WHERE workspace_id = $1 ORDER BY created_at, id")
            .bind(workspace_id)
            .fetch_all(conn)
            .await?,
    )
}

/// The quota holding this identity and window, if any (other than `except`).
pub async fn find_identity(
    conn: &mut Conn,
    row: &QuotaRow,
) -> Result<Option<QuotaRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT * FROM llm_quotas WHERE workspace_id = $1 AND subject_type = $2 AND subject_id = $3 \
         AND subject_key = $4 AND pool_id = $5 AND per_caller = $6 AND quota_window = $7 AND id <> $8",
    )
    .bind(&row.workspace_id)
    .bind(&row.subject_type)
    .bind(&row.subject_id)
    .bind(&row.subject_key)
    .bind(&row.pool_id)
    .bind(row.per_caller)
    .bind(&row.quota_window)
    .bind(&row.id)
    .fetch_optional(conn)
    .await?)
}

pub async fn delete(conn: &mut Conn, workspace_id: &str, id: &str) -> Result<bool, StoreError> {
    sqlx::query("DELETE FROM quota_spend WHERE workspace_id = $1 AND quota_id = $2")
        .bind(workspace_id)
        .bind(id)
        .execute(&mut *conn)
        .await?;
    let done = sqlx::query("DELETE FROM llm_quotas WHERE workspace_id = $1 AND id = $2")
        .bind(workspace_id)
        .bind(id)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() > 0)
}

/// Removes the quotas of a deleted agent, pool, model or gateway (as subject or pool scope).
pub async fn delete_for(conn: &mut Conn, workspace_id: &str, id: &str) -> Result<u64, StoreError> {
    sqlx::query(
        "DELETE FROM quota_spend WHERE quota_id IN (SELECT id FROM llm_quotas \
         WHERE workspace_id = $1 AND (subject_id = $2 OR pool_id = $2))",
    )
    .bind(workspace_id)
    .bind(id)
    .execute(&mut *conn)
    .await?;
    let done = sqlx::query(
        "DELETE FROM llm_quotas WHERE workspace_id = $1 AND (subject_id = $2 OR pool_id = $2)",
    )
    .bind(workspace_id)
    .bind(id)
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

/// Adds charges to the record of spend; a charge for a quota that no longer exists (deleted
/// while its call's event was on the way) is dropped.
pub async fn add_spend(
    conn: &mut Conn,
    workspace_id: &str,
    quota_id: &str,
    day: i64,
    caller: &str,
    micros: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO quota_spend (quota_id, day, caller, workspace_id, spent_micros) \
         SELECT $1, $2, $3, $4, $5 WHERE EXISTS \
         (SELECT 1 FROM llm_quotas WHERE id = $1 AND workspace_id = $4) \
         ON CONFLICT (quota_id, day, caller) DO UPDATE SET spent_micros = \
         CASE WHEN quota_spend.spent_micros > $6 - excluded.spent_micros THEN $6 \
         ELSE quota_spend.spent_micros + excluded.spent_micros END",
    )
    .bind(quota_id)
    .bind(day)
    .bind(caller)
    .bind(workspace_id)
    .bind(micros)
    .bind(SPEND_CEILING)
    .execute(conn)
    .await?;
    Ok(())
}

/// A day's recorded spend stops growing here rather than overflowing (it is far past any
/// limit already).
const SPEND_CEILING: i64 = i64::MAX / 2;

/// The recorded spend of the workspace's quotas per (quota, day, caller), from `from_day` on.
pub async fn spend_since(
    conn: &mut Conn,
    workspace_id: &str,
    from_day: i64,
) -> Result<Vec<(String, i64, String, i64)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT quota_id, day, caller, spent_micros FROM quota_spend \
         WHERE workspace_id = $1 AND day >= $2",
    )
    .bind(workspace_id)
    .bind(from_day)
    .fetch_all(conn)
    .await?)
}

/// Deletes the record of days before `before_day` (no window reaches back that far).
pub async fn purge_spend(conn: &mut Conn, before_day: i64) -> Result<u64, StoreError> {
    let done = sqlx::query("DELETE FROM quota_spend WHERE day < $1")
        .bind(before_day)
        .execute(conn)
        .await?;
    Ok(done.rows_affected())
}

impl QuotaRow {
    /// The quota as the API and the gateways' snapshot carry it.
    pub fn view(&self) -> portcullis_shared::api::quotas::LLMQuota {
        use portcullis_shared::api::quotas::{LLMQuota, QuotaSubject, QuotaWindow};
        let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
        LLMQuota {
            quota_id: self.id.clone(),
            workspace_id: self.workspace_id.clone(),
            subject_type: QuotaSubject::parse(&self.subject_type).unwrap_or_default(),
            subject_id: some(&self.subject_id),
            subject_key: some(&self.subject_key),
            pool_id: some(&self.pool_id),
            limit_micros: u64::try_from(self.limit_micros).unwrap_or(0),
            window: QuotaWindow::parse(&self.quota_window).unwrap_or_default(),
            name: self.name.clone(),
            enabled: self.enabled != 0,
            scope: self.scope.clone(),
            per_caller: self.per_caller != 0,
            created_at: super::ts(self.created_at),
            updated_at: super::ts(self.updated_at),
        }
    }
}
