//! Catalog adapters as tool connections: `ListCatalogServices`, and install, upgrade and
//! uninstall of `rest` connections. Install copies the newest enabled definition into the
//! connection and pins it; upgrade re-copies the newest one, keeping the name, the tool filter
//! and the stored credential. The gateways discover the operations like any connection's, so
//! block, deprecate and restore apply to them.

use std::collections::BTreeMap;

use portcullis_shared::adapter::{Definition, Installed};
use portcullis_shared::api::catalog::*;
use portcullis_shared::api::tools::{
    Protocol, ToolConnectionIdRequest, ToolConnectionResponse, UpdateMCPServerConnectionRequest,
};
use portcullis_shared::api::workspace::Permission;
use portcullis_shared::api::{AuthMethod, CredentialType, Empty};

use super::{checks, json_text, load, views};
use crate::api::{unary, Access, Ctx, Operation};
use crate::catalog::Catalog;
use crate::error::{invalid, not_found, precondition, ApiError, ApiResult};
use crate::store::credentials::{self, Owner};
use crate::store::{gateways, now_ms, tools, WriteTx};
use crate::validate;

pub fn operations() -> Vec<(&'static str, Operation)> {
    let view = Access::Platform(Permission::GatewayView);
    let manage = Access::Platform(Permission::GatewayManage);
    vec![
        ("ListCatalogServices", unary(view, list)),
        ("InstallCatalogConnection", unary(manage, install)),
        ("UpgradeCatalogConnection", unary(manage, upgrade)),
        ("UninstallCatalogConnection", unary(manage, uninstall)),
    ]
}

fn catalog(ctx: &Ctx) -> Catalog {
    Catalog::new(ctx.app.config.catalog_dir.clone())
}

/// A registry that cannot be read is the deployment's fault, not the caller's.
fn unreadable(e: String) -> ApiError {
    ApiError::Internal(e)
}

async fn list(
    ctx: Ctx,
    _req: ListCatalogServicesRequest,
) -> ApiResult<ListCatalogServicesResponse> {
    let all = catalog(&ctx).all().map_err(unreadable)?;
    let mut services: Vec<CatalogService> = Vec::new();
    for d in all.into_iter().filter(|d| d.enabled) {
        // Sorted by version: a later one of the same slug replaces the earlier.
        services.retain(|s| s.slug != d.slug);
        services.push(CatalogService {
            slug: d.slug.clone(),
            title: d.title.clone(),
            description: d.description.clone(),
            version: d.version,
            auth_method: d.auth.method.clone(),
            auth_header_name: d.auth.header.clone(),
            supports_per_user: d.auth.supports_per_user,
            operations: d.operations.iter().map(|o| o.name.clone()).collect(),
        });
    }
    Ok(ListCatalogServicesResponse { services })
}

/// The auth the connection is stored with, and the credential checked against the adapter.
fn auth(
    d: &Definition,
    ctype: Option<CredentialType>,
    secrets: &BTreeMap<String, String>,
) -> ApiResult<(AuthMethod, CredentialType)> {
    if d.auth.method == "none" {
        if !secrets.is_empty() || ctype.is_some_and(|c| c != CredentialType::None) {
            return Err(invalid(format!(
                "{} takes no credential: leave secret_values and credential_type out",
                d.slug
            )));
        }
        return Ok((AuthMethod::None, CredentialType::None));
    }
    let ctype = match ctype.unwrap_or(CredentialType::Shared) {
        CredentialType::PerUser if !d.auth.supports_per_user => {
            return Err(invalid(format!(
                "{} does not support per-user credentials; install it shared",
                d.slug
            )))
        }
        CredentialType::None => {
            return Err(invalid(format!(
                "{} needs a credential: credential_type is shared or per-user",
                d.slug
            )))
        }
        c => c,
    };
    match ctype {
        CredentialType::PerUser if !secrets.is_empty() => Err(invalid(
            "a per-user install stores no shared secret: each person provisions their own",
        )),
        CredentialType::Shared => {
            let keys: Vec<&String> = secrets.keys().collect();
            if keys != [&d.auth.header] {
                return Err(invalid(format!(
                    "secret_values must hold exactly {{\"{}\": …}}, the credential {} sends",
                    d.auth.header, d.slug
                )));
            }
            checks::check_secrets(AuthMethod::ApiKey, ctype, secrets)?;
            Ok((AuthMethod::ApiKey, ctype))
        }
        c => Ok((AuthMethod::ApiKey, c)),
    }
}

