//! An agent's settable fields, shared by register and update: validation, the cross-field
//! rules of act-as and interactive access, and what changes the agent's rule bundle.

use portcullis_shared::api::agents::{ActAsMethod, RegisterAgentRequest, UpdateAgentRequest};
use portcullis_shared::ttl;
use serde_json::{Map, Value};

use crate::error::{invalid, not_found, ApiResult};
use crate::interactive::is_exact;
use crate::store::credentials::{self, Owner};
use crate::store::{actas_providers, agents::AgentRow, gateways, Conn};
use crate::validate;

const MAX_LIST: usize = 256;

/// The fields a request sets; `None` keeps the stored value.
#[derive(Debug, Default)]
pub struct Patch {
    metadata: Option<Map<String, Value>>,
    token_ttl: Option<String>,
    pools: Option<Vec<String>>,
    models: Option<Vec<String>>,
    tools: Option<Vec<String>>,
    gateway_ids: Option<Vec<String>>,
    groups: Option<Vec<String>>,
    emails: Option<Vec<String>>,
    subjects: Option<Vec<String>>,
    method: Option<String>,
    required: Option<bool>,
    provider_id: Option<String>,
    oidc_url: Option<String>,
    hmac_secret: Option<String>,
    config_name: Option<String>,
    interactive: Option<bool>,
}

impl From<&RegisterAgentRequest> for Patch {
    fn from(r: &RegisterAgentRequest) -> Self {
        Patch {
            metadata: r.metadata.clone(),
            token_ttl: r.token_ttl.clone(),
            pools: r.allowed_pool_names.clone(),
            models: r.allowed_direct_model_names.clone(),
            tools: r.allowed_tools.clone(),
            gateway_ids: r.allowed_gateway_ids.clone(),
            groups: r.actas_allowed_groups.clone(),
            emails: r.actas_allowed_emails.clone(),
            subjects: r.actas_allowed_subjects.clone(),
            method: r.actas_method.map(|m| m.as_str().to_string()),
            required: r.actas_required,
            provider_id: r.actas_provider_id.clone(),
            oidc_url: r.actas_oidc_url.clone(),
            hmac_secret: r.actas_hmac_secret.clone(),
            config_name: r.actas_config_name.clone(),
            interactive: r.interactive_access,
        }
    }
}

impl From<&UpdateAgentRequest> for Patch {
    fn from(r: &UpdateAgentRequest) -> Self {
        Patch {
            metadata: r.metadata.clone(),
            token_ttl: r.token_ttl.clone(),
            pools: r.allowed_pool_names.clone(),
            models: r.allowed_direct_model_names.clone(),
            tools: r.allowed_tools.clone(),
            gateway_ids: r.allowed_gateway_ids.clone(),
            groups: r.actas_allowed_groups.clone(),
            emails: r.actas_allowed_emails.clone(),
            subjects: r.actas_allowed_subjects.clone(),
            method: r.actas_method.clone(),
            required: r.actas_required,
            provider_id: r.actas_provider_id.clone(),
            oidc_url: r.actas_oidc_url.clone(),
            hmac_secret: r.actas_hmac_secret.clone(),
            config_name: r.actas_config_name.clone(),
            interactive: r.interactive_access,
        }
    }
}

/// What the caller must write besides the row.
#[derive(Debug, Default)]
pub struct Applied {
    /// Replaces the agent's gateway grants.
    pub gateway_ids: Option<Vec<String>>,
    /// `Some(None)` deletes the stored HMAC secret.
    pub hmac_secret: Option<Option<String>>,
}

fn non_empty(list: &Option<Vec<String>>) -> bool {
    list.as_ref().is_some_and(|l| !l.is_empty())
}

fn set(text: &Option<String>) -> bool {
    text.as_ref().is_some_and(|t| !t.is_empty())
}

fn json_list(list: &[String]) -> String {
    serde_json::to_string(list).unwrap_or_else(|_| "[]".into())
}

fn optional_text(field: &str, value: &str, max: usize) -> ApiResult<Option<String>> {
    if value.is_empty() {
        return Ok(None);
    }
    if value.len() > max || value.chars().any(char::is_control) {
        return Err(invalid(format!(
            "{field} must be at most {max} characters without control characters"
        )));
    }
    Ok(Some(value.to_string()))
}

