//! The egress policy (DESIGN §24) end to end: a client metadata document at a loopback,
//! private or link-local address is refused before anything connects, and every failure
//! reads the same to the unauthenticated caller (no upstream status or text); document
//! fetches are budgeted per client address; an upstream model that redirects is not
//! followed, so neither its credential nor the prompt reaches the other host; a configured
//! target at an address the policy refuses is `invalid_argument` when it is given.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::routing::{get, post};
use portcullis_tests::{Backend, ControlPlane, GatewayProcess};
use serde_json::json;
use tokio::io::AsyncReadExt;

use crate::world::{bot_calling_gpt_at, http};

/// A listener that counts connections and keeps what they send.
struct Sink {
    addr: std::net::SocketAddr,
    connections: Arc<AtomicUsize>,
    received: Arc<std::sync::Mutex<Vec<u8>>>,
}

impl Sink {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let received = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (count, keep) = (connections.clone(), received.clone());
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let keep = keep.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = socket.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        keep.lock().unwrap().extend_from_slice(&buf[..n]);
                    }
                });
            }
        });
        Self {
            addr,
            connections,
            received,
        }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// Serves `app` on a free local port; its base URL.
async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

/// `/oauth2/authorize` with `client_id`: the status and the page.
async fn authorize(cp: &ControlPlane, client_id: &str) -> (u16, String) {
    let mut url = url::Url::parse(&format!("{}/oauth2/authorize", cp.url)).unwrap();
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", client_id)
        .append_pair("redirect_uri", "http://127.0.0.1:9/callback")
        .append_pair("code_challenge", &"a".repeat(43))
        .append_pair("code_challenge_method", "S256");
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = client.get(url).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// The failure page with the URL taken out: the same whatever went wrong.
fn generic(page: &str, client_id: &str) -> String {
    page.replace(client_id, "<client_id>")
        .replace(&client_id.replace('&', "&amp;"), "<client_id>")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_documents_at_private_addresses_are_refused_before_connecting() {
    let strict = [("PORTCULLIS_ALLOW_PRIVATE_TARGETS", "false")];
    let cp = ControlPlane::start_with(Backend::Sqlite, &strict).await;
    let sink = Sink::start().await;
    let port = sink.addr.port();
    let mut pages = Vec::new();
    for client_id in [
        format!("http://127.0.0.1:{port}/client.json"),
        format!("http://localhost:{port}/client.json"),
        format!("http://[::ffff:127.0.0.1]:{port}/client.json"),
    ] {
        let (status, page) = authorize(&cp, &client_id).await;
        assert_eq!(status, 400, "{page}");
        assert!(page.contains("could not be used"), "{page}");
        pages.push(generic(&page, &client_id));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        sink.connections(),
        0,
        "nothing connected to the private address"
    );
    assert!(pages.windows(2).all(|w| w[0] == w[1]), "{pages:?}");
    assert!(cp.logs().contains("loopback or private address"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn targets_the_policy_refuses_are_refused_when_configured() {
    use portcullis_tests::controlplane::{AGENTS, MGMT};
    let strict = [("PORTCULLIS_ALLOW_PRIVATE_TARGETS", "false")];
    let cp = ControlPlane::start_with(Backend::Sqlite, &strict).await;
    let metadata = "http://169.254.169.254/latest/meta-data/";
    let cases = [
        (
            MGMT,
            "CreateLLMModelConnection",
            json!({"name": "m", "provider": "openai_compatible",
            "secret_values": {"api_key": "k"},
            "provider_config": {"model": "x", "base_url": metadata}}),
            "provider_config.base_url",
        ),
        (
            MGMT,
            "CreateMCPServerConnection",
            json!({"name": "t", "protocol": "streamable-http",
            "protocol_config": {"url": "http://10.0.0.7/mcp"}}),
            "protocol_config.url",
        ),
        (
            MGMT,
            "CreateMCPServerConnection",
            json!({"name": "o", "protocol": "streamable-http",
            "auth_method": "oauth", "protocol_config": {"url": "https://mcp.example.com/mcp"},
            "auth_config": {"token_url": "https://[fd00:ec2::254]/token",
                "authorization_url": "https://idp.example.com/authorize"}}),
            "auth_config.token_url",
        ),
        (
            AGENTS,
            "RegisterAgent",
            json!({"name": "a", "actas_method": "oidc",
            "actas_oidc_url": "http://127.0.0.1:9/"}),
            "actas_oidc_url",
        ),
    ];
    for (service, method, body, field) in cases {
        cp.call(service, method, cp.body(body))
            .await
            .expect_error("invalid_argument", 400)
            .mentions(&format!("{field} is refused"));
    }
    let listed = cp
        .ok(MGMT, "ListLLMModelConnections", cp.body(json!({})))
        .await;
    assert!(
        !listed.to_string().contains("169.254"),
        "nothing was stored: {listed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_client_document_tells_the_caller_nothing_of_the_upstream() {
    // Private targets allowed (the test deployments' default): the upstream is reached, but
    // what it answered stays in the log.
    let cp = ControlPlane::start(Backend::Sqlite).await;
    let app = axum::Router::new()
        .route(
            "/missing.json",
            get(|| async { (StatusCode::IM_A_TEAPOT, "upstream-secret-text") }),
        )
        .route("/garbage.json", get(|| async { "upstream-secret-json {" }))
        .route(
            "/large.json",
            get(|| async { format!("{{\"client_id\": \"{}\"}}", "x".repeat(64 * 1024)) }),
        );
    let base = serve(app).await;
    let mut pages = Vec::new();
    for path in ["missing.json", "garbage.json", "large.json"] {
        let client_id = format!("{base}/{path}");
        let (status, page) = authorize(&cp, &client_id).await;
        assert_eq!(status, 400, "{page}");
        for leak in [
            "418",
            "teapot",
            "upstream-secret",
            "expected",
            "line 1",
            "larger",
        ] {
            assert!(!page.contains(leak), "{leak:?} leaked: {page}");
        }
        pages.push(generic(&page, &client_id));
    }
    // Link-local and metadata addresses: refused even though private targets are allowed.
    let (status, page) = authorize(&cp, "https://169.254.169.254/latest/meta-data").await;
    assert_eq!(status, 400, "{page}");
    pages.push(generic(&page, "https://169.254.169.254/latest/meta-data"));
    assert!(pages.windows(2).all(|w| w[0] == w[1]), "{pages:#?}");
    let logs = cp.logs();
    assert!(logs.contains("418"), "the detail is logged");
    assert!(logs.contains("link-local or cloud metadata"), "{logs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_document_fetches_are_limited_per_client_address() {
    let cp = ControlPlane::start(Backend::Sqlite).await;
    let fetched = Arc::new(AtomicUsize::new(0));
    let counter = fetched.clone();
    let app = axum::Router::new().route(
        "/{name}",
        get(move || {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                StatusCode::NOT_FOUND
            }
        }),
    );
    let base = serve(app).await;
    let mut statuses = Vec::new();
    for i in 0..8 {
        let (status, _) = authorize(&cp, &format!("{base}/c{i}.json")).await;
        statuses.push(status);
    }
    assert_eq!(statuses, [400, 400, 400, 400, 400, 429, 429, 429]);
    assert_eq!(
        fetched.load(Ordering::SeqCst),
        5,
        "refused requests fetch nothing"
    );
    let (status, page) = authorize(&cp, &format!("{base}/again.json")).await;
    assert_eq!(status, 429);
    assert!(page.contains("too many"), "{page}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_redirect_is_not_followed() {
    let cp = ControlPlane::start(Backend::Sqlite).await;
    let elsewhere = Sink::start().await;
    let location = format!("http://{}/v1/chat/completions", elsewhere.addr);
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        post(move || {
            let location = location.clone();
            async move { (StatusCode::TEMPORARY_REDIRECT, [("location", location)]) }
        }),
    );
    let base = serve(app).await;
    let (gateway_id, key) = bot_calling_gpt_at(&cp, &format!("{base}/v1")).await;
    let gw = GatewayProcess::start(&cp).await;
    let body = json!({"model": "gpt",
        "messages": [{"role": "user", "content": "the-secret-prompt"}]});
    let reply = http(
        reqwest::Client::new()
            .post(format!(
                "{}/v1/chat/completions",
                gw.gateway_url(&gateway_id)
            ))
            .bearer_auth(&key)
            .json(&body),
    )
    .await;
    assert!(reply.status >= 500, "{} {}", reply.status, reply.text);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(elsewhere.connections(), 0, "the redirect was followed");
    let received = String::from_utf8_lossy(&elsewhere.received.lock().unwrap()).to_string();
    assert!(!received.contains("the-secret-prompt"));
}
