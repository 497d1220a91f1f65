//! Consent in interactive access (issue 38, H1): no code without the person's consent, consent
//! bound to their browser, remembered per person, client and agent, asked again after a grant
//! is revoked; the page cannot be framed or script-driven.

use portcullis_tests::controlplane::AGENTS;
use portcullis_tests::oidc::OidcIssuer;
use portcullis_tests::ControlPlane;
use serde_json::{json, Value};

use crate::mcp::Mcp;

use crate::interactive::{
    authorize_url, claims, grants, list_with, mcp_url, pkce, redirected, started, token_request,
    REDIRECT,
};

/// A client a third party registers for itself, named `name`.
async fn register(cp: &ControlPlane, name: &str) -> Value {
    reqwest::Client::new()
        .post(format!("{}/oauth2/register", cp.url))
        .json(&json!({"redirect_uris": [REDIRECT], "client_name": name}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The answer of [`OidcIssuer::visit`] that ended on a redirect to the client: its query.
fn landed(answer: &Value) -> std::collections::HashMap<String, String> {
    let status = answer["status"].as_u64().unwrap() as u16;
    redirected(status, answer["url"].as_str().unwrap(), &answer.to_string())
}

/// A form post to the consent endpoint: status and body.
async fn post_consent(
    cp: &ControlPlane,
    cookie: Option<&str>,
    form: &[(&str, &str)],
) -> (u16, String) {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let mut request = http.post(format!("{}/oauth2/consent", cp.url)).form(form);
    if let Some(c) = cookie {
        request = request.header("cookie", format!("portcullis_consent={c}"));
    }
    let r = request.send().await.unwrap();
    let status = r.status().as_u16();
    let location = r
        .headers()
        .get("location")
        .map(|l| l.to_str().unwrap().to_string());
    assert!(
        location.is_none(),
        "a refused consent sends no one anywhere: {location:?}"
    );
    (status, r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_code_is_issued_without_the_persons_consent() {
    let issuer = OidcIssuer::start().await;
    let (m, _fake) = started(&issuer).await;
    let cp = &m.cp;
    // A third party registers a client of its own and sends Alice an authorization link.
    let client = register(cp, "<i>Helper</i> & co").await;
    let client_id = client["client_id"].as_str().unwrap();
    let verifier = "a-verifier-that-is-long-enough-for-pkce-0123456789";
    let start = authorize_url(&m, client_id, Some(&pkce(verifier)), &mcp_url(&m));

    // Signing in at the provider does not hand the client a code: the consent page comes.
    let body = signing_in_shows_a_consent_page_that_cannot_be_framed(cp, &issuer, &start).await;

    // The form's token alone, without the browser's cookie, or with another cookie: refused.
    the_form_token_needs_the_browsers_cookie(cp, &body).await;

    // Denying sends the client access_denied.
    let q = landed(
        &issuer
            .visit(&start, "alice", REDIRECT, Some("deny"), None)
            .await,
    );
    assert_eq!(
        (q["error"].as_str(), q["state"].as_str(), q.get("code")),
        ("access_denied", "s1", None),
        "{q:?}"
    );

    // Approving issues the code; its token works at the gateway.
    let access =
        approving_issues_a_code_whose_token_works(&m, &issuer, &start, &client, verifier).await;

    // The consent is remembered for Alice, this client and this agent: no page the next time.
    the_consent_is_remembered_for_this_client_only(&m, &issuer, &start, verifier).await;

    // Revoking the grant forgets the consent: the next sign-in asks again.
    let grant_id = claims(&access)["grant"].as_str().unwrap().to_string();
    let revoked = cp
        .ok(
            AGENTS,
            "RevokeInteractiveGrant",
            cp.body(json!({"grant_id": grant_id})),
        )
        .await;
    assert_eq!(revoked["revoked"], true);
    let page = issuer.visit(&start, "alice", REDIRECT, None, None).await;
    assert_eq!(page["status"], 200, "consent is asked again: {page}");
    assert!(
        page["body"].as_str().unwrap().contains("Allow access?"),
        "{page}"
    );
}

/// Alice signs in and gets the consent page, escaped, unframable, script-free and bound to a
/// cookie of her browser: the page.
async fn signing_in_shows_a_consent_page_that_cannot_be_framed(
    cp: &ControlPlane,
    issuer: &OidcIssuer,
    start: &str,
) -> String {
    let page = issuer.visit(start, "alice", REDIRECT, None, None).await;
    assert_eq!(page["status"], 200, "no code without consent: {page}");
    assert!(page["url"].as_str().unwrap().starts_with(&cp.url), "{page}");
    let body = page["body"].as_str().unwrap();
    for shown in [
        "Allow access?",
        "<b>&lt;i&gt;Helper&lt;/i&gt; &amp; co</b> <em>(unverified)</em>",
        "<b>127.0.0.1:9</b>",
        "Agent: <b>desk</b>",
        "<b>default</b>",
        "alice@example.com",
    ] {
        assert!(body.contains(shown), "{shown}: {body}");
    }
    assert!(!body.contains("<script"), "{body}");
    let headers = &page["headers"];
    let policy = headers["content-security-policy"].as_str().unwrap();
    assert!(
        policy.contains("default-src 'none'")
            && policy.contains("frame-ancestors 'none'")
            && !policy.contains("script-src"),
        "{policy}"
    );
    assert_eq!(headers["x-frame-options"], "DENY");
    let cookie = headers["set-cookie"][0].as_str().unwrap();
    for attribute in ["HttpOnly", "SameSite=Lax", "Path=/oauth2/"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    assert!(
        !cookie.contains("Secure"),
        "the control plane is plain HTTP here: {cookie}"
    );
    assert!(grants(cp, None).await.is_empty());
    body.to_string()
}

async fn the_form_token_needs_the_browsers_cookie(cp: &ControlPlane, body: &str) {
    let csrf = body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap();
    let form = [("csrf", csrf), ("decision", "approve")];
    let (status, answer) = post_consent(cp, None, &form).await;
    assert_eq!(status, 400, "{answer}");
    let forged = "A".repeat(43);
    let (status, answer) = post_consent(cp, Some(&forged), &form).await;
    assert_eq!(status, 400, "{answer}");
    let (status, _) = post_consent(cp, Some(&forged), &[("decision", "approve")]).await;
    assert_eq!(status, 400);
    assert!(grants(cp, None).await.is_empty());
}

/// Alice approves; the client exchanges the code: the access token.
async fn approving_issues_a_code_whose_token_works(
    m: &Mcp,
    issuer: &OidcIssuer,
    start: &str,
    client: &Value,
    verifier: &str,
) -> String {
    let q = landed(
        &issuer
            .visit(start, "alice", REDIRECT, Some("approve"), None)
            .await,
    );
    let form = [
        ("grant_type", "authorization_code"),
        ("code", q["code"].as_str()),
        ("code_verifier", verifier),
        ("redirect_uri", REDIRECT),
    ];
    let (status, tokens) = token_request(&m.cp, client, &form).await;
    assert_eq!(status, 200, "{tokens}");
    let access = tokens["access_token"].as_str().unwrap();
    assert_eq!(list_with(m, access, None).await.0, 200);
    access.to_string()
}

async fn the_consent_is_remembered_for_this_client_only(
    m: &Mcp,
    issuer: &OidcIssuer,
    start: &str,
    verifier: &str,
) {
    let q = landed(&issuer.visit(start, "alice", REDIRECT, None, None).await);
    assert!(q.contains_key("code"), "{q:?}");
    // Not for another client.
    let second = register(&m.cp, "second").await;
    let second = second["client_id"].as_str().unwrap();
    let elsewhere = authorize_url(m, second, Some(&pkce(verifier)), &mcp_url(m));
    let page = issuer
        .visit(&elsewhere, "alice", REDIRECT, None, None)
        .await;
    assert_eq!(page["status"], 200, "another client is asked for: {page}");
}