fn filter(d: &Definition, given: Option<Vec<String>>) -> ApiResult<Vec<String>> {
    let list = validate::string_list("tool_filter", &given.unwrap_or_default(), 128)?;
    for name in &list {
        if !d.operations.iter().any(|o| &o.name == name) {
            let known: Vec<&str> = d.operations.iter().map(|o| o.name.as_str()).collect();
            return Err(invalid(format!(
                "tool_filter: {} has no operation '{}'; it has {}",
                d.slug,
                validate::clip(name),
                known.join(", ")
            )));
        }
    }
    Ok(list)
}

/// The write operations of an installed adapter, for rules.
fn writes(installed: &Installed) -> Vec<String> {
    installed
        .operations()
        .filter(|o| o.write)
        .map(|o| o.name.clone())
        .collect()
}

async fn install(
    ctx: Ctx,
    req: InstallCatalogConnectionRequest,
) -> ApiResult<InstallCatalogConnectionResponse> {
    let name = checks::connection_name(&req.name)?;
    let d = catalog(&ctx)
        .latest(&req.slug)
        .map_err(unreadable)?
        .ok_or_else(|| not_found("catalog adapter", &validate::clip(&req.slug)))?;
    let secrets = req.secret_values.unwrap_or_default();
    let (method, ctype) = auth(&d, req.credential_type, &secrets)?;
    let base_url = match req.base_url.filter(|u| !u.is_empty()) {
        Some(u) => {
            validate::target_url("base_url", &u)?;
            Some(
                portcullis_shared::adapter::base_url(&u)
                    .map_err(|e| invalid(format!("base_url: {e}")))?
                    .to_string(),
            )
        }
        None => None,
    };
    let installed = Installed {
        slug: d.slug.clone(),
        version: d.version,
        base_url,
        tool_filter: filter(&d, req.tool_filter)?,
        definition: d,
    };
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    super::name_free(tx.conn(), &ws, &name).await?;
    let now = now_ms();
    let row = tools::ToolRow {
        id: uuid::Uuid::new_v4().to_string(),
        workspace_id: ws.clone(),
        name,
        protocol: Protocol::Rest.as_str().to_string(),
        protocol_config: json_text(&installed),
        auth_method: method.as_str().to_string(),
        credential_type: ctype.as_str().to_string(),
        // How people's own keys are sent on a per-user install.
        auth_config: json_text(&serde_json::json!({
            "header": installed.definition.auth.header,
            "scheme": installed.definition.auth.scheme,
        })),
        field_classifications: "null".into(),
        write_tools: json_text(&writes(&installed)),
        created_at: now,
        updated_at: now,
    };
    tools::insert(tx.conn(), &row).await?;
    super::put_shared(&mut tx, &ctx, &ws, &row.id, &secrets).await?;
    let tool = views::tool(tx.conn(), &row).await?;
    tx.commit().await?;
    tracing::info!(connection_id = %row.id, slug = %installed.slug, version = installed.version, "Catalog adapter installed.");
    Ok(InstallCatalogConnectionResponse {
        connection_id: row.id,
        tool,
    })
}

/// A connection installed from the catalog, with what it stores.
async fn load_installed(
    tx: &mut WriteTx,
    ws: &str,
    id: &str,
) -> ApiResult<(tools::ToolRow, Installed)> {
    let row = load(tx.conn(), ws, id).await?;
    if row.protocol != Protocol::Rest.as_str() {
        return Err(precondition(format!(
            "tool '{}' was not installed from the catalog; use the tool operations",
            row.name
        )));
    }
    let installed = serde_json::from_str(&row.protocol_config)
        .map_err(|_| views::corrupt("protocol_config"))?;
    Ok((row, installed))
}

async fn upgrade(
    ctx: Ctx,
    req: ToolConnectionIdRequest,
) -> ApiResult<UpgradeCatalogConnectionResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let (mut row, old) = load_installed(&mut tx, &ws, &req.connection_id).await?;
    let d = catalog(&ctx)
        .latest(&old.slug)
        .map_err(unreadable)?
        .ok_or_else(|| {
            precondition(format!("catalog adapter {} is no longer offered", old.slug))
        })?;
    check_upgrade(&old, &d, &row)?;
    let installed = Installed {
        slug: old.slug.clone(),
        version: d.version,
        base_url: old.base_url.clone(),
        tool_filter: old.tool_filter.clone(),
        definition: d,
    };
    row.protocol_config = json_text(&installed);
    // Write tools an administrator set by hand are kept; the adapter's own follow it.
    if row.write_tools == json_text(&writes(&old)) {
        row.write_tools = json_text(&writes(&installed));
    }
    row.updated_at = now_ms();
    tools::update(tx.conn(), &row).await?;
    let tool = views::tool(tx.conn(), &row).await?;
    tx.commit().await?;
    tracing::info!(connection_id = %row.id, from = old.version, to = installed.version, "Catalog adapter upgraded.");
    Ok(UpgradeCatalogConnectionResponse {
        tool,
        from_version: old.version,
        to_version: installed.version,
    })
}

