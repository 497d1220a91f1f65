//! A real OpenID provider for the tests: `oidc-provider` from npm, run by
//! `tests/node/oidc_issuer.mjs` on a loopback port with issuer `http://127.0.0.1:<port>`, one
//! client ([`OidcIssuer::client_id`]), and RS256 (`k1`), ES256 (`e1`) and EdDSA (`d1`) keys
//! published at its `jwks_uri`. [`OidcIssuer::id_token`] runs the authorization code flow with
//! PKCE against it and returns the ID token it issued; [`OidcIssuer::forge`] builds tokens it
//! did not issue (expired, wrong audience, foreign key under the real kid, `alg: none`, …);
//! [`OidcIssuer::rotate`] replaces the RS256 key; it counts fetches of the discovery document
//! and the JWKS. `scripts/test` installs the npm packages in `PORTCULLIS_NPM_DIR` (default
//! `~/.cache/portcullis-npm`).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

use crate::everything::npm_dir;
use crate::process::Spawned;

pub struct OidcIssuer {
    /// `http://127.0.0.1:<port>`; the discovery document is at
    /// `<issuer>/.well-known/openid-configuration`.
    pub issuer: String,
    http: reqwest::Client,
    /// Its log goes into the panic messages of failed calls.
    process: Spawned,
}

impl OidcIssuer {
    /// Starts the provider on a free loopback port.
    pub async fn start() -> Self {
        let npm = npm_dir();
        for package in ["oidc-provider", "jose"] {
            let path = npm.join("node_modules").join(package);
            assert!(
                path.exists(),
                "{} not found: run scripts/test (it installs the npm packages of tests/node/package.json)",
                path.display()
            );
        }
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("node/oidc_issuer.mjs");
        let mut command = Command::new("node");
        command.arg(script).env("PORTCULLIS_NPM_DIR", &npm);
        let mut process = Spawned::spawn(command);
        let addr = process.wait_listening("oidc issuer").await;
        Self {
            issuer: format!("http://{addr}"),
            http: reqwest::Client::builder()
                .no_proxy()
                .timeout(Duration::from_secs(30))
                // Node closes an idle keep-alive connection after 5 s; a request sent on it
                // as it closes fails. Idle connections are dropped well before that.
                .pool_idle_timeout(Duration::from_secs(2))
                .build()
                .expect("http client"),
            process,
        }
    }

