//! Per-user connections (DESIGN §14): which model or tool connection takes each person's own
//! credential, and how a person's API key becomes the header it sends. Read by the Connect
//! door (`GetCredential`, listing and deleting people's credentials) and by the provision
//! page that stores a person's key.

use std::collections::BTreeMap;

use portcullis_shared::api::{AuthMethod, CredentialType};

use crate::error::{not_found, precondition, ApiResult};
use crate::store::credentials::Owner;
use crate::store::{models, tools, Conn};
use crate::validate;

/// A per-user API-key connection: how a person's key becomes the header it sends.
pub struct PerUser {
    pub owner: Owner,
    pub id: String,
    pub name: String,
    /// A model's provider (its API-key header); `None` for a tool (`Authorization: Bearer`,
    /// or the header `auth_config.header` names).
    provider: Option<String>,
    /// A tool's header and scheme (an installed adapter's), when not `Authorization: Bearer`.
    header: Option<(String, String)>,
    /// Each person consents at the provider (per-user OAuth) instead of entering a key.
    pub oauth: bool,
}

impl PerUser {
    /// The stored values for a key a person entered.
    pub fn secret(&self, key: &str) -> Result<BTreeMap<String, String>, String> {
        let (header, scheme) = match (&self.provider, &self.header) {
            (Some(provider), _) => {
                let (h, v) = portcullis_shared::provider::api_key_secret(provider, key)?;
                return Ok([(h, v)].into());
            }
            (None, Some((h, s))) => (h.clone(), s.clone()),
            (None, None) => ("Authorization".to_string(), "Bearer ".to_string()),
        };
        // A key pasted with its scheme is not prefixed twice.
        let bare = key
            .get(..scheme.len())
            .filter(|p| !scheme.is_empty() && p.eq_ignore_ascii_case(&scheme))
            .map_or(key, |_| &key[scheme.len()..]);
        let (name, value) = (header, format!("{scheme}{bare}"));
        Ok([(name, value)].into())
    }
}

/// The connection, which must take per-user API keys.
pub async fn per_user(conn: &mut Conn, ws: &str, owner: Owner, id: &str) -> ApiResult<PerUser> {
    per_user_of(conn, ws, Some(owner), id).await
}

/// [`per_user`]; with no owner given, the tool with this id, else the model.
async fn per_user_of(
    conn: &mut Conn,
    ws: &str,
    owner: Option<Owner>,
    id: &str,
) -> ApiResult<PerUser> {
    let id = validate::id("connection_id", id)?;
    let tool = match owner {
        Some(Owner::Model) => None,
        _ => tools::get(conn, ws, &id).await?,
    };
    let (owner, name, method, ctype, provider, header) = match (tool, owner) {
        (Some(t), _) => {
            let config: serde_json::Value =
                serde_json::from_str(&t.auth_config).unwrap_or_default();
            let header = config["header"]
                .as_str()
                .filter(|h| !h.is_empty())
                .map(|h| {
                    (
                        h.to_string(),
                        config["scheme"].as_str().unwrap_or_default().to_string(),
                    )
                });
            (
                Owner::Tool,
                t.name,
                t.auth_method,
                t.credential_type,
                None,
                header,
            )
        }
        (None, Some(Owner::Model) | None) => {
            let m = models::get(conn, ws, &id)
                .await?
                .ok_or_else(|| not_found("model", &id))?;
            let (name, method, ctype) = (m.name, m.auth_method, m.credential_type);
            (Owner::Model, name, method, ctype, Some(m.provider), None)
        }
        (None, Some(_)) => return Err(not_found("tool connection", &id)),
    };
    if ctype != CredentialType::PerUser.as_str() {
        return Err(precondition(format!(
            "'{name}' does not use per-user credentials"
        )));
    }
    let oauth = method == AuthMethod::OAuth.as_str();
    Ok(PerUser {
        owner,
        id,
        name,
        provider,
        header,
        oauth,
    })
}

/// A connection id names a tool or a model.
pub async fn either(conn: &mut Conn, ws: &str, id: &str) -> ApiResult<PerUser> {
    per_user_of(conn, ws, None, id).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(header: Option<(&str, &str)>) -> PerUser {
        PerUser {
            owner: Owner::Tool,
            id: "t".into(),
            name: "t".into(),
            provider: None,
            header: header.map(|(h, s)| (h.to_string(), s.to_string())),
            oauth: false,
        }
    }

    #[test]
    fn a_key_becomes_its_header_once_prefixed() {
        let plain = tool(None).secret("abc").unwrap();
        assert_eq!(plain["Authorization"], "Bearer abc");
        let pasted = tool(None).secret("bearer abc").unwrap();
        assert_eq!(pasted["Authorization"], "Bearer abc", "not prefixed twice");
        let custom = tool(Some(("X-Api-Key", ""))).secret("abc").unwrap();
        assert_eq!(custom["X-Api-Key"], "abc");
        let model = PerUser {
            provider: Some("anthropic".into()),
            ..tool(None)
        };
        assert_eq!(model.secret("sk-ant").unwrap()["x-api-key"], "sk-ant");
    }
}
