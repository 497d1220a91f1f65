//! The cloud identity services the fake stands in for, checking what the real ones check:
//! Google's OAuth token endpoint (`POST /token`, the JWT-bearer grant of RFC 7523: an RS256
//! assertion signed by a registered service-account key, `aud` the token URI, the
//! cloud-platform scope, at most an hour long) issuing bearer tokens that Vertex paths then
//! require; and AWS STS `AssumeRole` (`POST /` with a SigV4 signature for service `sts` by
//! registered keys, a known role and its external id) issuing temporary keys that Bedrock then
//! accepts with their session token.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::{sigv4, Shared};

const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// What the fake's identity services have registered and issued.
#[derive(Default)]
pub struct CloudState {
    /// Service-account email → its public key.
    pub service_accounts: HashMap<String, jsonwebtoken::DecodingKey>,
    /// Bearer token → when it expires.
    pub google_tokens: HashMap<String, Instant>,
    /// AWS keys Bedrock and STS accept: those configured and those STS issued.
    pub aws_keys: sigv4::Keys,
    pub issued: u64,
}

fn form(body: &[u8]) -> HashMap<String, String> {
    url::form_urlencoded::parse(body).into_owned().collect()
}

pub(super) fn form_json(body: &[u8]) -> Value {
    Value::Object(form(body).into_iter().map(|(k, v)| (k, json!(v))).collect())
}

fn oauth_error(error: &str, description: &str) -> Response {
    let body = json!({"error": error, "error_description": description});
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

#[derive(serde::Deserialize)]
struct Assertion {
    iss: String,
    scope: String,
    aud: String,
    iat: i64,
    exp: i64,
}

/// A JWT segment, with or without base64 padding (Google takes both; gcp_auth pads).
fn segment<T: serde::de::DeserializeOwned>(text: &str) -> Option<T> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The claims of an RS256 assertion signed by a registered service account, checked as
/// Google checks them: the signature over the segments as sent, `aud` the token URI, a
/// current time window of at most an hour.
fn verified(state: &CloudState, assertion: &str, token_uri: &str) -> Result<Assertion, String> {
    let (signed, signature) = assertion.rsplit_once('.').ok_or("Invalid JWT: malformed")?;
    let (header, payload) = signed.split_once('.').ok_or("Invalid JWT: malformed")?;
    let header: Value = segment(header).ok_or("Invalid JWT: bad header")?;
    if header["alg"] != "RS256" {
        return Err("Invalid JWT: not RS256".into());
    }
    let claims: Assertion = segment(payload).ok_or("Invalid JWT: bad claims")?;
    let key = state
        .service_accounts
        .get(&claims.iss)
        .ok_or("Invalid JWT Signature.")?;
    let signature = signature.trim_end_matches('=');
    let good = jsonwebtoken::crypto::verify(
        signature,
        signed.as_bytes(),
        key,
        jsonwebtoken::Algorithm::RS256,
    );
    if !good.unwrap_or(false) {
        return Err("Invalid JWT Signature.".into());
    }
    let now = chrono::Utc::now().timestamp();
    if claims.aud != token_uri {
        return Err(format!("Invalid JWT: aud must be {token_uri}"));
    }
    if claims.iat > now + 60 || claims.exp < now - 60 || claims.exp - claims.iat > 3600 {
        return Err("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.".into());
    }
    if !claims.scope.split(' ').any(|s| s == SCOPE) {
        return Err("The cloud-platform scope is required.".into());
    }
    Ok(claims)
}

/// `POST /token` with `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`.
pub(super) fn token(shared: &Shared, token_uri: &str, body: &[u8]) -> Response {
    let fields = form(body);
    if fields.get("grant_type").map(String::as_str)
        != Some("urn:ietf:params:oauth:grant-type:jwt-bearer")
    {
        return oauth_error("unsupported_grant_type", "Invalid grant_type");
    }
    let assertion = fields.get("assertion").cloned().unwrap_or_default();
    let mut state = shared.cloud();
    if let Err(why) = verified(&state, &assertion, token_uri) {
        return oauth_error("invalid_grant", &why);
    }
    state.issued += 1;
    let token = format!(
        "ya29.fake-{}-{}",
        state.issued,
        uuid::Uuid::new_v4().simple()
    );
    let lifetime = shared.behaviour.token_lifetime_secs;
    let expires = Instant::now() + Duration::from_secs(lifetime);
    state.google_tokens.insert(token.clone(), expires);
    axum::Json(json!({"access_token": token, "expires_in": lifetime, "token_type": "Bearer"}))
        .into_response()
}

/// STS's XML error.
fn sts_error(status: u16, code: &str, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::FORBIDDEN);
    let body = format!(
        r#"<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error><RequestId>fake-sts</RequestId></ErrorResponse>"#
    );
    (status, [("content-type", "text/xml")], body).into_response()
}

