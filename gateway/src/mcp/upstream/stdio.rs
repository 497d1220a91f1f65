//! A stdio session: the gateway runs the connection's command and speaks newline-delimited
//! JSON-RPC on its standard input and output. The process lives as long as the session; one
//! that exits is started again on the next call.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::oneshot;

use super::{initialize_params, outcome, UpstreamError, GATEWAY_CLIENT};
use crate::Gateway;

type Pending = Arc<Mutex<HashMap<i64, oneshot::Sender<Value>>>>;

pub struct StdioSession {
    stdin: tokio::sync::Mutex<ChildStdin>,
    pending: Pending,
    next_id: AtomicI64,
    alive: Arc<AtomicBool>,
    /// Killed when the session is dropped.
    _child: Mutex<Child>,
}

impl StdioSession {
    /// Starts the process on the gateway's background runtime and initializes it.
    pub async fn spawn(
        gw: &Arc<Gateway>,
        name: &str,
        command: &str,
        args: &[String],
        env: &[(String, String)],
        cwd: Option<&str>,
    ) -> Result<Self, UpstreamError> {
        let mut cmd = Command::new(command);
        cmd.args(args)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(dir) = cwd {
            cmd.current_dir(dir);
        }
        let name = name.to_string();
        let (tx, rx) = oneshot::channel();
        // Child processes and their readers live on the background runtime, which outlives any
        // one worker's request.
        gw.background.spawn(async move {
            let _ = tx.send(cmd.spawn().map(|child| start(child, name)));
        });
        let session = rx
            .await
            .map_err(|_| UpstreamError::Transport("the gateway is shutting down".into()))?
            .map_err(|e| {
                UpstreamError::Transport(format!("could not start the tool's command: {e}"))
            })??;
        session
            .call(gw, "initialize", initialize_params(GATEWAY_CLIENT))
            .await?;
        session.notify("notifications/initialized").await?;
        Ok(session)
    }

    pub fn alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    async fn write(&self, message: &Value) -> Result<(), UpstreamError> {
        let mut line = message.to_string();
        line.push('\n');
        let mut stdin = self.stdin.lock().await;
        stdin
            .write_all(line.as_bytes())
            .await
            .map_err(|_| UpstreamError::Transport("the tool's process is gone".into()))?;
        stdin
            .flush()
            .await
            .map_err(|_| UpstreamError::Transport("the tool's process is gone".into()))
    }

    async fn notify(&self, method: &str) -> Result<(), UpstreamError> {
        self.write(&json!({"jsonrpc": "2.0", "method": method}))
            .await
    }

    pub async fn call(
        &self,
        gw: &Gateway,
        method: &str,
        params: Value,
    ) -> Result<Value, UpstreamError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, tx);
        if let Err(e) = self
            .write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await
        {
            self.pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
            return Err(e);
        }
        match tokio::time::timeout(gw.config.upstream_timeout(), rx).await {
            Ok(Ok(message)) => outcome(message),
            Ok(Err(_)) => Err(UpstreamError::Transport(
                "the tool's process exited before answering".into(),
            )),
            Err(_) => {
                self.pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&id);
                Err(UpstreamError::Transport(
                    "the tool's process sent no answer in time".into(),
                ))
            }
        }
    }
}

/// Wires up a started child: a reader dispatching responses by id, and its standard error to
/// the log.
fn start(mut child: Child, name: String) -> Result<StdioSession, UpstreamError> {
    let missing = || UpstreamError::Transport("the tool's process has no pipes".into());
    let stdin = child.stdin.take().ok_or_else(missing)?;
    let stdout = child.stdout.take().ok_or_else(missing)?;
    let stderr = child.stderr.take().ok_or_else(missing)?;
    let pending: Pending = Arc::default();
    let alive = Arc::new(AtomicBool::new(true));
    {
        let (pending, alive, name) = (pending.clone(), alive.clone(), name.clone());
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(message) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                let is_response = message.get("result").is_some() || message.get("error").is_some();
                if let (true, Some(id)) = (is_response, message.get("id").and_then(Value::as_i64)) {
                    if let Some(tx) = pending
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&id)
                    {
                        let _ = tx.send(message);
                    }
                }
            }
            alive.store(false, Ordering::Release);
            // Dropping the senders wakes every waiting call with an error.
            pending.lock().unwrap_or_else(|e| e.into_inner()).clear();
            tracing::warn!(tool = %name, "A stdio tool's process ended.");
        });
    }
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!(tool = %name, line = %line, "stdio tool stderr");
        }
    });
    Ok(StdioSession {
        stdin: tokio::sync::Mutex::new(stdin),
        pending,
        next_id: AtomicI64::new(1),
        alive,
        _child: Mutex::new(child),
    })
}
