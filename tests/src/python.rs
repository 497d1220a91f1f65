//! Runs the official Python SDKs from the test venv (`PORTCULLIS_PYTHON`, created by
//! `scripts/test`).

use std::path::PathBuf;

use serde_json::Value;

/// The venv's interpreter.
pub fn interpreter() -> PathBuf {
    let path = std::env::var_os("PORTCULLIS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default();
            home.join(".cache/portcullis-venv/bin/python")
        });
    assert!(
        path.exists(),
        "{} not found: run scripts/test (it creates the venv with the OpenAI SDK), or set PORTCULLIS_PYTHON",
        path.display()
    );
    path
}

/// Runs `tests/python/<script>` with arguments and parses the JSON it prints.
pub async fn run(script: &str, args: &[&str]) -> Value {
    run_with_env(script, args, &[]).await
}

/// [`run`] with extra environment variables.
pub async fn run_with_env(script: &str, args: &[&str], env: &[(&str, &str)]) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("python")
        .join(script);
    let output = tokio::process::Command::new(interpreter())
        .arg(path)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .await
        .expect("run python");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{script} failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{script} printed {stdout:?}: {e}"))
}

/// One MCP session with the official Python SDK (`mcp_client.py`): lists the tools at `url`
/// as `key`, then makes the calls in order. Returns the SDK's view: `tools`, `calls`.
pub async fn mcp_session(url: &str, key: &str, calls: &[(&str, Value)]) -> Value {
    let mut args = vec![url.to_string(), key.to_string()];
    for (tool, arguments) in calls {
        args.push(tool.to_string());
        args.push(arguments.to_string());
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    run("mcp_client.py", &refs).await
}
