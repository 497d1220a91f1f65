//! `@modelcontextprotocol/server-everything` from npm, as the tests run it: over Streamable
//! HTTP on a loopback port (a preload forces loopback and prints the port), or its stdio
//! command line for a stdio tool connection. `scripts/test` installs it in
//! `PORTCULLIS_NPM_DIR` (default `~/.cache/portcullis-npm`).

use std::path::PathBuf;

use tokio::process::Command;

use crate::process::Spawned;

pub fn npm_dir() -> PathBuf {
    std::env::var_os("PORTCULLIS_NPM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default()
                .join(".cache/portcullis-npm")
        })
}

/// The server's entry point.
pub fn entry() -> PathBuf {
    let path = npm_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        path.exists(),
        "{} not found: run scripts/test (it installs the npm package)",
        path.display()
    );
    path
}

fn preload() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("node/loopback.mjs")
}

pub struct Everything {
    pub url: String,
    _process: Spawned,
}

impl Everything {
    /// Starts the Streamable HTTP server on a free loopback port.
    pub async fn http() -> Self {
        let mut command = Command::new("node");
        command
            .arg("--import")
            .arg(preload())
            .arg(entry())
            .arg("streamableHttp")
            .env("PORT", "0");
        let mut process = Spawned::spawn(command);
        let addr = process.wait_listening("server-everything").await;
        Self {
            url: format!("http://{addr}/mcp"),
            _process: process,
        }
    }

    /// The stdio command and arguments for a tool connection.
    pub fn stdio_command() -> (String, Vec<String>) {
        (
            "node".to_string(),
            vec![entry().display().to_string(), "stdio".to_string()],
        )
    }
}
