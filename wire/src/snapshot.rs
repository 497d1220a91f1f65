//! The gateway snapshot: everything one workspace's gateways need to serve, at one revision,
//! as `svc.sync.v1.SyncService/GetSnapshot` returns it. It carries decrypted upstream secrets
//! and must only travel to an authenticated deployment.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::api::agents::{ActAsMethod, AgentStatus};
use crate::api::gateways::GatewayState;
use crate::api::pools::PoolStrategy;
use crate::api::rules::BundleScope;
use crate::api::tools::{HttpConfig, Protocol, StdioConfig, ToolStatus};
use crate::api::{AuthMethod, CredentialType, WorkspaceScoped};

/// Default and maximum long-poll wait.
pub const DEFAULT_WAIT_SECONDS: u32 = 25;
pub const MAX_WAIT_SECONDS: u32 = 60;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetSnapshotRequest {
    /// The token names the workspace; when given, this must match it.
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// The revision the caller holds; the call waits while it is still current.
    #[serde(default)]
    pub revision: Option<u64>,
    #[serde(default)]
    pub wait_seconds: Option<u32>,
}

impl WorkspaceScoped for GetSnapshotRequest {
    fn workspace_id(&self) -> Option<&str> {
        self.workspace_id.as_deref()
    }
}

/// `snapshot` is `None` when the caller's revision is still current after the wait.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GetSnapshotResponse {
    pub revision: u64,
    pub snapshot: Option<Snapshot>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub workspace_id: String,
    pub revision: u64,
    pub deployment_id: String,
    pub public_url: String,
    pub generated_at: String,
    pub gateways: Vec<SnapGateway>,
    pub models: Vec<SnapModel>,
    pub pools: Vec<SnapPool>,
    pub agents: Vec<SnapAgent>,
    pub bundles: Vec<SnapBundle>,
    #[serde(default)]
    pub tools: Vec<SnapTool>,
    /// Every quota of the workspace, disabled ones included (they are not enforced).
    #[serde(default)]
    pub quotas: Vec<SnapQuota>,
    /// The public keys exchanged agent tokens are signed with: the current one and those
    /// retired less than a day ago (the longest `token_ttl`).
    #[serde(default)]
    pub token_keys: Vec<SnapTokenKey>,
    /// The weakest act-as identity the workspace admits.
    #[serde(default)]
    pub actas_min_method: crate::api::actas::ActAsStrength,
    /// The workspace's act-as verification providers.
    #[serde(default)]
    pub actas_providers: Vec<SnapActAsProvider>,
    /// The workspace's streamed-output filter window (0: none beyond the models' own).
    #[serde(default)]
    pub filter_window_bytes: u64,
    #[serde(default)]
    pub filter_window_tokens: u64,
    /// The workspace's enabled guards.
    #[serde(default)]
    pub guards: Vec<SnapGuard>,
    /// Interactive access: where MCP clients sign people in, and the grants revoked lately.
    #[serde(default)]
    pub interactive: SnapInteractive,
}

/// What a gateway needs for interactive access (DESIGN §15): its `/mcp` names the control
/// plane as its authorization server, and refuses tokens of revoked grants.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapInteractive {
    /// The control plane's public URL: the issuer MCP clients get tokens from.
    #[serde(default)]
    pub authorization_server: String,
    /// Grants revoked while tokens issued under them may still be unexpired.
    #[serde(default)]
    pub revoked_grants: Vec<String>,
}

/// An enabled guard, with its scope as ids. An empty list does not narrow; a list whose
/// members were all deleted matches nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapGuard {
    pub guard_id: String,
    pub name: String,
    pub stage: crate::api::guards::GuardStage,
    pub kind: crate::api::guards::GuardKind,
    pub action: crate::api::guards::GuardAction,
    pub config: Value,
    #[serde(default)]
    pub gateway_ids: Vec<String>,
    /// Model connections and pools.
    #[serde(default)]
    pub model_ids: Vec<String>,
    #[serde(default)]
    pub tool_ids: Vec<String>,
}