    /// The one client registered with the provider: the `aud` of its ID tokens.
    pub fn client_id() -> &'static str {
        "portcullis-agent"
    }

    /// An ID token the provider issued to [`Self::client_id`] for `sub` (as login), with these
    /// `email` and `groups` claims, through the authorization code flow with PKCE.
    pub async fn id_token(&self, sub: &str, email: &str, groups: &[&str]) -> String {
        let groups = groups.join(",");
        let query = [("sub", sub), ("email", email), ("groups", groups.as_str())];
        let body = self.call(reqwest::Method::GET, "id_token", &query).await;
        string_field(&body, "id_token")
    }

    /// A token the provider did not issue, for `sub` (email `<sub>@example.com`, no groups),
    /// with `aud` (default [`Self::client_id`]). `kind` is one of `valid` (as the provider would
    /// sign it: current RS256 key and kid), `expired`, `wrong_aud`, `other_key` (a foreign RS256
    /// key under the current kid), `alg_none`, `other_issuer`, `not_yet` (nbf in an hour),
    /// `hs256` (HMAC with "secret" under the current kid), `es256` and `eddsa` (the published
    /// ES256 and EdDSA keys).
    pub async fn forge(&self, kind: &str, sub: &str, aud: Option<&str>) -> String {
        let mut query = vec![("kind", kind), ("sub", sub)];
        if let Some(aud) = aud {
            query.push(("aud", aud));
        }
        let body = self.call(reqwest::Method::GET, "forge", &query).await;
        string_field(&body, "token")
    }

    /// Replaces the RS256 signing key with a new one: the JWKS publishes only the new one (with
    /// the ES256 and EdDSA keys) and issued and forged tokens are signed with it. Returns its
    /// kid (`k2`, `k3`, …).
    pub async fn rotate(&self) -> String {
        let body = self.call(reqwest::Method::POST, "rotate", &[]).await;
        string_field(&body, "kid")
    }

    /// Requests to the JWKS so far.
    pub async fn jwks_hits(&self) -> u64 {
        self.stat("jwks_hits").await
    }

    /// Requests to the discovery document so far.
    pub async fn discovery_hits(&self) -> u64 {
        self.stat("discovery_hits").await
    }

    /// A browser opening `url`: it follows every redirect, logs in at this provider as
    /// `login` and consents, and returns the status and body of the page it ends on.
    pub async fn browse(&self, url: &str, login: &str) -> (u16, String) {
        let body = self
            .call(
                reqwest::Method::GET,
                "browse",
                &[("url", url), ("login", login)],
            )
            .await;
        let status = body["status"].as_u64().expect("browse status") as u16;
        (status, string_field(&body, "body"))
    }

    /// [`OidcIssuer::browse`] that stops at a redirect to a URL starting with `stop_at` (a
    /// client's redirect URI, never served): the status (302 when it stopped there), the URL
    /// it ended on and the page's body.
    pub async fn browse_until(
        &self,
        url: &str,
        login: &str,
        stop_at: &str,
    ) -> (u16, String, String) {
        let query = [("url", url), ("login", login), ("stop_at", stop_at)];
        let body = self.call(reqwest::Method::GET, "browse", &query).await;
        let status = body["status"].as_u64().expect("browse status") as u16;
        (
            status,
            string_field(&body, "url"),
            string_field(&body, "body"),
        )
    }

    /// [`OidcIssuer::browse_until`] that also answers Portcullis's consent page with
    /// `decision` (`approve` or `deny`), choosing the agent named `agent` when it offers
    /// several. The whole answer: `status`, `url`, `body` and, for a page, its `headers`
    /// (`set-cookie` a list).
    pub async fn visit(
        &self,
        url: &str,
        login: &str,
        stop_at: &str,
        decision: Option<&str>,
        agent: Option<&str>,
    ) -> Value {
        let mut query = vec![("url", url), ("login", login), ("stop_at", stop_at)];
        if let Some(d) = decision {
            query.push(("consent", d));
        }
        if let Some(a) = agent {
            query.push(("agent", a));
        }
        self.call(reqwest::Method::GET, "browse", &query).await
    }

    /// A browser opening a provision link: it signs in as `login` where the link sends it and
    /// posts `api_key` in the form shown after; the status and body of the last page.
    pub async fn provide(&self, url: &str, login: &str, api_key: &str) -> (u16, String) {
        let query = [("url", url), ("login", login), ("api_key", api_key)];
        let body = self.call(reqwest::Method::GET, "browse", &query).await;
        let status = body["status"].as_u64().expect("browse status") as u16;
        (status, string_field(&body, "body"))
    }

    /// The lifetime of access tokens issued for resource servers from now on.
    pub async fn set_access_ttl(&self, seconds: u64) {
        let seconds = seconds.to_string();
        self.call(
            reqwest::Method::POST,
            "access_ttl",
            &[("seconds", &seconds)],
        )
        .await;
    }

    /// From now on the ID tokens of `sub` carry their email without `email_verified` (every
    /// other person's say `true`).
    pub async fn unverified(&self, sub: &str) {
        self.call(reqwest::Method::POST, "unverified", &[("sub", sub)])
            .await;
    }

    /// From now on the provider refuses every refresh-token grant (`invalid_grant`).
    pub async fn refuse_refresh(&self) {
        self.call(reqwest::Method::POST, "refuse_refresh", &[])
            .await;
    }

    /// A counter of the provider's: `registrations`, `refresh_grants`, `revocations`,
    /// `introspections`, `jwks_hits`, `discovery_hits`.
    pub async fn stat(&self, name: &str) -> u64 {
        let body = self.call(reqwest::Method::GET, "stats", &[]).await;
        body[name]
            .as_u64()
            .unwrap_or_else(|| panic!("oidc issuer stats without {name}: {body}"))
    }

    async fn call(&self, method: reqwest::Method, route: &str, query: &[(&str, &str)]) -> Value {
        let url = format!("{}/_test/{route}", self.issuer);
        let response = self
            .http
            .request(method, &url)
            .query(query)
            .send()
            .await
            .unwrap_or_else(|e| panic!("oidc issuer {route}: {e}:\n{}", self.process.logs()));
        let status = response.status();
        let text = response.text().await.expect("oidc issuer body");
        assert!(
            status.is_success(),
            "oidc issuer {route} answered {status}: {text}\n{}",
            self.process.logs()
        );
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("oidc issuer {route} answered non-JSON ({e}): {text}"))
    }
}

fn string_field(body: &Value, name: &str) -> String {
    body[name]
        .as_str()
        .unwrap_or_else(|| panic!("oidc issuer answer without {name}: {body}"))
        .to_string()
}
