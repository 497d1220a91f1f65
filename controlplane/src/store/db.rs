//! Connection pool, migrations, write transactions and revision notification.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use portcullis_shared::seal::{Cipher, SealError};
use sqlx::any::AnyPoolOptions;
use sqlx::pool::PoolConnection;
use sqlx::AnyConnection;
use sqlx::{Any, AnyPool, Transaction};
use tokio::sync::{watch, OwnedMutexGuard};

/// A connection queries run on: a pooled read connection or a write transaction.
pub type Conn = AnyConnection;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database URL must start with sqlite: or postgres:, got {0}")]
    UnsupportedUrl(String),
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored secret could not be read: {0}")]
    Seal(#[from] SealError),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// A task the write depended on is gone (the service is stopping).
    #[error("{0}")]
    Batch(String),
}

impl StoreError {
    /// A unique constraint refused the write: the resource already exists.
    pub fn is_unique_violation(&self) -> bool {
        match self {
            StoreError::Db(sqlx::Error::Database(e)) => e.is_unique_violation(),
            _ => false,
        }
    }

    /// The database could not be reached or is overloaded.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            StoreError::Db(
                sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::PoolClosed
            )
        )
    }
}

pub fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(what.to_string())
}

/// Current time in Unix milliseconds.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Waiters for workspace revisions, woken when a write commits.
#[derive(Default)]
struct Revisions {
    senders: Mutex<HashMap<String, watch::Sender<u64>>>,
}

impl Revisions {
    fn sender(&self, workspace_id: &str) -> watch::Sender<u64> {
        let mut map = self.senders.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(workspace_id.to_string())
            .or_insert_with(|| watch::channel(0).0)
            .clone()
    }
}

/// How SQLite syncs commits to disk (`PRAGMA synchronous`, in WAL mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SqliteSync {
    /// Every commit is synced: nothing acknowledged is lost even to a power cut.
    Full,
    /// The log is synced at checkpoints: nothing acknowledged is lost when the process dies;
    /// a power cut or OS crash can roll back the last commits.
    #[default]
    Normal,
}

impl SqliteSync {
    fn pragma(self) -> &'static str {
        match self {
            SqliteSync::Full => "PRAGMA synchronous = FULL",
            SqliteSync::Normal => "PRAGMA synchronous = NORMAL",
        }
    }
}

#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    /// SQLite allows one writer; serializing writers here avoids busy-lock upgrades.
    write_lock: Option<Arc<tokio::sync::Mutex<()>>>,
    cipher: Cipher,
    revisions: Arc<Revisions>,
}

impl Store {
    /// Connects and migrates. `url` is `sqlite://path?mode=rwc` or `postgres://…`; `sync` is
    /// for SQLite.
    pub async fn open(url: &str, cipher: Cipher, sync: SqliteSync) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let backend = if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Backend::Postgres
        } else {
            let scheme = url.split(':').next().unwrap_or_default();
            return Err(StoreError::UnsupportedUrl(format!("{scheme}:…")));
        };
        let max = if backend == Backend::Sqlite { 8 } else { 16 };
        let sqlite = backend == Backend::Sqlite;
        let pool = AnyPoolOptions::new()
            .max_connections(max)
            .acquire_timeout(Duration::from_secs(10))
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if sqlite {
                        sqlx::query(sync.pragma()).execute(conn).await?;
                    }
                    Ok(())
                })
            })
            .connect(url)
            .await?;
        if backend == Backend::Sqlite {
            sqlx::query("PRAGMA journal_mode = WAL")
                .execute(&pool)
                .await?;
        }
        super::migrations::migrator(backend)
            .await?
            .run(&pool)
            .await?;
        let write_lock =
            (backend == Backend::Sqlite).then(|| Arc::new(tokio::sync::Mutex::new(())));
        Ok(Self {
            pool,
            backend,
            write_lock,
            cipher,
            revisions: Arc::default(),
        })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    pub fn cipher(&self) -> &Cipher {
        &self.cipher
    }

    /// A connection for reads.
    pub async fn read(&self) -> Result<PoolConnection<Any>, StoreError> {
        Ok(self.pool.acquire().await?)
    }

    /// A read-only transaction that sees one consistent state (for snapshots).
    pub async fn snapshot_tx(&self) -> Result<Transaction<'static, Any>, StoreError> {
        let mut tx = self.pool.begin().await?;
        if self.backend == Backend::Postgres {
            sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                .execute(&mut *tx)
                .await?;
        }
        Ok(tx)
    }

    /// Whether the database answers.
    pub async fn ping(&self) -> bool {
        sqlx::query("SELECT 1").execute(&self.pool).await.is_ok()
    }

    /// Begins a write to one workspace. Commit bumps its revision.
    pub async fn write(&self, workspace_id: &str) -> Result<WriteTx, StoreError> {
        let guard = match &self.write_lock {
            Some(lock) => Some(lock.clone().lock_owned().await),
            None => None,
        };
        let tx = self.pool.begin().await?;
        Ok(WriteTx {
            tx,
            _guard: guard,
            workspace_id: workspace_id.to_string(),
            revisions: self.revisions.clone(),
        })
    }

    /// Begins a write that touches no workspace's snapshot (bootstrap).
    pub async fn write_unscoped(&self) -> Result<WriteTx, StoreError> {
        self.write("").await
    }

    /// A receiver that changes when the workspace's revision is bumped in this process.
    pub fn watch_revision(&self, workspace_id: &str) -> watch::Receiver<u64> {
        self.revisions.sender(workspace_id).subscribe()
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

pub struct WriteTx {
    tx: Transaction<'static, Any>,
    _guard: Option<OwnedMutexGuard<()>>,
    workspace_id: String,
    revisions: Arc<Revisions>,
}

impl WriteTx {
    pub fn conn(&mut self) -> &mut Conn {
        &mut self.tx
    }

    /// Bumps the workspace revision, commits, and wakes waiting gateways.
    pub async fn commit(mut self) -> Result<u64, StoreError> {
        let mut revision = 0;
        if !self.workspace_id.is_empty() {
            let row: (i64,) = sqlx::query_as(
                "UPDATE workspaces SET revision = revision + 1 WHERE id = $1 RETURNING revision",
            )
            .bind(&self.workspace_id)
            .fetch_one(&mut *self.tx)
            .await?;
            revision = u64::try_from(row.0).map_err(corrupt)?;
        }
        self.tx.commit().await?;
        if !self.workspace_id.is_empty() {
            self.revisions
                .sender(&self.workspace_id)
                .send_replace(revision);
        }
        Ok(revision)
    }
}

/// JSON text column helpers.
pub fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(corrupt)
}

pub fn from_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(corrupt)
}