/// A verification provider, as gateways need it to verify identities.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapActAsProvider {
    pub provider_id: String,
    pub name: String,
    pub method: crate::api::actas::ProviderMethod,
    #[serde(default)]
    pub issuer: Option<String>,
    #[serde(default)]
    pub audience: Option<String>,
    #[serde(default)]
    pub jwks_url: Option<String>,
    pub email_claim: String,
    pub groups_claim: String,
    /// Whether an email counts without `email_verified: true` in the token.
    #[serde(default)]
    pub trust_unverified_email: bool,
    #[serde(default)]
    pub hmac_secret: Option<Secrets>,
}

/// The end user an API key is bound to (`bound` act-as): the identity comes from the key,
/// never from the caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapBoundKey {
    /// SHA-256 hex of the key.
    pub key_hash: String,
    pub subject: crate::api::agents::BoundSubject,
}

/// An Ed25519 public key (`kid`, and the raw key in base64url as in a JWK's `x`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapTokenKey {
    pub kid: String,
    pub x: String,
}

/// The `iss` of every token `ExchangeAgentKey` mints.
pub const AGENT_TOKEN_ISSUER: &str = "urn:portcullis:controlplane";

/// The claims of an exchanged agent token (DESIGN §15).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentTokenClaims {
    /// The control plane's URL.
    pub iss: String,
    /// The agent's id.
    pub sub: String,
    /// The gateway's id.
    pub aud: String,
    pub iat: i64,
    pub exp: i64,
    pub jti: String,
    /// The workspace.
    pub ws: String,
    /// The end user the exchanged key is bound to (act-as method `bound`), or the person
    /// signed in under an interactive grant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub act: Option<crate::api::agents::BoundSubject>,
    /// The interactive grant the token was issued under (then `act` is the signed-in person).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
}

