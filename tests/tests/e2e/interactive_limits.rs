//! Interactive access under abuse (DESIGN §24, issue 38): client registration is bounded in
//! size and rationed per client address; a person's email counts only when their OpenID
//! provider says it verified it, or the provider is trusted to issue only verified emails.

use portcullis_tests::controlplane::AGENTS;
use portcullis_tests::oidc::OidcIssuer;
use portcullis_tests::{Backend, ControlPlane};
use serde_json::{json, Value};

use crate::interactive::{authorize_url, mcp_url, pkce, redirected, started, REDIRECT};

/// `POST /oauth2/register` with `body`: the status, `Retry-After` and the JSON answer.
async fn register(cp: &ControlPlane, body: &Value) -> (u16, String, Value) {
    let r = reqwest::Client::new()
        .post(format!("{}/oauth2/register", cp.url))
        .json(body)
        .send()
        .await
        .unwrap();
    let retry = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (r.status().as_u16(), retry, r.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registrations_are_bounded_in_size_and_rationed_per_address() {
    let cp = ControlPlane::start(Backend::Sqlite).await;
    // Oversized registrations are refused before anything is stored.
    let padded = json!({"redirect_uris": [REDIRECT], "software_statement": "x".repeat(20_000)});
    let (status, _, body) = register(&cp, &padded).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (413, Some("invalid_client_metadata")),
        "{body}"
    );
    let many: Vec<String> = (0..11).map(|i| format!("{REDIRECT}/{i}")).collect();
    let (status, _, body) = register(&cp, &json!({"redirect_uris": many})).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_redirect_uri")),
        "{body}"
    );
    let long = format!("https://app.example/{}", "a".repeat(2000));
    let (status, _, body) = register(&cp, &json!({"redirect_uris": [long]})).await;
    assert_eq!(status, 400, "{body}");
    let named = json!({"redirect_uris": [REDIRECT], "client_name": "n".repeat(201)});
    let (status, _, body) = register(&cp, &named).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_client_metadata")),
        "{body}"
    );
    let stored = cp
        .db_strings(
            "SELECT client_id FROM interactive_clients WHERE $1 = $1",
            "",
        )
        .await;
    assert!(stored.is_empty(), "{stored:?}");

    // One address gets ten registrations at once (the four refused above counted), then 429.
    let fine = json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"});
    for _ in 0..6 {
        let (status, _, body) = register(&cp, &fine).await;
        assert_eq!(status, 201, "{body}");
    }
    let (status, retry, body) = register(&cp, &fine).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (429, Some("temporarily_unavailable")),
        "{body}"
    );
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("this address"),
        "{body}"
    );
    assert_eq!(retry, "30");
    let stored = cp
        .db_strings(
            "SELECT client_id FROM interactive_clients WHERE $1 = $1",
            "",
        )
        .await;
    assert_eq!(stored.len(), 6, "{stored:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_email_the_provider_did_not_verify_admits_no_one_unless_the_provider_is_trusted() {
    let issuer = OidcIssuer::start().await;
    let (m, _fake) = started(&issuer).await;
    let cp = &m.cp;
    // Alice is on desk's list by email; her provider leaves `email_verified` out.
    issuer.unverified("alice").await;
    let fine = json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"});
    let (status, _, client) = register(cp, &fine).await;
    assert_eq!(status, 201, "{client}");
    let client_id = client["client_id"].as_str().unwrap();
    let verifier = "a-verifier-that-is-long-enough-for-pkce-0123456789";
    let start = authorize_url(&m, client_id, Some(&pkce(verifier)), &mcp_url(&m));
    let (status, url, body) = issuer.browse_until(&start, "alice", REDIRECT).await;
    let q = redirected(status, &url, &body);
    assert_eq!(q["error"], "access_denied", "{q:?}");
    assert!(
        q["error_description"].contains("alice") && !q["error_description"].contains('@'),
        "she is named by her subject, not the email that does not count: {q:?}"
    );

    // Only an oidc provider can be told its emails are verified.
    let hmac = json!({"name": "h", "method": "hmac", "hmac_secret": "0123456789abcdef0123",
        "trust_unverified_email": true});
    cp.call(AGENTS, "CreateActAsProvider", cp.body(hmac))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("trust_unverified_email");
    let corp = json!({"name": "corp", "issuer": issuer.issuer, "audience": "desk"});
    let created = cp.ok(AGENTS, "CreateActAsProvider", cp.body(corp)).await;
    assert_eq!(created["provider"]["trust_unverified_email"], false);
    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": "desk", "actas_provider_id": "corp"})),
    )
    .await;
    let (status, url, body) = issuer.browse_until(&start, "alice", REDIRECT).await;
    assert_eq!(redirected(status, &url, &body)["error"], "access_denied");

    // A provider that only issues verified emails is trusted to: Alice reaches the consent page.
    let trust = json!({"provider_id": "corp", "trust_unverified_email": true});
    let updated = cp.ok(AGENTS, "UpdateActAsProvider", cp.body(trust)).await;
    assert_eq!(updated["provider"]["trust_unverified_email"], true);
    let (status, _, page) = issuer.browse_until(&start, "alice", REDIRECT).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Allow access?"), "{page}");
}
