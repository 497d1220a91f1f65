//! A control-plane process on SQLite or on a throwaway PostgreSQL database.

use std::path::PathBuf;

use serde_json::{json, Value};
use sqlx::Connection;
use tokio::process::Command;

use crate::process::{bin, Spawned};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The PostgreSQL server tests create their databases on.
pub fn postgres_server_url() -> String {
    std::env::var("PORTCULLIS_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_string())
}

pub const MGMT: &str = "svc.mgmt.v1.ManagementService";
pub const AGENTS: &str = "svc.agents.v1.AgentService";
pub const RULES: &str = "svc.rules.v1.RuleService";
pub const SYNC: &str = "svc.sync.v1.SyncService";
pub const EVENTING: &str = "svc.eventing.v1.EventingService";

/// An HTTP reply: status and JSON body (`Null` when the body is not JSON).
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: Value,
    pub text: String,
}

impl Reply {
    pub fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or_default()
    }

    pub fn message(&self) -> &str {
        self.body["message"].as_str().unwrap_or_default()
    }

    /// Asserts a Connect error with this code and HTTP status.
    #[track_caller]
    pub fn expect_error(&self, code: &str, status: u16) -> &Self {
        assert_eq!(
            (self.status, self.code()),
            (status, code),
            "unexpected reply: {}",
            self.text
        );
        self
    }

    /// Asserts a Connect error with one of these codes.
    #[track_caller]
    pub fn expect_error_any(&self, codes: &[&str]) -> &Self {
        assert!(
            self.status >= 400 && codes.contains(&self.code()),
            "unexpected reply: {}",
            self.text
        );
        self
    }

    /// Asserts the error message mentions `needle`.
    #[track_caller]
    pub fn mentions(&self, needle: &str) -> &Self {
        assert!(
            self.message().contains(needle),
            "{:?} does not mention {needle:?}",
            self.message()
        );
        self
    }
}

pub struct ControlPlane {
    pub url: String,
    pub key: String,
    pub workspace_id: String,
    pub default_gateway_id: String,
    pub backend: Backend,
    pub data_dir: tempfile::TempDir,
    database_url: Option<String>,
    pg_database: Option<String>,
    process: Spawned,
    /// Logs of earlier runs of this control plane (before restarts).
    earlier_logs: String,
    env: Vec<(String, String)>,
    http: reqwest::Client,
}

impl ControlPlane {
    pub async fn start(backend: Backend) -> Self {
        Self::start_with(backend, &[]).await
    }

    /// Starts with extra environment (configuration such as `PORTCULLIS_ALLOW_STDIO_TOOLS`).
    pub async fn start_with(backend: Backend, env: &[(&str, &str)]) -> Self {
        let data_dir = tempfile::tempdir().expect("temp dir");
        let (database_url, pg_database) = match backend {
            Backend::Sqlite => (None, None),
            Backend::Postgres => {
                let name = format!("portcullis_test_{}", uuid::Uuid::new_v4().simple());
                let mut admin = sqlx::PgConnection::connect(&format!("{}/postgres", postgres_server_url()))
                    .await
                    .expect("PostgreSQL at PORTCULLIS_TEST_POSTGRES_URL (default 127.0.0.1:5432) must be running");
                sqlx::query(&format!("CREATE DATABASE {name}"))
                    .execute(&mut admin)
                    .await
                    .expect("create db");
                (
                    Some(format!("{}/{name}", postgres_server_url())),
                    Some(name),
                )
            }
        };
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let process = spawn(
            &data_dir.path().to_path_buf(),
            database_url.as_deref(),
            "127.0.0.1:0",
            &env,
        );
        let mut cp = Self {
            url: String::new(),
            key: String::new(),
            workspace_id: String::new(),
            default_gateway_id: String::new(),
            backend,
            data_dir,
            database_url,
            pg_database,
            process,
            earlier_logs: String::new(),
            env,
            http: reqwest::Client::new(),
        };
        cp.await_ready().await;
        cp
    }