/// A quota as the gateway enforces it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapQuota {
    pub quota_id: String,
    pub name: String,
    pub subject_type: crate::api::quotas::QuotaSubject,
    /// Agent, pool, model or gateway id; the workspace id for workspace quotas.
    #[serde(default)]
    pub subject_id: String,
    /// The end user's OIDC `sub`, for act-as quotas.
    #[serde(default)]
    pub subject_key: String,
    /// For model quotas scoped to a pool.
    #[serde(default)]
    pub pool_id: String,
    pub per_caller: bool,
    pub window: crate::api::quotas::QuotaWindow,
    pub limit_micros: u64,
    pub enabled: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapGateway {
    pub gateway_id: String,
    pub name: String,
    pub state: GatewayState,
    pub is_default: bool,
    pub all_agents: bool,
    pub agent_ids: Vec<String>,
    pub model_ids: Vec<String>,
    pub pool_ids: Vec<String>,
    /// Whole tool connections attached.
    #[serde(default)]
    pub tool_sources: Vec<String>,
    /// Single operations attached.
    #[serde(default)]
    pub tools: Vec<SnapGatewayTool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapGatewayTool {
    pub connection_id: String,
    pub tool: String,
}

/// A tool connection with what the gateway needs to call it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapTool {
    pub connection_id: String,
    pub name: String,
    pub protocol: Protocol,
    #[serde(default)]
    pub http: Option<HttpConfig>,
    #[serde(default)]
    pub stdio: Option<StdioConfig>,
    /// The installed adapter of a `rest` connection.
    #[serde(default)]
    pub rest: Option<crate::adapter::Installed>,
    pub auth_method: AuthMethod,
    pub credential_type: CredentialType,
    pub secret_values: Secrets,
    pub write_tools: Vec<String>,
    /// Fields of structured results (a field name anywhere, or a JSON pointer with `*` for
    /// every member) → their class, for guards that act on classified fields whole.
    #[serde(default)]
    pub field_classifications: BTreeMap<String, String>,
    /// Every operation in the catalog, with its status. Operations an upstream offers that are
    /// not listed here are not served until discovery records them.
    pub catalog: Vec<SnapCatalogEntry>,
    /// Changes whenever anything that affects calling the upstream changes.
    pub fingerprint: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapCatalogEntry {
    pub name: String,
    pub status: ToolStatus,
    #[serde(default)]
    pub message: Option<String>,
}

/// Upstream secret values; `Debug` never prints them.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secrets(pub BTreeMap<String, String>);

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapModel {
    pub connection_id: String,
    pub name: String,
    pub provider: String,
    pub provider_config: Map<String, Value>,
    pub auth_method: AuthMethod,
    pub credential_type: CredentialType,
    pub secret_values: Secrets,
    pub attributes: BTreeMap<String, String>,
    pub filter_window_bytes: u64,
    pub filter_window_tokens: u64,
    /// A shared OAuth model's grant: when it was first stored (a new consent changes it, a
    /// disconnect removes it), so gateways drop the old access token at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth_grant: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapPoolMember {
    pub connection_id: String,
    pub weight: u32,
    pub priority: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapPool {
    pub pool_id: String,
    pub name: String,
    pub strategy: PoolStrategy,
    pub members: Vec<SnapPoolMember>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapAgent {
    pub agent_id: String,
    pub name: String,
    pub status: AgentStatus,
    pub parent_id: Option<String>,
    /// SHA-256 hex of each live API key.
    pub key_hashes: Vec<String>,
    pub token_ttl_secs: u64,
    pub actas_method: Option<ActAsMethod>,
    pub actas_required: bool,
    pub actas_provider_id: Option<String>,
    pub actas_oidc_url: Option<String>,
    pub actas_hmac_secret: Option<Secrets>,
    /// The agent's keys bound to an end user.
    #[serde(default)]
    pub bound_keys: Vec<SnapBoundKey>,
}

/// One rule bundle's Cedar text; policy ids are already qualified and unique.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapBundle {
    pub bundle_id: String,
    /// What the policies' ids were qualified with (`agent/<id>`, `bundle/<id>`, `gateway`).
    pub id_prefix: String,
    pub scope: BundleScope,
    pub scope_id: Option<String>,
    pub managed: bool,
    pub policies: String,
}

/// What a completed call was charged on one quota: the quota, the UTC day of the call (days
/// since 1970-01-01), for per-caller quotas the caller (`agent:<id>` or `user:<sub>`), and the
/// amount. Carried in the call's `model.call` event (`charges`); the control plane adds it to
/// its record of spend when it stores the event. Recording the day rather than the quota's
/// window lets a quota's window change without losing what was spent in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Charge {
    pub quota_id: String,
    pub day: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub caller: String,
    pub micros: u64,
}

/// `SyncService/GetSpend`: the recorded spend of every day of the current month (which holds
/// today), per quota and caller, to seed a gateway's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetSpendRequest {
    #[serde(default)]
    pub workspace_id: Option<String>,
}

