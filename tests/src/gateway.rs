//! A gateway process, syncing from a test control plane.

use serde_json::json;
use tokio::process::Command;

use crate::controlplane::{ControlPlane, MGMT};
use crate::process::{bin, Spawned};

pub struct GatewayProcess {
    pub url: String,
    pub token: String,
    pub data_dir: tempfile::TempDir,
    control_plane_url: String,
    process: Spawned,
    earlier_logs: String,
    env: Vec<(String, String)>,
}

impl GatewayProcess {
    /// Creates a deployment on the control plane and starts a gateway for it on port 0.
    /// (The deployment's public URL is a placeholder: tests call `url` directly.)
    pub async fn start(cp: &ControlPlane) -> Self {
        Self::start_with(cp, &[]).await
    }

    /// Starts with extra environment (configuration such as `PORTCULLIS_AUDIT`).
    pub async fn start_with(cp: &ControlPlane, env: &[(&str, &str)]) -> Self {
        let data_dir = tempfile::tempdir().expect("temp dir");
        let name = format!("gw-{}", uuid::Uuid::new_v4().simple());
        let reply = cp
            .ok(
                MGMT,
                "CreateDeployment",
                cp.body(json!({"name": name, "public_url": "http://gateway.test"})),
            )
            .await;
        let token = reply["token"].as_str().expect("token").to_string();
        let mut gw = Self {
            url: String::new(),
            token,
            data_dir,
            control_plane_url: cp.url.clone(),
            process: spawn_placeholder(),
            earlier_logs: String::new(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        gw.process = gw.spawn("127.0.0.1:0");
        gw.url = format!("http://{}", gw.process.wait_listening("gateway").await);
        gw.wait_ready().await;
        gw
    }

    /// A gateway whose control plane cannot be reached and that has no snapshot yet: it
    /// listens and answers every call `503 not_ready`.
    pub async fn start_unconfigured() -> Self {
        let mut gw = Self {
            url: String::new(),
            token: portcullis_shared::keys::generate(portcullis_shared::keys::KeyKind::Deployment),
            data_dir: tempfile::tempdir().expect("temp dir"),
            control_plane_url: "http://127.0.0.1:9".into(),
            process: spawn_placeholder(),
            earlier_logs: String::new(),
            env: Vec::new(),
        };
        gw.process = gw.spawn("127.0.0.1:0");
        gw.url = format!("http://{}", gw.process.wait_listening("gateway").await);
        gw
    }

    fn spawn(&self, listen: &str) -> Spawned {
        let mut command = Command::new(bin("portcullis-gateway"));
        command
            .arg("--control-plane-url")
            .arg(&self.control_plane_url)
            .arg("--listen")
            .arg(listen)
            .arg("--data-dir")
            .arg(self.data_dir.path())
            .env("PORTCULLIS_TOKEN", &self.token)
            .envs(crate::process::TEST_ALLOWANCES)
            .env(
                "RUST_LOG",
                "debug,hyper=info,h2=info,pingora=info,reqwest=info",
            )
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        Spawned::spawn(command)
    }

    /// Waits until `/ready` answers 200 (a snapshot is loaded).
    pub async fn wait_ready(&self) {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            if let Ok(r) = reqwest::get(format!("{}/ready", self.url)).await {
                if r.status().as_u16() == 200 {
                    return;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "gateway never became ready:\n{}",
                self.logs()
            );
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
    }

    /// Waits until the gateway holds the control plane's current snapshot (everything written
    /// so far has reached it), by the revision in its `/metrics`.
    pub async fn caught_up(&self, cp: &ControlPlane) {
        let r = cp
            .call_as(
                &self.token,
                "svc.sync.v1.SyncService",
                "GetSnapshot",
                json!({}),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        let want = r.body["revision"].as_u64().expect("snapshot revision");
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let have = match reqwest::get(format!("{}/metrics", self.url)).await {
                Ok(r) => r.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            }
            .lines()
            .find_map(|l| l.strip_prefix("portcullis_gateway_snapshot_revision "))
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap_or(-1);
            if have >= want as i64 {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "gateway never reached revision {want} (has {have}):\n{}",
                self.logs()
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Kills the gateway and starts it again on the same address and data dir.
    pub async fn restart(&mut self) {
        let listen = self.url.trim_start_matches("http://").to_string();
        self.process.kill().await;
        self.process = self.spawn(&listen);
        self.process.wait_listening("gateway").await;
    }

    /// Stops the gateway with SIGTERM (it drains and flushes) and starts it again on the same
    /// address and data dir; it serves its last-known-good snapshot if the control plane is down.
    pub async fn restart_gracefully(&mut self) {
        let listen = self.url.trim_start_matches("http://").to_string();
        self.process.terminate().await;
        self.earlier_logs.push_str(&self.process.logs());
        self.process = self.spawn(&listen);
        self.process.wait_listening("gateway").await;
    }

    /// Everything the gateway logged, across graceful restarts.
    pub fn logs(&self) -> String {
        format!("{}{}", self.earlier_logs, self.process.logs())
    }

    /// `{url}/gateways/{id}`.
    pub fn gateway_url(&self, gateway_id: &str) -> String {
        format!("{}/gateways/{gateway_id}", self.url)
    }

    pub fn pid(&self) -> Option<u32> {
        self.process.child.id()
    }
}

fn spawn_placeholder() -> Spawned {
    let mut command = Command::new("true");
    command.kill_on_drop(true);
    Spawned::spawn(command)
}
