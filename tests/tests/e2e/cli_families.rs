//! The `portcullis` command's resource families against a real control plane: tools,
//! act-as, guards and webhooks.

use std::path::Path;

use portcullis_tests::process::bin;
use portcullis_tests::{Backend, ControlPlane};
use serde_json::Value;
use tokio::process::Command;

use crate::cli::{as_admin, cli};

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
    act_as_providers_are_created_with_an_unprinted_secret(dir.path(), &env).await;

    let (code, out, err) = cli(
        dir.path(),
        &env,
        &["workspace", "update", "--actas-min-method", "oidc"],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let (_, out, _) = cli(dir.path(), &env, &["workspaces"]).await;
    assert!(out.contains("oidc"), "{out}");

    a_key_is_bound_to_a_person(dir.path(), &env).await;
    let (code, _, err) = cli(dir.path(), &env, &["actas-provider", "delete", "signer"]).await;
    assert_eq!(code, 0, "{err}");
}

async fn act_as_providers_are_created_with_an_unprinted_secret(
    dir: &Path,
    env: &[(&str, &str); 2],
) {
    let secret = "cli-shared-secret-0123456789";
    let with_secret = [env[0], env[1], ("PORTCULLIS_ACTAS_HMAC_SECRET", secret)];
    let (code, out, err) = cli(
        dir,
        env,
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
        dir,
        &with_secret,
        &["actas-provider", "create", "signer", "--method", "hmac"],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains(secret), "the secret was printed: {out}");
    let (code, out, _) = cli(dir, env, &["actas-provider", "list"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("corp-idp") && out.contains("signer"), "{out}");
    let (code, _, err) = cli(
        dir,
        env,
        &["actas-provider", "create", "x", "--method", "saml"],
    )
    .await;
    assert_eq!(code, 2, "clap refuses an unknown method: {err}");
}

async fn a_key_is_bound_to_a_person(dir: &Path, env: &[(&str, &str)]) {
    let (code, out, err) = cli(
        dir,
        env,
        &["agent", "register", "bot", "--actas-method", "bound"],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = cli(
        dir,
        env,
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
}

/// Guards from the command line: config from flags (the kind implied), scope by name, the
/// server's reason for a bad pattern, tests on a sample given inline or on standard input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guard_commands() {
    let cp = ControlPlane::start(Backend::Sqlite).await;
    let dir = tempfile::tempdir().unwrap();
    guards_are_created_from_flags_or_refused(&cp, dir.path()).await;
    guards_are_listed_read_and_updated(&cp, dir.path()).await;
    guards_test_samples_inline_and_on_standard_input(&cp, dir.path()).await;
    let (code, out, _) = as_admin(&cp, dir.path(), vec!["guard", "delete", "codename"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("Deleted guard codename."), "{out}");
}

async fn guards_are_created_from_flags_or_refused(cp: &ControlPlane, dir: &Path) {
    let run = |args: Vec<&'static str>| as_admin(cp, dir, args);
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
}

async fn guards_are_listed_read_and_updated(cp: &ControlPlane, dir: &Path) {
    let run = |args: Vec<&'static str>| as_admin(cp, dir, args);
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
}

async fn guards_test_samples_inline_and_on_standard_input(cp: &ControlPlane, dir: &Path) {
    let (code, out, err) = as_admin(
        cp,
        dir,
        vec![
            "guard",
            "test",
            "tickets",
            "--sample",
            "see TICKET-1234 now",
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("output: see [REDACTED:regex] now") && out.contains("regex at 4..15"),
        "{out}"
    );
    let mut piped = Command::new(bin("portcullis"));
    piped
        .current_dir(dir)
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
    a_subscription_is_created_and_a_bad_one_refused(&cp, dir.path(), &url).await;
    a_test_event_is_delivered_and_listed(&cp, dir.path(), &receiver).await;
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

async fn a_subscription_is_created_and_a_bad_one_refused(cp: &ControlPlane, dir: &Path, url: &str) {
    let (code, out, err) = as_admin(
        cp,
        dir,
        vec![
            "webhook",
            "subscription",
            "create",
            "ops",
            "--event-type",
            "eventing.test",
            "--endpoint",
            url,
        ],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("whsec_"), "the secret is shown once: {out}");
    let (code, out, err) = as_admin(
        cp,
        dir,
        vec![
            "webhook",
            "subscription",
            "create",
            "bad",
            "--event-type",
            "nope",
            "--endpoint",
            url,
        ],
    )
    .await;
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains("invalid_argument") && err.contains("event_types[0]"),
        "{err}"
    );
}

async fn a_test_event_is_delivered_and_listed(
    cp: &ControlPlane,
    dir: &Path,
    receiver: &portcullis_tests::receiver::Receiver,
) {
    let (code, out, err) = as_admin(cp, dir, vec!["webhook", "subscription", "test", "ops"]).await;
    assert_eq!(code, 0, "{out}{err}");
    receiver
        .wait_for("the test event", |s| s.json()["type"] == "eventing.test")
        .await;
    let (code, out, _) = as_admin(
        cp,
        dir,
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_quota_commands() {
    let cp = ControlPlane::start(Backend::Sqlite).await;
    let dir = tempfile::tempdir().unwrap();
    let ok = |(code, out, err): (i32, String, String)| {
        assert_eq!(code, 0, "{out}{err}");
        out
    };
    let set = ok(as_admin(
        &cp,
        dir.path(),
        vec![
            "--json", "gateway", "quota", "set", "default", "--limit", "12.50", "--window", "daily",
        ],
    )
    .await);
    let quota: Value = serde_json::from_str(&set).unwrap();
    assert_eq!(quota["quota"]["limit_micros"], 12_500_000);
    assert_eq!(quota["quota"]["subject_type"], "gateway");
    let id = quota["quota"]["quota_id"].as_str().unwrap();
    let updated = ok(as_admin(
        &cp,
        dir.path(),
        vec!["gateway", "quota", "update", id, "--limit", "20"],
    )
    .await);
    assert!(updated.contains("$20.00"), "{updated}");
    let listed = ok(as_admin(&cp, dir.path(), vec!["gateway", "quota", "list", "default"]).await);
    assert!(listed.contains(id) && listed.contains("daily"), "{listed}");
    // A quota of another subject is refused by the gateway variants.
    let ws = ok(as_admin(
        &cp,
        dir.path(),
        vec![
            "--json",
            "quota",
            "create",
            "--subject",
            "workspace",
            "--limit",
            "1",
        ],
    )
    .await);
    let ws: Value = serde_json::from_str(&ws).unwrap();
    let ws_id = ws["quota"]["quota_id"].as_str().unwrap();
    let (code, _, err) = as_admin(&cp, dir.path(), vec!["gateway", "quota", "remove", ws_id]).await;
    assert_ne!(code, 0);
    assert!(err.contains("not a gateway quota"), "{err}");
    ok(as_admin(&cp, dir.path(), vec!["gateway", "quota", "remove", id]).await);
    let listed = ok(as_admin(&cp, dir.path(), vec!["gateway", "quota", "list"]).await);
    assert!(!listed.contains(id), "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_summarises_and_completions_need_no_server() {
    let cp = ControlPlane::start(Backend::Sqlite).await;
    let dir = tempfile::tempdir().unwrap();
    let ok = |(code, out, err): (i32, String, String)| {
        assert_eq!(code, 0, "{out}{err}");
        out
    };
    ok(as_admin(&cp, dir.path(), vec!["agent", "register", "bot"]).await);
    ok(as_admin(&cp, dir.path(), vec!["agent", "register", "old"]).await);
    ok(as_admin(&cp, dir.path(), vec!["agent", "suspend", "old"]).await);
    ok(as_admin(&cp, dir.path(), vec!["gateway", "create", "edge"]).await);
    ok(as_admin(
        &cp,
        dir.path(),
        vec!["gateway", "state", "edge", "disabled"],
    )
    .await);
    let out = ok(as_admin(&cp, dir.path(), vec!["--json", "status"]).await);
    let s: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(s["workspace"]["id"], cp.workspace_id.as_str());
    assert_eq!(s["key"]["role"], "admin");
    assert_eq!(
        s["gateways"],
        serde_json::json!({"active": 1, "disabled": 1})
    );
    assert_eq!(
        s["agents"],
        serde_json::json!({"provisioned": 1, "suspended": 1}),
        "registered without a key, an agent is provisioned"
    );
    assert_eq!(
        (s["models"].as_u64(), s["tools"].as_u64()),
        (Some(0), Some(0))
    );
    let text = ok(as_admin(&cp, dir.path(), vec!["status"]).await);
    assert!(
        text.contains("1 active, 1 disabled") && text.contains("1 suspended"),
        "{text}"
    );

    // No URL, no key: completions are generated offline.
    let (code, out, err) = cli(dir.path(), &[], &["completions", "bash"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("_portcullis") && out.contains("oauth-connect"),
        "{out}"
    );
}