    async fn await_ready(&mut self) {
        let addr = self.process.wait_listening("control plane").await;
        self.url = format!("http://{addr}");
        self.key = std::fs::read_to_string(self.data_dir.path().join("admin.key"))
            .expect("admin.key")
            .trim()
            .to_string();
        let identity = self.ok(MGMT, "GetIdentity", json!({})).await;
        self.workspace_id = identity["identity"]["workspace_id"]
            .as_str()
            .unwrap()
            .to_string();
        let gateways = self
            .ok(
                MGMT,
                "ListGateways",
                json!({"workspace_id": self.workspace_id}),
            )
            .await;
        self.default_gateway_id = gateways["gateways"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["is_default"] == true)
            .map(|g| g["gateway_id"].as_str().unwrap().to_string())
            .unwrap_or_default();
    }

    /// A second control plane on the same PostgreSQL database (a replica): its own data dir
    /// with the same master and admin keys, the same configuration. The first one owns the
    /// database and drops it.
    pub async fn replica(&self) -> ControlPlane {
        assert!(
            self.database_url.is_some(),
            "replicas share a PostgreSQL database"
        );
        let data_dir = tempfile::tempdir().expect("temp dir");
        for file in ["master.key", "admin.key"] {
            std::fs::copy(self.data_dir.path().join(file), data_dir.path().join(file))
                .expect("copy key");
        }
        let process = spawn(
            &data_dir.path().to_path_buf(),
            self.database_url.as_deref(),
            "127.0.0.1:0",
            &self.env,
        );
        let mut cp = Self {
            url: String::new(),
            key: String::new(),
            workspace_id: String::new(),
            default_gateway_id: String::new(),
            backend: self.backend,
            data_dir,
            database_url: self.database_url.clone(),
            pg_database: None,
            process,
            earlier_logs: String::new(),
            env: self.env.clone(),
            http: reqwest::Client::new(),
        };
        cp.await_ready().await;
        cp
    }

    /// Stops the process and starts it again on the same address, data dir and database.
    pub async fn restart(&mut self) {
        self.stop().await;
        let listen = self.url.trim_start_matches("http://").to_string();
        self.process = spawn(
            &self.data_dir.path().to_path_buf(),
            self.database_url.as_deref(),
            &listen,
            &self.env,
        );
        self.await_ready().await;
    }

    /// Stops the process (the data stays).
    pub async fn stop(&mut self) {
        self.process.kill().await;
        self.earlier_logs.push_str(&self.process.logs());
    }

    /// Everything the process has logged, across restarts.
    pub fn logs(&self) -> String {
        format!("{}{}", self.earlier_logs, self.process.logs())
    }

    /// POSTs a JSON body to `<service>/<operation>` with the admin key.
    pub async fn call(&self, service: &str, operation: &str, body: Value) -> Reply {
        self.call_as(&self.key.clone(), service, operation, body)
            .await
    }

    /// POSTs with another bearer token.
    pub async fn call_as(&self, token: &str, service: &str, operation: &str, body: Value) -> Reply {
        let request = self
            .http
            .post(format!("{}/{service}/{operation}", self.url))
            .bearer_auth(token)
            .json(&body);
        send(request).await
    }

    /// POSTs raw bytes with the given content type, as the admin.
    pub async fn call_raw(&self, path: &str, content_type: &str, body: Vec<u8>) -> Reply {
        let request = self
            .http
            .post(format!("{}/{path}", self.url))
            .bearer_auth(&self.key)
            .header("content-type", content_type)
            .body(body);
        send(request).await
    }

    pub async fn get(&self, path: &str) -> Reply {
        send(self.http.get(format!("{}/{path}", self.url))).await
    }