/// `POST /` `Action=AssumeRole`, signed by a registered key.
pub(super) fn sts(
    shared: &Shared,
    path: &str,
    query: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let fields = form(body);
    if fields.get("Action").map(String::as_str) != Some("AssumeRole") {
        return sts_error(400, "InvalidAction", "Could not find operation");
    }
    let mut state = shared.cloud();
    if let Err(why) = sigv4::verify(&state.aws_keys, "sts", "POST", path, query, headers, body) {
        let (code, message) = why.split_once(": ").unwrap_or((why.as_str(), ""));
        return sts_error(403, code, message);
    }
    let arn = fields.get("RoleArn").cloned().unwrap_or_default();
    let Some(external_id) = shared.behaviour.aws_roles.get(&arn) else {
        return sts_error(
            403,
            "AccessDenied",
            &format!("Not authorized to perform sts:AssumeRole on {arn}"),
        );
    };
    if external_id.as_ref() != fields.get("ExternalId") {
        return sts_error(403, "AccessDenied", "The external id does not match");
    }
    if fields.get("RoleSessionName").is_none_or(String::is_empty) {
        return sts_error(400, "ValidationError", "RoleSessionName is required");
    }
    state.issued += 1;
    let id = format!("ASIAFAKE{:08}", state.issued);
    let secret = format!("fake-temporary-secret-{}", uuid::Uuid::new_v4().simple());
    let session = format!("FwoGZXIvYXdzEFAKE{}", uuid::Uuid::new_v4().simple());
    state
        .aws_keys
        .insert(id.clone(), (secret.clone(), Some(session.clone())));
    let expiration = (chrono::Utc::now() + chrono::Duration::hours(1))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let body = format!(
        r#"<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleResult><AssumedRoleUser><AssumedRoleId>AROAFAKE:portcullis</AssumedRoleId><Arn>{arn}/portcullis</Arn></AssumedRoleUser><Credentials><AccessKeyId>{id}</AccessKeyId><SecretAccessKey>{secret}</SecretAccessKey><SessionToken>{session}</SessionToken><Expiration>{expiration}</Expiration></Credentials></AssumeRoleResult><ResponseMetadata><RequestId>fake-sts</RequestId></ResponseMetadata></AssumeRoleResponse>"#
    );
    (StatusCode::OK, [("content-type", "text/xml")], body).into_response()
}

/// A new RSA service-account key file for `email` whose tokens come from `token_uri`, as
/// Google's console downloads it; the public half is what the token endpoint checks.
pub fn service_account_key(email: &str, token_uri: &str) -> (String, jsonwebtoken::DecodingKey) {
    let run = |args: &[&str], input: Option<&[u8]>| -> Vec<u8> {
        use std::io::Write;
        let mut child = std::process::Command::new("openssl")
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("openssl (scripts/install-deps installs it)");
        if let Some(input) = input {
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(input)
                .expect("write to openssl");
        }
        let out = child.wait_with_output().expect("openssl ran");
        assert!(out.status.success(), "openssl {args:?} failed");
        out.stdout
    };
    let private = run(
        &[
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
        ],
        None,
    );
    let public = run(&["pkey", "-pubout"], Some(&private));
    let key = jsonwebtoken::DecodingKey::from_rsa_pem(&public).expect("an RSA public key");
    let file = json!({"type": "service_account", "project_id": "fake-project",
        "private_key_id": "fakekeyid01", "private_key": String::from_utf8_lossy(&private),
        "client_email": email, "client_id": "100000000000000000001",
        "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": token_uri});
    (file.to_string(), key)
}

impl Shared {
    pub(super) fn cloud(&self) -> std::sync::MutexGuard<'_, CloudState> {
        self.cloud.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A Vertex call's bearer token: one the token endpoint issued and that has not expired,
    /// or, when no service account is registered, any.
    pub(super) fn bearer_ok(&self, headers: &HeaderMap) -> Result<(), Box<Response>> {
        let token = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or_default();
        let state = self.cloud();
        let unconfigured = state.service_accounts.is_empty() && !token.is_empty();
        let issued = state
            .google_tokens
            .get(token)
            .is_some_and(|expires| *expires > Instant::now());
        if unconfigured || issued {
            return Ok(());
        }
        Err(Box::new(super::gemini::error(401, "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.")))
    }
}
