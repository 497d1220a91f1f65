//! Spawning the project's binaries and reading their logs.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Where the built binaries are: `PORTCULLIS_BIN_DIR`, else the profile directory above the
/// test executable (`target/debug/deps/..`).
pub fn bin(name: &str) -> PathBuf {
    let dir = match std::env::var_os("PORTCULLIS_BIN_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let exe = std::env::current_exe().expect("test executable path");
            exe.parent()
                .and_then(|deps| deps.parent())
                .expect("target dir")
                .to_path_buf()
        }
    };
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} not found; build the binaries first: cargo build --workspace --bins",
        path.display()
    );
    path
}

/// What the test deployments allow that a real one does not by default (DESIGN §24): the
/// upstreams here are local commands, and every fake upstream listens on 127.0.0.1. Set
/// before a test's own environment, which may undo it.
pub const TEST_ALLOWANCES: [(&str, &str); 2] = [
    ("PORTCULLIS_ALLOW_STDIO_TOOLS", "true"),
    ("PORTCULLIS_ALLOW_PRIVATE_TARGETS", "true"),
];

/// A child process whose standard output and error are collected line by line.
pub struct Spawned {
    pub child: Child,
    pub log: Arc<Mutex<String>>,
}

impl Spawned {
    pub fn spawn(mut command: Command) -> Self {
        command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(Stdio::null())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("spawn");
        let log = Arc::new(Mutex::new(String::new()));
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        for stream in [
            Box::new(stdout) as Box<dyn tokio::io::AsyncRead + Send + Unpin>,
            Box::new(stderr),
        ] {
            let log = log.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stream).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if std::env::var_os("PORTCULLIS_TEST_ECHO").is_some() {
                        eprintln!("{line}");
                    }
                    let mut log = log.lock().unwrap();
                    log.push_str(&line);
                    log.push('\n');
                }
            });
        }
        Self { child, log }
    }

    pub fn logs(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits for the `listening` line and returns its `addr=` value.
    pub async fn wait_listening(&mut self, what: &str) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(addr) = listening_addr(&self.logs()) {
                return addr;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "{what} exited with {status} before listening:\n{}",
                    self.logs()
                );
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{what} did not start:\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }

    /// Sends SIGTERM and waits (up to 30 s) for the process to finish on its own.
    pub async fn terminate(&mut self) {
        if let Some(pid) = self.child.id() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status()
                .await;
        }
        let exited = tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await;
        assert!(
            exited.is_ok(),
            "the process did not stop within 30 s of SIGTERM:\n{}",
            self.logs()
        );
    }
}

fn listening_addr(log: &str) -> Option<String> {
    let line = log.lines().find(|l| l.contains("listening"))?;
    let start = line.find("addr=")? + "addr=".len();
    let rest = &line[start..];
    let end = rest.find(|c: char| c.is_whitespace()).unwrap_or(rest.len());
    Some(rest[..end].trim_matches('"').to_string())
}

/// Serves `router` on a free loopback port in the background: its address, and the task
/// (aborting it, or dropping the runtime, stops the server).
pub async fn serve(router: axum::Router) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (addr, task)
}