impl crate::api::WorkspaceScoped for GetSpendRequest {
    fn workspace_id(&self) -> Option<&str> {
        self.workspace_id.as_deref()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetSpendResponse {
    /// The workspace the deployment token belongs to (shared counters are per workspace).
    pub workspace_id: String,
    pub spend: Vec<Charge>,
}

/// The UTC day a time falls in: days since 1970-01-01.
pub fn day_index(unix_secs: i64) -> i64 {
    unix_secs.div_euclid(86_400)
}

/// The window a UTC day falls in: the day itself, or months since January 1970.
pub fn window_of_day(window: crate::api::quotas::QuotaWindow, day: i64) -> i64 {
    use chrono::Datelike;
    match window {
        crate::api::quotas::QuotaWindow::Daily => day,
        crate::api::quotas::QuotaWindow::Monthly => {
            let t = chrono::DateTime::from_timestamp(day * 86_400, 0).unwrap_or_default();
            i64::from(t.year() - 1970) * 12 + i64::from(t.month0())
        }
    }
}

/// The window a time falls in (see `window_of_day`).
pub fn window_index(window: crate::api::quotas::QuotaWindow, unix_secs: i64) -> i64 {
    window_of_day(window, day_index(unix_secs))
}

/// The first UTC day of the month `day` falls in.
pub fn month_start_day(day: i64) -> i64 {
    use chrono::Datelike;
    let t = chrono::DateTime::from_timestamp(day * 86_400, 0).unwrap_or_default();
    day - i64::from(t.day0())
}

/// When a window ends (the next one starts), RFC 3339 UTC.
pub fn window_end(window: crate::api::quotas::QuotaWindow, index: i64) -> String {
    let t = match window {
        crate::api::quotas::QuotaWindow::Daily => {
            chrono::DateTime::from_timestamp((index + 1) * 86_400, 0).unwrap_or_default()
        }
        crate::api::quotas::QuotaWindow::Monthly => {
            let next = index + 1;
            let (y, m) = (1970 + next.div_euclid(12), next.rem_euclid(12) + 1);
            chrono::NaiveDate::from_ymd_opt(y as i32, m as u32, 1)
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .map(|d| d.and_utc())
                .unwrap_or_default()
        }
    };
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod window_tests {
    use super::*;
    use crate::api::quotas::QuotaWindow;

    #[test]
    fn windows_start_at_utc_midnight_and_month_start() {
        let t = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap().timestamp();
        let d = window_index(QuotaWindow::Daily, t("2026-11-22T23:59:59Z"));
        assert_eq!(
            window_index(QuotaWindow::Daily, t("2026-11-23T00:00:00Z")),
            d + 1
        );
        assert_eq!(window_end(QuotaWindow::Daily, d), "2026-11-23T00:00:00Z");
        let m = window_index(QuotaWindow::Monthly, t("2026-12-31T23:59:59Z"));
        assert_eq!(
            window_index(QuotaWindow::Monthly, t("2027-01-01T00:00:00Z")),
            m + 1
        );
        assert_eq!(window_end(QuotaWindow::Monthly, m), "2027-01-01T00:00:00Z");
        assert_eq!(window_index(QuotaWindow::Monthly, 0), 0);
        let nov30 = day_index(t("2026-11-30T12:00:00Z"));
        assert_eq!(month_start_day(nov30), day_index(t("2026-11-01T00:00:00Z")));
        assert_eq!(
            month_start_day(nov30 + 1),
            nov30 + 1,
            "December 1st starts a month"
        );
        assert_eq!(window_of_day(QuotaWindow::Monthly, nov30), m - 1);
    }
}

/// Which kind of connection a per-user credential is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialOwner {
    Tool,
    Model,
}

/// `SyncService/GetCredential`: a person's credential for a per-user connection, asked by a
/// gateway when a call needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetCredentialRequest {
    #[serde(default)]
    pub workspace_id: Option<String>,
    pub owner: CredentialOwner,
    pub connection_id: String,
    /// The verified act-as `sub` of the person; `""` asks for a shared OAuth connection's
    /// current access token.
    pub subject: String,
    /// The agent whose call asks: a link minted for the person is opened after signing in at
    /// that agent's OpenID provider. `""` for the shared subject.
    #[serde(default)]
    pub agent_id: String,
}

impl WorkspaceScoped for GetCredentialRequest {
    fn workspace_id(&self) -> Option<&str> {
        self.workspace_id.as_deref()
    }
}

/// The credential's header values when the person has one; otherwise a fresh one-use link
/// where they can store one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetCredentialResponse {
    #[serde(default)]
    pub secret_values: Option<Secrets>,
    pub connection_name: String,
    #[serde(default)]
    pub provision_url: Option<String>,
    #[serde(default)]
    pub expires_at: Option<String>,
    /// How long the credential may be used before it is asked for again (an OAuth access
    /// token is refreshed ahead of its expiry); absent: the gateway's own bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_seconds: Option<u64>,
}