/// An upgrade only moves forward, to a version that sends the credential the same way, still
/// has every filtered operation, and still takes per-user credentials if the connection does.
fn check_upgrade(old: &Installed, d: &Definition, row: &tools::ToolRow) -> ApiResult<()> {
    let refuse = |why: String| {
        Err(precondition(format!(
            "{} v{} → v{}: {why}",
            d.slug, old.version, d.version
        )))
    };
    if d.version <= old.version {
        return Err(precondition(format!(
            "'{}' already runs {} v{}, the newest enabled version",
            row.name, d.slug, old.version
        )));
    }
    let (a, b) = (&old.definition.auth, &d.auth);
    if (a.method.as_str(), a.header.as_str(), a.scheme.as_str())
        != (b.method.as_str(), b.header.as_str(), b.scheme.as_str())
    {
        return refuse("the credential is sent differently; install it anew".into());
    }
    if row.credential_type == CredentialType::PerUser.as_str() && !b.supports_per_user {
        return refuse("the new version takes no per-user credentials".into());
    }
    if let Err(e) = filter(d, Some(old.tool_filter.clone())) {
        return refuse(format!("the tool filter no longer fits ({e})"));
    }
    Ok(())
}

/// Removes the connection, its memberships, its catalog and its credentials.
async fn uninstall(ctx: Ctx, req: ToolConnectionIdRequest) -> ApiResult<Empty> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let (row, _) = load_installed(&mut tx, &ws, &req.connection_id).await?;
    gateways::remove_target(tx.conn(), &row.id).await?;
    credentials::delete_all(tx.conn(), Owner::Tool, &row.id).await?;
    tools::delete(tx.conn(), &ws, &row.id).await?;
    tx.commit().await?;
    tracing::info!(connection_id = %row.id, "Catalog adapter uninstalled.");
    Ok(Empty {})
}

/// `UpdateMCPServerConnection` on an installed connection: the definition changes only by
/// upgrade, so only the name, the credential, the classifications and the write tools change.
pub async fn update_installed(
    ctx: &Ctx,
    mut tx: WriteTx,
    mut row: tools::ToolRow,
    req: UpdateMCPServerConnectionRequest,
) -> ApiResult<ToolConnectionResponse> {
    let ws = ctx.workspace_id().to_string();
    let protocol_kept = req
        .protocol
        .as_deref()
        .is_none_or(|p| p.is_empty() || p == "rest");
    if !protocol_kept
        || req.protocol_config.is_some()
        || req.auth_method.is_some()
        || req.credential_type.is_some()
        || req.auth_config.as_ref().is_some_and(|c| !c.is_empty())
    {
        return Err(precondition(format!(
            "tool '{}' is installed from the catalog: its protocol, definition and auth change only by UpgradeCatalogConnection (or a new install); an update may change its name, secret_values, field_classifications and write_tools",
            row.name
        )));
    }
    super::rename(tx.conn(), &ws, &mut row, req.name.as_deref()).await?;
    if let Some(secrets) = req.secret_values.filter(|s| !s.is_empty()) {
        let installed: Installed = serde_json::from_str(&row.protocol_config)
            .map_err(|_| views::corrupt("protocol_config"))?;
        let ctype = CredentialType::parse(&row.credential_type)
            .ok_or_else(|| views::corrupt("credential_type"))?;
        auth(&installed.definition, Some(ctype), &secrets)?;
        super::put_shared(&mut tx, ctx, &ws, &row.id, &secrets).await?;
    }
    if req.field_classifications.is_some() {
        row.field_classifications = super::classifications(req.field_classifications)?;
    }
    if req.write_tools.is_some() {
        row.write_tools = super::write_tools(req.write_tools)?;
    }
    row.updated_at = now_ms();
    tools::update(tx.conn(), &row).await?;
    let tool = views::tool(tx.conn(), &row).await?;
    tx.commit().await?;
    Ok(ToolConnectionResponse { tool })
}
