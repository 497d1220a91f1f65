//! The `portcullis` command: the README's quick start against `portcullis up`, and errors.

use std::path::Path;
use std::time::Duration;

use portcullis_tests::process::{bin, Spawned};
use portcullis_tests::{python, Backend, ControlPlane, FakeLlm};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;
use tokio::process::Command;

/// Runs `portcullis` in `dir` with extra environment; returns (exit code, stdout, stderr).
async fn cli(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> (i32, String, String) {
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

/// `portcullis up` on port 0 in `dir`.
fn up(dir: &Path) -> Spawned {
    let mut up = Command::new(bin("portcullis"));
    up.current_dir(dir).args([
        "up",
        "--control-listen",
        "127.0.0.1:0",
        "--gateway-listen",
        "127.0.0.1:0",
    ]);
    Spawned::spawn(up)
}

/// `portcullis up` prints the admin key on its first start only, with where it is stored,
/// whether or not its output is a terminal; so does the control plane alone.
/// The CLI run in `dir` with `cp`'s URL and admin key in its environment.
async fn as_admin(cp: &ControlPlane, dir: &Path, args: Vec<&str>) -> (i32, String, String) {
    let env = [
        ("PORTCULLIS_URL", cp.url.as_str()),
        ("PORTCULLIS_KEY", cp.key.as_str()),
    ];
    cli(dir, &env, &args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_key_is_printed_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = up(dir.path());
    first.wait_listening("portcullis up").await;
    let key_path = dir.path().join(".portcullis/admin.key");
    let mut logs = String::new();
    for _ in 0..200 {
        logs = first.logs();
        if logs.contains("portcullis command reads it") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let key = std::fs::read_to_string(&key_path)
        .unwrap()
        .trim()
        .to_string();
    assert!(key.starts_with("svc_pk_"));
    assert!(
        logs.contains(&format!("Admin platform key (shown once): {key}")),
        "{logs}"
    );
    assert!(
        logs.contains("admin.key"),
        "it says where the key is stored"
    );
    assert_eq!(
        logs.matches(&key).count(),
        1,
        "printed once, never logged: {logs}"
    );
    first.terminate().await;

    let mut again = up(dir.path());
    again.wait_listening("portcullis up").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !again.logs().contains(&key) && !again.logs().contains("shown once"),
        "a later start does not print it: {}",
        again.logs()
    );
    again.terminate().await;

    let cp = ControlPlane::start(Backend::Sqlite).await;
    assert_eq!(
        cp.logs()
            .matches(&format!("Admin platform key (shown once): {}", cp.key))
            .count(),
        1,
        "{}",
        cp.logs()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_start_with_portcullis_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut up = up(dir.path());
    up.wait_listening("portcullis up").await;
    let endpoints_path = dir.path().join(".portcullis/endpoints.json");
    for _ in 0..200 {
        if endpoints_path.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let endpoints: Value =
        serde_json::from_str(&std::fs::read_to_string(&endpoints_path).unwrap()).unwrap();
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
    let (code, out, err) = cli(
        dir.path(),
        &env,
        &[
            "model",
            "add",
            "gpt",
            "--provider",
            "openai_compatible",
            "--model",
            "gpt-4o-mini",
            "--base-url",
            &fake.base_url(),
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
    let (code, out, err) = cli(
        dir.path(),
        &env,
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
    let (code, out, err) = cli(
        dir.path(),
        &env,
        &["--json", "key", "create", "support-bot", "ci"],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let issued: Value = serde_json::from_str(&out).unwrap();
    let base = issued["endpoints"]["openai_base_url"]
        .as_str()
        .expect("endpoints point at the embedded gateway")
        .to_string();
    assert!(base.starts_with(endpoints["gateway_base_url"].as_str().unwrap()));

    // The README's example script, with the official OpenAI SDK.
    let token = issued["token"].as_str().unwrap();
    let mut reply = Value::Null;
    for _ in 0..50 {
        reply = python::run("openai_chat.py", &[&base, token, "gpt", "plain"]).await;
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
        .env("PORTCULLIS_OPENAI_BASE_URL", &base)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Quick start works."));

    // The calls above are in the audit log: query, get, and a live tail.
    let mut events = Value::Null;
    for _ in 0..100 {
        let (code, out, err) = cli(
            dir.path(),
            &env,
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
    let (code, out, err) = cli(dir.path(), &env, &["audit", "get", id]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(id) && out.contains("model.call") && out.contains("allowed"),
        "{out}"
    );
    let (code, out, _) = cli(dir.path(), &env, &["audit", "query", "--since", "1h"]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains("model.call") && out.contains("EVENT ID"),
        "{out}"
    );
    let (code, _, err) = cli(dir.path(), &env, &["audit", "query", "--result", "maybe"]).await;
    assert_ne!(code, 0);
    assert!(err.contains("allowed, denied, error"), "{err}");
    let mut tail = Command::new(bin("portcullis"));
    tail.current_dir(dir.path())
        .args(["--json", "audit", "tail", "--type", "model.call"])
        .env("PORTCULLIS_URL", url)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let mut tail = tail.spawn().unwrap();
    let mut lines = tokio::io::BufReader::new(tail.stdout.take().unwrap()).lines();
    tokio::time::sleep(Duration::from_millis(300)).await;
    python::run("openai_chat.py", &[&base, token, "gpt", "plain"]).await;
    let line = tokio::time::timeout(Duration::from_secs(5), lines.next_line())
        .await
        .expect("the tail prints the new event")
        .unwrap()
        .unwrap();
    let tailed: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(tailed["type"], "model.call");
    assert_ne!(tailed["event_id"], first["event_id"]);
    let _ = tail.kill().await;

    // Quotas, with limits in USD.
    let (code, out, err) = cli(
        dir.path(),
        &env,
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
        dir.path(),
        &env,
        &["quota", "update", &qid, "--limit", "4", "--disable"],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("$4.00") && out.contains("enabled"), "{out}");
    let (code, out, _) = cli(dir.path(), &env, &["quota", "list"]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains(&qid) && out.contains("agent ") && out.contains("daily"),
        "{out}"
    );
    // A gateway's quotas only.
    let (code, out, err) = cli(
        dir.path(),
        &env,
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
    let (code, out, err) = cli(dir.path(), &env, &["quota", "list", "--gateway", "default"]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("$50.00") && !out.contains(&qid), "{out}");
    let (code, _, err) = cli(
        dir.path(),
        &env,
        &["quota", "create", "--subject", "agent", "--limit", "1"],
    )
    .await;
    assert_ne!(code, 0);
    assert!(err.contains("--agent"), "{err}");
    let (code, _, err) = cli(
        dir.path(),
        &env,
        &["quota", "create", "--subject", "team", "--limit", "1"],
    )
    .await;
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = cli(
        dir.path(),
        &env,
        &["quota", "create", "--subject", "workspace", "--limit", "1"],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = cli(
        dir.path(),
        &env,
        &["quota", "create", "--subject", "workspace", "--limit", "1"],
    )
    .await;
    assert_eq!(code, 1);
    assert!(
        err.contains("already_exists") || err.contains("already exists"),
        "{err}"
    );
    let (code, out, err) = cli(dir.path(), &env, &["quota", "delete", &qid]).await;
    assert_eq!(code, 0, "{out}{err}");

    // A second start reuses everything.
    up.kill().await;
    let mut again = Command::new(bin("portcullis"));
    again.current_dir(dir.path()).args([
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_commands() {
    let cp = ControlPlane::start(Backend::Sqlite).await;
    let dir = tempfile::tempdir().unwrap();
    let run = |args: Vec<&'static str>| as_admin(&cp, dir.path(), args);
    let (code, out, err) = run(vec![
        "tool",
        "add",
        "docs",
        "--url",
        "http://127.0.0.1:9/mcp",
        "--authorization",
        "Bearer cli-tool-secret",
        "--header",
        "X-Team=blue",
        "--gateway",
        "default",
    ])
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("streamable-http") && !out.contains("cli-tool-secret"),
        "{out}"
    );
    let (code, out, err) = run(vec![
        "tool",
        "header",
        "add",
        "docs",
        "X-Key=secret:Authorization",
    ])
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("X-Team") && out.contains("X-Key"), "{out}");
    let (code, out, _) = run(vec!["tool", "header", "remove", "docs", "X-Team"]).await;
    assert_eq!(code, 0);
    assert!(!out.contains("X-Team"), "{out}");
    let (code, _, err) = run(vec!["tool", "header", "add", "docs", "X-As=actas"]).await;
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = run(vec!["--json", "tool", "get", "docs"]).await;
    assert_eq!(code, 0);
    let tool: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        tool["tool"]["protocol_config"]["url"], "http://127.0.0.1:9/mcp",
        "header edits keep the rest of the stored state"
    );
    assert_eq!(tool["tool"]["gateways"][0]["name"], "default");
    let (code, out, _) = run(vec![
        "tool",
        "block",
        "docs",
        "search",
        "--message",
        "audit",
    ])
    .await;
    assert_eq!(code, 0);
    assert!(out.contains("docs/search: blocked"), "{out}");
    let (code, out, _) = run(vec!["tool", "tools", "docs", "--include-blocked"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("search") && out.contains("blocked"), "{out}");
    let (code, _, err) = run(vec!["tool", "sync", "docs"]).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("shared tools are synced by the gateways"),
        "{err}"
    );
    let (code, _, err) = run(vec!["gateway", "tool-add", "default", "docs", "search"]).await;
    assert_eq!(code, 1, "an undiscovered operation cannot be attached");
    assert!(err.contains("no discovered operation"), "{err}");
    let (code, _, err) = run(vec!["tool", "remove", "docs"]).await;
    assert_eq!(code, 0, "{err}");
}

/// Act-as from the command line: verification providers (the HMAC secret from the
/// environment, never printed), the workspace's floor, and a key bound to a person.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn act_as_commands() {
    let cp = ControlPlane::start(Backend::Sqlite).await;
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("PORTCULLIS_URL", cp.url.as_str()),
        ("PORTCULLIS_KEY", cp.key.as_str()),
    ];
    let secret = "cli-shared-secret-0123456789";
    let with_secret = [env[0], env[1], ("PORTCULLIS_ACTAS_HMAC_SECRET", secret)];
    let (code, out, err) = cli(
        dir.path(),
        &env,
        &[
            "actas-provider",
            "create",
            "corp-idp",
            "--issuer",
            "https://idp.example",
            "--audience",
            "gw",
            "--groups-claim",
            "roles",
        ],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("roles") && out.contains("oidc"), "{out}");
    let (code, out, err) = cli(
        dir.path(),
        &with_secret,
        &["actas-provider", "create", "signer", "--method", "hmac"],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains(secret), "the secret was printed: {out}");
    let (code, out, _) = cli(dir.path(), &env, &["actas-provider", "list"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("corp-idp") && out.contains("signer"), "{out}");
    let (code, _, err) = cli(
        dir.path(),
        &env,
        &["actas-provider", "create", "x", "--method", "saml"],
    )
    .await;
    assert_eq!(code, 2, "clap refuses an unknown method: {err}");

    let (code, out, err) = cli(
        dir.path(),
        &env,
        &["workspace", "update", "--actas-min-method", "oidc"],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let (_, out, _) = cli(dir.path(), &env, &["workspaces"]).await;
    assert!(out.contains("oidc"), "{out}");

    let (code, out, err) = cli(
        dir.path(),
        &env,
        &["agent", "register", "bot", "--actas-method", "bound"],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = cli(
        dir.path(),
        &env,
        &[
            "--json",
            "key",
            "create",
            "bot",
            "carol",
            "--bound-sub",
            "carol",
            "--bound-email",
            "carol@corp.com",
            "--bound-group",
            "eng",
        ],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let key: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(key["key"]["bound_subject"]["groups"][0], "eng", "{key}");
    let (code, _, err) = cli(dir.path(), &env, &["actas-provider", "delete", "signer"]).await;
    assert_eq!(code, 0, "{err}");
}

/// Guards from the command line: config from flags (the kind implied), scope by name, the
/// server's reason for a bad pattern, tests on a sample given inline or on standard input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guard_commands() {
    let cp = ControlPlane::start(Backend::Sqlite).await;
    let dir = tempfile::tempdir().unwrap();
    let run = |args: Vec<&'static str>| as_admin(&cp, dir.path(), args);
    let (code, out, err) = run(vec![
        "guard",
        "create",
        "tickets",
        "--stage",
        "llm_output",
        "--action",
        "redact",
        "--pattern",
        r"TICKET-\d{4}",
        "--gateway",
        "default",
    ])
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("regex") && out.contains(&cp.default_gateway_id),
        "the kind implied, the gateway's name resolved: {out}"
    );
    let (code, out, err) = run(vec![
        "guard",
        "create",
        "digits",
        "--stage",
        "llm_output",
        "--action",
        "block",
        "--pattern",
        r"\d+",
    ])
    .await;
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains("any length") && err.contains("invalid_argument"),
        "{err}"
    );
    let (code, out, err) = run(vec![
        "guard",
        "create",
        "codename",
        "--stage",
        "tool_result",
        "--action",
        "block",
        "--keyword",
        "Falcon",
        "--case-sensitive",
        "--disabled",
    ])
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let (code, _, err) = run(vec![
        "guard",
        "create",
        "x",
        "--stage",
        "llm_output",
        "--pattern",
        "a{2}",
        "--keyword",
        "b",
    ])
    .await;
    assert_eq!(code, 2, "one source of config: {err}");
    let (code, out, _) = run(vec!["guard", "list", "--stage", "tool_result"]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains("codename") && !out.contains("tickets"),
        "{out}"
    );
    let (code, out, _) = run(vec!["--json", "guard", "get", "codename"]).await;
    assert_eq!(code, 0);
    let g: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (&g["guard"]["config"], &g["guard"]["enabled"]),
        (
            &serde_json::json!({"keywords": ["Falcon"], "case_sensitive": true}),
            &Value::Bool(false)
        )
    );
    let (code, out, err) = run(vec![
        "guard",
        "update",
        "tickets",
        "--all-scope",
        "--disable",
    ])
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("everywhere") && out.contains("enabled:"),
        "{out}"
    );
    let (code, out, err) = run(vec![
        "guard",
        "test",
        "tickets",
        "--sample",
        "see TICKET-1234 now",
    ])
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("output: see [REDACTED:regex] now") && out.contains("regex at 4..15"),
        "{out}"
    );
    let mut piped = Command::new(bin("portcullis"));
    piped
        .current_dir(dir.path())
        .args(["guard", "test", "codename", "--sample", "-"])
        .env("PORTCULLIS_URL", &cp.url)
        .env("PORTCULLIS_KEY", &cp.key)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = piped.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stdin, b"Project Falcon ships")
        .await
        .unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("blocked: yes"),
        "{text}"
    );
    let (code, out, _) = run(vec!["guard", "delete", "codename"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("Deleted guard codename."), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_commands() {
    let cp = ControlPlane::start_with(
        Backend::Sqlite,
        &[("PORTCULLIS_ALLOW_PRIVATE_WEBHOOK_TARGETS", "true")],
    )
    .await;
    let receiver = portcullis_tests::receiver::Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let url = receiver.url();
    let (code, out, err) = as_admin(
        &cp,
        dir.path(),
        vec![
            "webhook",
            "subscription",
            "create",
            "ops",
            "--event-type",
            "eventing.test",
            "--endpoint",
            &url,
        ],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("whsec_"), "the secret is shown once: {out}");
    let (code, out, err) = as_admin(
        &cp,
        dir.path(),
        vec![
            "webhook",
            "subscription",
            "create",
            "bad",
            "--event-type",
            "nope",
            "--endpoint",
            &url,
        ],
    )
    .await;
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains("invalid_argument") && err.contains("event_types[0]"),
        "{err}"
    );
    let (code, out, err) = as_admin(
        &cp,
        dir.path(),
        vec!["webhook", "subscription", "test", "ops"],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    receiver
        .wait_for("the test event", |s| s.json()["type"] == "eventing.test")
        .await;
    let (code, out, _) = as_admin(
        &cp,
        dir.path(),
        vec![
            "--json",
            "webhook",
            "delivery",
            "list",
            "--subscription",
            "ops",
        ],
    )
    .await;
    assert_eq!(code, 0);
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        listed["deliveries"].as_array().unwrap().len(),
        1,
        "{listed}"
    );
    let (code, out, err) = as_admin(
        &cp,
        dir.path(),
        vec![
            "--json",
            "webhook",
            "delivery",
            "replay-failed",
            "--since",
            "1h",
        ],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let replayed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(replayed["matched"], 0, "nothing failed: {replayed}");
    let (code, out, _) = as_admin(&cp, dir.path(), vec!["webhook", "providers"]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains("slack") && out.contains("webhook_url"),
        "{out}"
    );
}