fn names(field: &str, list: &[String]) -> ApiResult<Vec<String>> {
    let list = validate::string_list(field, list, MAX_LIST)?;
    for (i, n) in list.iter().enumerate() {
        validate::name(&format!("{field}[{i}]"), n)?;
    }
    Ok(list)
}

/// `connection/tool`: a connection name of letters, digits, `_` and `-`, then the operation;
/// at most 64 characters in all.
pub fn tool_ref(field: &str, value: &str) -> ApiResult<()> {
    let bad = || {
        invalid(format!(
            "{field} '{}' must be connection/tool: a connection name of letters, digits, _ and -, \
             a slash, and the operation name; at most 64 characters",
            validate::clip(value)
        ))
    };
    let (conn, tool) = value.split_once('/').ok_or_else(bad)?;
    let conn_ok = !conn.is_empty()
        && conn
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let tool_ok = !tool.is_empty() && !tool.chars().any(|c| c.is_whitespace() || c.is_control());
    if !conn_ok || !tool_ok || value.len() > 64 {
        return Err(bad());
    }
    Ok(())
}

impl Patch {
    /// Whether a register request sets anything that goes into the rule bundle.
    pub fn touches_rules(&self) -> bool {
        non_empty(&self.pools)
            || non_empty(&self.models)
            || non_empty(&self.tools)
            || non_empty(&self.gateway_ids)
            || non_empty(&self.groups)
            || non_empty(&self.emails)
            || non_empty(&self.subjects)
            || set(&self.method)
            || self.required == Some(true)
            || set(&self.provider_id)
            || set(&self.oidc_url)
            || set(&self.hmac_secret)
    }

    /// Validates and applies the patch to `row`, then checks the rules that span fields.
    pub async fn apply(
        &self,
        conn: &mut Conn,
        row: &mut AgentRow,
        is_update: bool,
    ) -> ApiResult<Applied> {
        self.apply_settings(row)?;
        let gateway_ids = self.apply_allow_lists(conn, row).await?;
        self.apply_act_as_allow_lists(row)?;
        let hmac_secret = self.apply_act_as_verification(conn, row).await?;
        if let Some(interactive) = self.interactive {
            row.interactive_access = i64::from(interactive);
        }
        let applied = Applied {
            gateway_ids,
            hmac_secret,
        };

        let secret_stored = if is_update {
            credentials::shared_keys(conn, Owner::AgentActAs, &row.id)
                .await?
                .is_some()
        } else {
            false
        };
        let has_secret = match &applied.hmac_secret {
            Some(s) => s.is_some(),
            None => secret_stored,
        };
        check_act_as(row, has_secret)?;
        check_provider_method(conn, row).await?;
        Ok(applied)
    }

    /// The metadata and the token lifetime.
    fn apply_settings(&self, row: &mut AgentRow) -> ApiResult<()> {
        if let Some(metadata) = &self.metadata {
            if metadata.len() > 64 {
                return Err(invalid("metadata has more than 64 keys"));
            }
            let text = Value::Object(metadata.clone()).to_string();
            if text.len() > 16 * 1024 {
                return Err(invalid("metadata is larger than 16 KiB"));
            }
            row.metadata = text;
        }
        if let Some(text) = &self.token_ttl {
            row.token_ttl_secs = if text.is_empty() {
                ttl::DEFAULT_SECS as i64
            } else {
                let secs = ttl::parse(text).map_err(|e| invalid(format!("token_ttl: {e}")))?;
                secs as i64
            };
        }
        Ok(())
    }