    /// Calls and asserts success, returning the body.
    #[track_caller]
    pub fn ok<'a>(
        &'a self,
        service: &'a str,
        operation: &'a str,
        body: Value,
    ) -> impl std::future::Future<Output = Value> + 'a {
        let caller = std::panic::Location::caller();
        async move {
            let reply = self.call(service, operation, body).await;
            assert_eq!(
                reply.status, 200,
                "{service}/{operation} failed (called at {caller}): {}",
                reply.text
            );
            reply.body
        }
    }

    /// A body with this workspace's id merged in.
    pub fn body(&self, fields: Value) -> Value {
        let mut body = json!({"workspace_id": self.workspace_id});
        if let (Some(map), Value::Object(extra)) = (body.as_object_mut(), fields) {
            map.extend(extra);
        }
        body
    }

    /// The store's database URL.
    pub fn database_url(&self) -> String {
        match &self.database_url {
            Some(url) => url.clone(),
            None => format!(
                "sqlite://{}",
                self.data_dir.path().join("portcullis.db").display()
            ),
        }
    }

    /// Runs `sql` (with one text parameter `$1`) on the store and returns the first column
    /// of every row as text, for assertions about what is stored.
    pub async fn db_strings(&self, sql: &str, param: &str) -> Vec<String> {
        use sqlx::Row;
        sqlx::any::install_default_drivers();
        let mut conn = sqlx::AnyConnection::connect(&self.database_url())
            .await
            .unwrap();
        let rows = sqlx::query(sql)
            .bind(param)
            .fetch_all(&mut conn)
            .await
            .unwrap();
        rows.iter()
            .map(|r| r.try_get::<String, _>(0).unwrap_or_default())
            .collect()
    }

    /// Every stored text value of every table, one per line: for "is this secret stored in
    /// clear anywhere" checks.
    pub async fn dump_store(&self) -> String {
        use sqlx::Row;
        sqlx::any::install_default_drivers();
        let mut conn = sqlx::AnyConnection::connect(&self.database_url())
            .await
            .unwrap();
        let mut out = String::new();
        for table in TABLES {
            let rows = sqlx::query(&format!("SELECT * FROM {table}"))
                .fetch_all(&mut conn)
                .await
                .unwrap();
            for row in rows {
                for i in 0..row.columns().len() {
                    if let Ok(s) = row.try_get::<String, _>(i) {
                        out.push_str(&s);
                        out.push('\n');
                    }
                }
            }
        }
        out
    }

    /// The raw bytes of the SQLite files (database and write-ahead log).
    pub fn sqlite_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for name in ["portcullis.db", "portcullis.db-wal"] {
            if let Ok(bytes) = std::fs::read(self.data_dir.path().join(name)) {
                out.extend(bytes);
            }
        }
        out
    }

    pub fn data_path(&self) -> PathBuf {
        self.data_dir.path().to_path_buf()
    }
}

const TABLES: [&str; 21] = [
    "workspaces",
    "platform_keys",
    "deployments",
    "model_connections",
    "credentials",
    "pools",
    "pool_members",
    "gateways",
    "gateway_members",
    "agents",
    "gateway_agent_grants",
    "agent_keys",
    "rule_bundles",
    "tool_connections",
    "tool_catalog",
    "audit_events",
    "webhook_destinations",
    "webhook_subscriptions",
    "webhook_outbox",
    "webhook_deliveries",
    "webhook_attempts",
];

fn spawn(
    data_dir: &PathBuf,
    database_url: Option<&str>,
    listen: &str,
    env: &[(String, String)],
) -> Spawned {
    let mut command = Command::new(bin("portcullis-controlplane"));
    command
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--listen")
        .arg(listen);
    if let Some(url) = database_url {
        command.arg("--database-url").arg(url);
    }
    command
        .env_remove("PORTCULLIS_MASTER_KEY")
        .envs(crate::process::TEST_ALLOWANCES)
        .env("RUST_LOG", "debug,sqlx=warn,hyper=info,h2=info")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    Spawned::spawn(command)
}

async fn send(request: reqwest::RequestBuilder) -> Reply {
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Reply { status, body, text }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        let _ = self.process.child.start_kill();
        if let Some(name) = self.pg_database.take() {
            // Drop the throwaway database outside the test's runtime.
            let _ = std::thread::spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    return;
                };
                rt.block_on(async move {
                    if let Ok(mut admin) =
                        sqlx::PgConnection::connect(&format!("{}/postgres", postgres_server_url()))
                            .await
                    {
                        let _ =
                            sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                                .execute(&mut admin)
                                .await;
                    }
                });
            })
            .join();
        }
    }
}
