//! The `portcullis` command: the README's quick start against `portcullis up`, and errors.

use std::path::Path;
use std::time::Duration;

use portcullis_tests::process::{bin, Spawned};
use portcullis_tests::{python, Backend, ControlPlane, FakeLlm};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;
use tokio::process::Command;

/// Runs `portcullis` in `dir` with extra environment; returns (exit code, stdout, stderr).
pub(crate) async fn cli(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> (i32, String, String) {
    let mut command = Command::new(bin("portcullis"));
    command
        .current_dir(dir)
        .args(args)
        .env_remove("PORTCULLIS_URL")
        .env_remove("PORTCULLIS_KEY")
        .env_remove("PORTCULLIS_WORKSPACE");
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().await.expect("run portcullis");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// `portcullis up` on port 0 in `dir`; its upstreams (fakes on 127.0.0.1) are private.
fn up(dir: &Path) -> Spawned {
    let mut up = Command::new(bin("portcullis"));
    up.env("PORTCULLIS_ALLOW_PRIVATE_TARGETS", "true");
    up.current_dir(dir).args([
        "up",
        "--control-listen",
        "127.0.0.1:0",
        "--gateway-listen",
        "127.0.0.1:0",
    ]);
    Spawned::spawn(up)
}

/// `portcullis up` says where the admin key is stored on its first start only, and prints the
/// key itself only to a terminal; so does the control plane alone.
/// The CLI run in `dir` with `cp`'s URL and admin key in its environment.
pub(crate) async fn as_admin(
    cp: &ControlPlane,
    dir: &Path,
    args: Vec<&str>,
) -> (i32, String, String) {
    let env = [
        ("PORTCULLIS_URL", cp.url.as_str()),
        ("PORTCULLIS_KEY", cp.key.as_str()),
    ];
    cli(dir, &env, &args).await
}

/// What a first start printed once it said where the admin key is, and the key in `data_dir`.
async fn announced(process: &Spawned, data_dir: &Path) -> (String, String) {
    let mut logs = String::new();
    for _ in 0..400 {
        logs = process.logs();
        if logs.contains("reads it from there") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let key = std::fs::read_to_string(data_dir.join("admin.key")).unwrap();
    (logs, key.trim().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_key_is_printed_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = up(dir.path());
    first.wait_listening("portcullis up").await;
    let (logs, key) = announced(&first, &dir.path().join(".portcullis")).await;
    assert!(key.starts_with("svc_pk_"));
    assert!(
        logs.contains("admin.key") && logs.contains("not a terminal"),
        "it says where the key is stored: {logs}"
    );
    assert_eq!(
        logs.matches(&key).count(),
        0,
        "never printed to output that is not a terminal, never logged: {logs}"
    );
    first.terminate().await;

    let mut again = up(dir.path());
    again.wait_listening("portcullis up").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !again.logs().contains(&key) && !again.logs().contains("stored in"),
        "a later start does not print it: {}",
        again.logs()
    );
    again.terminate().await;

    let cp = ControlPlane::start(Backend::Sqlite).await;
    assert!(
        cp.logs()
            .contains("Admin platform key created and stored in"),
        "{}",
        cp.logs()
    );
    assert!(!cp.logs().contains(&cp.key), "{}", cp.logs());

    // On a terminal (a pseudo-terminal under `script`), the first start shows the key once.
    let tty = tempfile::tempdir().unwrap();
    let data = tty.path().join("data");
    let command = format!(
        "{} --data-dir {} --listen 127.0.0.1:0",
        bin("portcullis-controlplane").display(),
        data.display()
    );
    let mut on_tty = Command::new("script");
    on_tty.args(["-qefc", &command, "/dev/null"]);
    let mut shown = Spawned::spawn(on_tty);
    let (logs, key) = announced(&shown, &data).await;
    assert!(
        logs.contains(&format!("Admin platform key (shown once): {key}")),
        "{logs}"
    );
    shown.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_start_with_portcullis_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut up = up(dir.path());
    up.wait_listening("portcullis up").await;
    let endpoints = written_endpoints(dir.path()).await;
    let url = endpoints["control_url"].as_str().unwrap();
    let env = [("PORTCULLIS_URL", url)];
    let key_mode = std::fs::metadata(dir.path().join(".portcullis/admin.key")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            key_mode.permissions().mode() & 0o777,
            0o600,
            "admin.key is private"
        );
    }

    let fake = FakeLlm::openai().reply("Quick start works.").start().await;
    a_model_and_an_agent_are_added_but_no_local_tool(dir.path(), &env, &fake.base_url()).await;
    let (token, base) =
        a_key_is_issued_with_the_gateways_endpoints(dir.path(), &env, &endpoints).await;

    // The README's example script, with the official OpenAI SDK.
    the_readmes_example_gets_an_answer(&base, &token).await;

    // The calls above are in the audit log: query, get, and a live tail.
    let first = the_calls_are_in_the_audit_log(dir.path(), &env).await;
    a_live_tail_prints_the_next_call(dir.path(), url, &base, &token, &first).await;

    // Quotas, with limits in USD.
    let qid = an_agent_quota_is_set_in_usd(dir.path(), &env).await;
    // A gateway's quotas only.
    gateway_and_workspace_quotas_are_checked(dir.path(), &env, &qid).await;
    let (code, out, err) = cli(dir.path(), &env, &["quota", "delete", &qid]).await;
    assert_eq!(code, 0, "{out}{err}");

    // A second start reuses everything.
    up.kill().await;
    a_second_start_bootstraps_nothing(dir.path()).await;
}

/// The `endpoints.json` that `portcullis up` writes in `dir`, once it is there.
async fn written_endpoints(dir: &Path) -> Value {
    let endpoints_path = dir.join(".portcullis/endpoints.json");
    for _ in 0..200 {
        if endpoints_path.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    serde_json::from_str(&std::fs::read_to_string(&endpoints_path).unwrap()).unwrap()
}

async fn a_model_and_an_agent_are_added_but_no_local_tool(
    dir: &Path,
    env: &[(&str, &str)],
    fake_url: &str,
) {
    let (code, out, err) = cli(
        dir,
        env,
        &[
            "model",
            "add",
            "gpt",
            "--provider",
            "openai_compatible",
            "--model",
            "gpt-4o-mini",
            "--base-url",
            fake_url,
            "--api-key",
            "sk-quickstart-123456",
            "--gateway",
            "default",
        ],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("gpt-4o-mini") && !out.contains("sk-quickstart-123456"),
        "{out}"
    );
    // Local commands as tools are off unless `up` is started with --allow-stdio-tools.
    let (code, out, err) = cli(
        dir,
        env,
        &[
            "tool",
            "add",
            "local",
            "--protocol",
            "stdio",
            "--command",
            "sh",
        ],
    )
    .await;
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains("does not allow stdio"), "{out}{err}");
    let (code, out, err) = cli(
        dir,
        env,
        &[
            "agent",
            "register",
            "support-bot",
            "--gateway",
            "default",
            "--model",
            "gpt",
        ],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
}

/// A key of `support-bot`: its token and the OpenAI base URL it was issued with.
async fn a_key_is_issued_with_the_gateways_endpoints(
    dir: &Path,
    env: &[(&str, &str)],
    endpoints: &Value,
) -> (String, String) {
    let (code, out, err) = cli(dir, env, &["--json", "key", "create", "support-bot", "ci"]).await;
    assert_eq!(code, 0, "{out}{err}");
    let issued: Value = serde_json::from_str(&out).unwrap();
    let base = issued["endpoints"]["openai_base_url"]
        .as_str()
        .expect("endpoints point at the embedded gateway")
        .to_string();
    assert!(base.starts_with(endpoints["gateway_base_url"].as_str().unwrap()));
    (issued["token"].as_str().unwrap().to_string(), base)
}

async fn the_readmes_example_gets_an_answer(base: &str, token: &str) {
    let mut reply = Value::Null;
    for _ in 0..50 {
        reply = python::run("openai_chat.py", &[base, token, "gpt", "plain"]).await;
        if reply["content"].is_string() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(reply["content"], "Quick start works.", "{reply}");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/openai_agent.py");
    let out = Command::new(python::interpreter())
        .arg(example)
        .arg("gpt")
        .env("PORTCULLIS_AGENT_KEY", token)
        .env("PORTCULLIS_OPENAI_BASE_URL", base)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Quick start works."));
}

/// Queries and gets the audited model calls: the newest.
async fn the_calls_are_in_the_audit_log(dir: &Path, env: &[(&str, &str)]) -> Value {
    let mut events = Value::Null;
    for _ in 0..100 {
        let (code, out, err) = cli(
            dir,
            env,
            &[
                "--json",
                "audit",
                "query",
                "--type",
                "model.call",
                "--result",
                "allowed",
            ],
        )
        .await;
        assert_eq!(code, 0, "{out}{err}");
        events = serde_json::from_str(&out).unwrap();
        if events["events"].as_array().is_some_and(|e| e.len() >= 2) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let first = &events["events"][0];
    assert_eq!(first["type"], "model.call", "{events}");
    let id = first["event_id"].as_str().unwrap();
    let (code, out, err) = cli(dir, env, &["audit", "get", id]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(id) && out.contains("model.call") && out.contains("allowed"),
        "{out}"
    );
    let (code, out, _) = cli(dir, env, &["audit", "query", "--since", "1h"]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains("model.call") && out.contains("EVENT ID"),
        "{out}"
    );
    let (code, _, err) = cli(dir, env, &["audit", "query", "--result", "maybe"]).await;
    assert_ne!(code, 0);
    assert!(err.contains("allowed, denied, error"), "{err}");
    first.clone()
}

async fn a_live_tail_prints_the_next_call(
    dir: &Path,
    url: &str,
    base: &str,
    token: &str,
    first: &Value,
) {
    let mut tail = Command::new(bin("portcullis"));
    tail.current_dir(dir)
        .args(["--json", "audit", "tail", "--type", "model.call"])
        .env("PORTCULLIS_URL", url)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let mut tail = tail.spawn().unwrap();
    let mut lines = tokio::io::BufReader::new(tail.stdout.take().unwrap()).lines();
    tokio::time::sleep(Duration::from_millis(300)).await;
    python::run("openai_chat.py", &[base, token, "gpt", "plain"]).await;
    let line = tokio::time::timeout(Duration::from_secs(5), lines.next_line())
        .await
        .expect("the tail prints the new event")
        .unwrap()
        .unwrap();
    let tailed: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(tailed["type"], "model.call");
    assert_ne!(tailed["event_id"], first["event_id"]);
    let _ = tail.kill().await;
}

/// Creates, updates and lists a daily quota of `support-bot`: its id.
async fn an_agent_quota_is_set_in_usd(dir: &Path, env: &[(&str, &str)]) -> String {
    let (code, out, err) = cli(
        dir,
        env,
        &[
            "--json",
            "quota",
            "create",
            "--subject",
            "agent",
            "--agent",
            "support-bot",
            "--limit",
            "2.50",
            "--window",
            "daily",
        ],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let quota: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (
            quota["quota"]["limit_micros"].as_u64(),
            quota["quota"]["window"].as_str()
        ),
        (Some(2_500_000), Some("daily"))
    );
    let qid = quota["quota"]["quota_id"].as_str().unwrap().to_string();
    let (code, out, err) = cli(
        dir,
        env,
        &["quota", "update", &qid, "--limit", "4", "--disable"],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("$4.00") && out.contains("enabled"), "{out}");
    let (code, out, _) = cli(dir, env, &["quota", "list"]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains(&qid) && out.contains("agent ") && out.contains("daily"),
        "{out}"
    );
    qid
}

async fn gateway_and_workspace_quotas_are_checked(dir: &Path, env: &[(&str, &str)], qid: &str) {
    let (code, out, err) = cli(
        dir,
        env,
        &[
            "quota",
            "create",
            "--subject",
            "gateway",
            "--gateway",
            "default",
            "--limit",
            "50",
        ],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = cli(dir, env, &["quota", "list", "--gateway", "default"]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("$50.00") && !out.contains(qid), "{out}");
    let (code, _, err) = cli(
        dir,
        env,
        &["quota", "create", "--subject", "agent", "--limit", "1"],
    )
    .await;
    assert_ne!(code, 0);
    assert!(err.contains("--agent"), "{err}");
    let (code, _, err) = cli(
        dir,
        env,
        &["quota", "create", "--subject", "team", "--limit", "1"],
    )
    .await;
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = cli(
        dir,
        env,
        &["quota", "create", "--subject", "workspace", "--limit", "1"],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = cli(
        dir,
        env,
        &["quota", "create", "--subject", "workspace", "--limit", "1"],
    )
    .await;
    assert_eq!(code, 1);
    assert!(
        err.contains("already_exists") || err.contains("already exists"),
        "{err}"
    );
}

async fn a_second_start_bootstraps_nothing(dir: &Path) {
    let mut again = Command::new(bin("portcullis"));
    again.current_dir(dir).args([
        "up",
        "--control-listen",
        "127.0.0.1:0",
        "--gateway-listen",
        "127.0.0.1:0",
    ]);
    let again = Spawned::spawn(again);
    let mut again = again;
    again.wait_listening("portcullis up").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !again.logs().contains("Bootstrapped"),
        "a restart bootstraps nothing:\n{}",
        again.logs()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_exit_non_zero_with_the_server_message() {
    let cp = ControlPlane::start(Backend::Sqlite).await;
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("PORTCULLIS_URL", cp.url.as_str()),
        ("PORTCULLIS_KEY", cp.key.as_str()),
    ];
    let (code, _, _) = cli(dir.path(), &env, &["gateway", "create", "team"]).await;
    assert_eq!(code, 0);
    let (code, out, err) = cli(dir.path(), &env, &["gateway", "create", "team"]).await;
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains("a gateway named 'team' already exists")
            && err.contains("already_exists")
            && err.contains("409"),
        "{err}"
    );
    let (code, _, err) = cli(dir.path(), &env, &["model", "get", "missing"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("no model named 'missing'"), "{err}");
    let (code, _, err) = cli(
        dir.path(),
        &[("PORTCULLIS_URL", cp.url.as_str())],
        &["identity"],
    )
    .await;
    assert_eq!(code, 1);
    assert!(err.contains("PORTCULLIS_KEY"), "{err}");
    let (code, out, _) = cli(dir.path(), &env, &["--json", "gateway", "list"]).await;
    assert_eq!(code, 0);
    let list: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list["gateways"].as_array().unwrap().len(), 2);
    let (code, out, err) = cli(
        dir.path(),
        &env,
        &["pool", "create", "p", "--member", "nope:2"],
    )
    .await;
    assert_eq!(code, 1, "{out}{err}");
    let (code, out, _) = cli(
        dir.path(),
        &env,
        &["platform-key", "create", "ops", "--role", "viewer"],
    )
    .await;
    assert_eq!(code, 0);
    assert!(out.contains("platform key (shown once): svc_pk_"), "{out}");
}