    /// What the agent may call (pools, models, tools) and through which gateways; returns the
    /// gateway grants to write, when the patch sets them (each gateway must exist).
    async fn apply_allow_lists(
        &self,
        conn: &mut Conn,
        row: &mut AgentRow,
    ) -> ApiResult<Option<Vec<String>>> {
        if let Some(list) = &self.pools {
            row.allowed_pool_names = json_list(&names("allowed_pool_names", list)?);
        }
        if let Some(list) = &self.models {
            row.allowed_direct_model_names = json_list(&names("allowed_direct_model_names", list)?);
        }
        if let Some(list) = &self.tools {
            let list = validate::string_list("allowed_tools", list, MAX_LIST)?;
            for (i, t) in list.iter().enumerate() {
                tool_ref(&format!("allowed_tools[{i}]"), t)?;
            }
            row.allowed_tools = json_list(&list);
        }
        let Some(list) = &self.gateway_ids else {
            return Ok(None);
        };
        let mut ids = Vec::new();
        for (i, g) in list.iter().enumerate() {
            let id = validate::id(&format!("allowed_gateway_ids[{i}]"), g)?;
            if gateways::get(conn, &row.workspace_id, &id).await?.is_none() {
                return Err(not_found("gateway", &id));
            }
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        Ok(Some(ids))
    }

    /// The end users the agent may act for: groups, emails and subjects.
    fn apply_act_as_allow_lists(&self, row: &mut AgentRow) -> ApiResult<()> {
        if let Some(list) = &self.groups {
            row.actas_allowed_groups = json_list(&validate::string_list(
                "actas_allowed_groups",
                list,
                MAX_LIST,
            )?);
        }
        if let Some(list) = &self.emails {
            row.actas_allowed_emails = json_list(&validate::string_list(
                "actas_allowed_emails",
                list,
                MAX_LIST,
            )?);
        }
        if let Some(list) = &self.subjects {
            row.actas_allowed_subjects = json_list(&validate::string_list(
                "actas_allowed_subjects",
                list,
                MAX_LIST,
            )?);
        }
        Ok(())
    }

    /// How an end user's identity is verified: the method, whether it is required, the
    /// provider, the OIDC issuer and the named configuration; returns the HMAC secret to
    /// write (`Some(None)` deletes it), when the patch sets one.
    async fn apply_act_as_verification(
        &self,
        conn: &mut Conn,
        row: &mut AgentRow,
    ) -> ApiResult<Option<Option<String>>> {
        if let Some(method) = &self.method {
            row.actas_method = if method.is_empty() {
                None
            } else {
                let m = ActAsMethod::parse(method).ok_or_else(|| {
                    invalid(format!(
                        "actas_method '{}' is unknown; use none, oidc, hmac or bound",
                        validate::clip(method)
                    ))
                })?;
                Some(m.as_str().to_string())
            };
        }
        if let Some(required) = self.required {
            row.actas_required = i64::from(required);
        }
        if let Some(p) = &self.provider_id {
            row.actas_provider_id = match optional_text("actas_provider_id", p, 128)? {
                Some(given) => Some(
                    crate::api::actas::load(conn, &row.workspace_id, &given)
                        .await?
                        .id,
                ),
                None => None,
            };
        }
        if let Some(url) = &self.oidc_url {
            row.actas_oidc_url = if url.is_empty() {
                None
            } else {
                validate::https_url("actas_oidc_url", url)?;
                Some(url.clone())
            };
        }
        if let Some(name) = &self.config_name {
            row.actas_config_name = optional_text("actas_config_name", name, 128)?;
        }
        match &self.hmac_secret {
            None => Ok(None),
            Some(secret) if secret.is_empty() => Ok(Some(None)),
            Some(secret) if secret.len() < 16 || secret.len() > 1024 => {
                Err(invalid("actas_hmac_secret must be 16 to 1024 characters"))
            }
            Some(secret) => Ok(Some(Some(secret.clone()))),
        }
    }
}

/// An agent's provider verifies the way the agent's method says.
async fn check_provider_method(conn: &mut Conn, row: &AgentRow) -> ApiResult<()> {
    let (Some(id), Some(method)) = (&row.actas_provider_id, &row.actas_method) else {
        return Ok(());
    };
    if method != "oidc" && method != "hmac" {
        return Ok(());
    }
    let provider = actas_providers::get(conn, &row.workspace_id, id)
        .await?
        .ok_or_else(|| not_found("act-as verification provider", id))?;
    if provider.method != *method {
        return Err(invalid(format!(
            "actas_provider_id names the {} provider '{}', but actas_method is {method}",
            provider.method, provider.name
        )));
    }
    Ok(())
}

/// The act-as and interactive-access rules, on the agent as it will be stored.
fn check_act_as(row: &AgentRow, has_secret: bool) -> ApiResult<()> {
    let list = |text: &str| serde_json::from_str::<Vec<String>>(text).unwrap_or_default();
    let groups = list(&row.actas_allowed_groups);
    let emails = list(&row.actas_allowed_emails);
    let subjects = list(&row.actas_allowed_subjects);
    let method = row.actas_method.as_deref().and_then(ActAsMethod::parse);
    let has_provider = row.actas_provider_id.is_some();
    match method {
        Some(ActAsMethod::Hmac) if !has_secret && !has_provider => {
            return Err(invalid(
                "actas_method hmac needs actas_hmac_secret or actas_provider_id",
            ))
        }
        Some(ActAsMethod::Oidc) if row.actas_oidc_url.is_none() && !has_provider => {
            return Err(invalid(
                "actas_method oidc needs actas_oidc_url or actas_provider_id",
            ))
        }
        _ => {}
    }
    if row.actas_required != 0 && method.is_none() {
        return Err(invalid("actas_required needs an actas_method"));
    }
    let any_allowed = !groups.is_empty() || !emails.is_empty() || !subjects.is_empty();
    if any_allowed && method.is_none() {
        return Err(invalid(
            "actas_allowed_groups, actas_allowed_emails and actas_allowed_subjects need an \
             actas_method to verify the identity they match",
        ));
    }
    if row.interactive_access != 0 {
        if method == Some(ActAsMethod::Bound) {
            return Err(invalid(
                "interactive_access cannot be combined with device binding (actas_method bound)",
            ));
        }
        let exact = emails.iter().chain(subjects.iter()).any(|e| is_exact(e));
        if !exact {
            return Err(invalid(
                "interactive_access needs at least one exact actas_allowed_emails or \
                 actas_allowed_subjects entry (groups cannot match an interactive user)",
            ));
        }
    }
    Ok(())
}

/// The fields that go into the agent's rule bundle, to tell whether an update changes it;
/// with them how act-as identities are verified (method, provider, issuer URL, secret), since
/// that decides whom the allow lists admit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleInputs {
    lists: [String; 6],
    gateways: Vec<String>,
    trust: [Option<String>; 3],
    secret_changed: bool,
}

