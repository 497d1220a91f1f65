//! Listing a tool connection's operations from here, for an administrator's sync of a
//! per-user tool: MCP over Streamable HTTP ([`portcullis_shared::mcp_client`]) with the
//! administrator's own credential.

use std::collections::BTreeMap;
use std::time::Duration;

use portcullis_shared::api::tools::{HeaderSource, HttpConfig, Protocol};
use portcullis_shared::mcp_client::{list_all_tools, HttpSession, Link};
use reqwest::header::{HeaderName, HeaderValue};
use serde_json::Value;

use crate::error::{corrupt, precondition, ApiError, ApiResult};
use crate::store::tools::ToolRow;

/// Every operation the server lists for the holder of `credential` (header values), asked
/// with the control plane's upstream client ([`crate::oauth::OAuth::http`]).
pub async fn list_tools(
    oauth: &crate::oauth::OAuth,
    row: &ToolRow,
    credential: &BTreeMap<String, String>,
) -> ApiResult<Vec<Value>> {
    if row.protocol != Protocol::StreamableHttp.as_str() {
        return Err(precondition(format!(
            "tool '{}' is not an MCP server over HTTP; a catalog adapter's operations come from \
             its definition",
            row.name
        )));
    }
    let config: HttpConfig =
        serde_json::from_str(&row.protocol_config).map_err(|_| corrupt("protocol_config"))?;
    let url = reqwest::Url::parse(&config.url)
        .map_err(|_| precondition(format!("tool '{}' has no usable URL", row.name)))?;
    let mut headers = Vec::new();
    for h in config
        .headers
        .iter()
        .filter(|h| h.source == HeaderSource::Literal)
    {
        headers.push(header(&h.name, h.value.as_deref().unwrap_or_default())?);
    }
    for (name, value) in credential {
        headers.push(header(name, value)?);
    }
    let session = HttpSession::new(url, headers);
    let link = Link {
        http: oauth.http().clone(),
        timeout: Duration::from_secs(15),
        client_name: "portcullis-controlplane",
        allow_private: oauth.allows_private(),
    };
    list_all_tools(|params| session.call(&link, "tools/list", params, &[]))
        .await
        .map_err(|e| {
            ApiError::Unavailable(format!("listing the tools of '{}' failed: {e}", row.name))
        })
}

fn header(name: &str, value: &str) -> ApiResult<(HeaderName, HeaderValue)> {
    let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| corrupt("header name"))?;
    let mut value = HeaderValue::from_str(value).map_err(|_| corrupt("header value"))?;
    value.set_sensitive(true);
    Ok((name, value))
}
