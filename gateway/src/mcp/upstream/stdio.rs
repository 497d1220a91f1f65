//! A stdio session: the gateway runs the connection's command and speaks newline-delimited
//! JSON-RPC on its standard input and output. The process lives as long as the session; one
//! that exits is started again on the next call.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
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

/// The search path a tool's command gets unless its connection sets `PATH`: none of the
/// gateway's own environment (its token, cloud credentials) reaches the child.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Where the command runs: its connection's `cwd`, or `/`; never inside the gateway's data
/// directory, which holds the last-known-good snapshot.
fn working_dir(cwd: Option<&str>, data_dir: &Path) -> Result<PathBuf, UpstreamError> {
    let dir = PathBuf::from(cwd.unwrap_or("/"));
    let resolved = std::fs::canonicalize(&dir).map_err(|e| {
        UpstreamError::Transport(format!("the tool's working directory {cwd:?}: {e}"))
    })?;
    let data = std::fs::canonicalize(data_dir).unwrap_or_else(|_| data_dir.to_path_buf());
    if resolved.starts_with(&data) {
        return Err(UpstreamError::Transport(
            "a stdio tool may not run inside the gateway's data directory".into(),
        ));
    }
    Ok(resolved)
}

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
        let dir = working_dir(cwd, &gw.config.data_dir)?;
        let mut cmd = Command::new(command);
        cmd.args(args)
            .env_clear()
            .env("PATH", DEFAULT_PATH)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_run_outside_the_data_directory() {
        let data = tempfile::tempdir().unwrap();
        let inside = data.path().join("snapshots");
        std::fs::create_dir(&inside).unwrap();
        assert_eq!(working_dir(None, data.path()).unwrap(), PathBuf::from("/"));
        for dir in [data.path(), inside.as_path()] {
            let err = working_dir(dir.to_str(), data.path()).unwrap_err();
            assert!(err.to_string().contains("data directory"), "{err}");
        }
        let other = tempfile::tempdir().unwrap();
        let dotted = format!("{}/../{}", inside.display(), "snapshots");
        assert!(working_dir(Some(&dotted), data.path()).is_err());
        assert!(working_dir(other.path().to_str(), data.path()).is_ok());
        assert!(working_dir(Some("/no/such/dir"), data.path()).is_err());
    }
}