impl RuleInputs {
    fn lists(row: &AgentRow) -> [String; 6] {
        [
            row.allowed_pool_names.clone(),
            row.allowed_direct_model_names.clone(),
            row.allowed_tools.clone(),
            row.actas_allowed_groups.clone(),
            row.actas_allowed_emails.clone(),
            row.actas_allowed_subjects.clone(),
        ]
    }

    fn trust(row: &AgentRow) -> [Option<String>; 3] {
        [
            row.actas_method.clone(),
            row.actas_provider_id.clone(),
            row.actas_oidc_url.clone(),
        ]
    }

    pub async fn of(conn: &mut Conn, row: &AgentRow) -> ApiResult<Self> {
        let mut gateways = gateways::grants_of_agent(conn, &row.id).await?;
        gateways.sort();
        Ok(Self {
            lists: Self::lists(row),
            gateways,
            trust: Self::trust(row),
            secret_changed: false,
        })
    }

    pub fn after(row: &AgentRow, applied: &Applied, before: &RuleInputs) -> ApiResult<Self> {
        let mut gateways = applied
            .gateway_ids
            .clone()
            .unwrap_or_else(|| before.gateways.clone());
        gateways.sort();
        Ok(Self {
            lists: Self::lists(row),
            gateways,
            trust: Self::trust(row),
            secret_changed: applied.hmac_secret.is_some(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_refs() {
        assert!(tool_ref("t", "everything/echo").is_ok());
        assert!(tool_ref("t", "my-conn_2/get_weather").is_ok());
        assert!(tool_ref("t", "noslash").is_err());
        assert!(tool_ref("t", "bad conn/echo").is_err());
        assert!(tool_ref("t", "c/").is_err());
        assert!(tool_ref("t", &format!("c/{}", "x".repeat(64))).is_err());
    }
}
