//! `svc_tool_*`, `svc_tools_for_connection` and `svc_gateway_tool_source_add`: tool
//! connections (MCP servers) and their catalogs, by name.

use serde_json::{json, Map, Value};

use super::kit::{opt, reply, req, Args, Effect, Joining, Named, Tool, Ty};
use crate::error::ApiResult;

const AUTH: &[&str] = &["none", "api-key", "oauth"];
const CREDENTIAL: &[&str] = &["none", "shared", "per-user"];
/// `svc_tool_add` takes a URL; stdio servers and catalog adapters have their own paths.
const PROTOCOLS: &[&str] = &["streamable-http"];
const HEADERS: &str = "Headers sent upstream: [{name, source: literal|secret|actas, value}] \
                       (value is the text, or the secret's key); replaces the list.";

pub fn tools() -> Vec<Tool> {
    let mut list = vec![
        add_tool(),
        update_tool(),
        list_tool(),
        catalog_tool(),
        gateway_tool_source_add_tool(),
    ];
    list.extend(by_name_tools());
    list.extend(status_tools());
    list
}

/// `svc_tool_add`: a connection by URL, its credentials and the gateways offering it.
fn add_tool() -> Tool {
    Tool {
        name: "svc_tool_add",
        description: "Add a tool connection (an MCP server) by URL, with optional credentials \
                      (stored sealed, never shown again) and the gateways to offer all its \
                      tools on.",
        effect: Effect::Write,
        params: vec![
            req(
                "name",
                Ty::Str,
                "The connection's name; agents call its tools as `name/tool`.",
            ),
            req("url", Ty::Str, "The server's URL."),
            opt("protocol", Ty::Str, "Default streamable-http.").one_of(PROTOCOLS),
            opt(
                "gateways",
                Ty::StrList,
                "Gateways (names or ids) to offer every tool of the connection on.",
            ),
            opt(
                "authorization",
                Ty::Str,
                "The Authorization header value sent upstream (stored as a secret).",
            ),
            opt(
                "auth_method",
                Ty::Str,
                "How the gateway authenticates upstream.",
            )
            .one_of(AUTH),
            opt(
                "credential_type",
                Ty::Str,
                "One shared credential, or each end user's.",
            )
            .one_of(CREDENTIAL),
            opt("headers", Ty::ObjList, HEADERS),
            opt(
                "write_tools",
                Ty::StrList,
                "Tools that change things (for rules).",
            ),
        ],
        operations: &[
            "CreateMCPServerConnection",
            "AddGatewayToolSource",
            "GetMCPServerConnection",
        ],
        run: |a| reply(add(a)),
    }
}

/// `svc_tool_update`: changes a connection, keeping what is not sent.
fn update_tool() -> Tool {
    Tool {
        name: "svc_tool_update",
        description: "Change a tool connection; parameters not sent keep their values.",
        effect: Effect::Write,
        params: vec![
            req("name", Ty::Str, "The connection's name (or id)."),
            opt("url", Ty::Str, "The server's URL."),
            opt(
                "auth_method",
                Ty::Str,
                "How the gateway authenticates upstream.",
            )
            .one_of(AUTH),
            opt("credential_type", Ty::Str, "Shared or per-user.").one_of(CREDENTIAL),
            opt(
                "authorization",
                Ty::Str,
                "Replaces the stored Authorization secret.",
            ),
            opt("headers", Ty::ObjList, HEADERS),
        ],
        operations: &["GetMCPServerConnection", "UpdateMCPServerConnection"],
        run: |a| reply(update(a)),
    }
}

/// `svc_tool_list`: every connection.
fn list_tool() -> Tool {
    Tool {
        name: "svc_tool_list",
        description: "Every tool connection of the workspace.",
        effect: Effect::Read,
        params: vec![],
        operations: &["ListMCPServerConnections"],
        run: |a| reply(async move { a.call("ListMCPServerConnections", json!({})).await }),
    }
}

/// `svc_tools_for_connection`: one connection's stored catalog.
fn catalog_tool() -> Tool {
    Tool {
        name: "svc_tools_for_connection",
        description: "The stored catalog of one connection's tools, independent of gateway \
                      membership and rules; blocked entries only when asked for.",
        effect: Effect::Read,
        params: vec![
            req("name", Ty::Str, "The connection's name (or id)."),
            opt("with_schema", Ty::Bool, "Include each tool's input schema."),
            opt("include_blocked", Ty::Bool, "Include blocked tools."),
        ],
        operations: &["ListConnectionTools"],
        run: |a| {
            reply(async move {
                let mut body = Value::Object(a.take(&["with_schema", "include_blocked"]));
                body["connection_id"] = a.resolve(Named::Tool, "name").await?.into();
                a.call("ListConnectionTools", body).await
            })
        },
    }
}

/// `svc_gateway_tool_source_add`: offers a whole connection on a gateway.
fn gateway_tool_source_add_tool() -> Tool {
    Tool {
        name: "svc_gateway_tool_source_add",
        description: "Offer every tool of a connection (now and later) on a gateway.",
        effect: Effect::Write,
        params: vec![
            req("gateway", Ty::Str, "The gateway's name (or id)."),
            req("connection", Ty::Str, "The connection's name (or id)."),
        ],
        operations: &["AddGatewayToolSource"],
        run: |a| {
            reply(async move {
                let gateway_id = a.resolve(Named::Gateway, "gateway").await?;
                let connection_id = a.resolve(Named::Tool, "connection").await?;
                a.call(
                    "AddGatewayToolSource",
                    json!({"gateway_id": gateway_id, "connection_id": connection_id}),
                )
                .await
            })
        },
    }
}

/// The tools that take only the connection's `name` (and run one operation).
fn by_name_tools() -> Vec<Tool> {
    let name = || vec![req("name", Ty::Str, "The connection's name (or id).")];
    vec![
        Tool {
            name: "svc_tool_get",
            description: "A tool connection by name: protocol, URL, headers, auth, memberships (never secrets).",
            effect: Effect::Read,
            params: name(),
            operations: &["GetMCPServerConnection"],
            run: |a| reply(by_name(a, "GetMCPServerConnection")),
        },
        Tool {
            name: "svc_tool_remove",
            description: "Delete a tool connection: it leaves every gateway; its credentials, headers and catalog are deleted.",
            effect: Effect::Destructive,
            params: name(),
            operations: &["DeleteMCPServerConnection"],
            run: |a| reply(by_name(a, "DeleteMCPServerConnection")),
        },
        Tool {
            name: "svc_tool_oauth_connect",
            description: "Start the administrator's OAuth consent for a shared-OAuth connection; returns the one-time connect URL.",
            effect: Effect::Write,
            params: name(),
            operations: &["BeginMCPServerOAuthConnect"],
            run: |a| reply(by_name(a, "BeginMCPServerOAuthConnect")),
        },
        Tool {
            name: "svc_tool_oauth_disconnect",
            description: "Disconnect a connection's shared OAuth grant (the client settings stay).",
            effect: Effect::Destructive,
            params: name(),
            operations: &["DisconnectMCPServerOAuth"],
            run: |a| reply(by_name(a, "DisconnectMCPServerOAuth")),
        },
    ]
}

/// Block, deprecate and restore one discovered tool.
fn status_tools() -> Vec<Tool> {
    let params = |message: bool| {
        let mut p = vec![
            req("connection", Ty::Str, "The connection's name (or id)."),
            req("tool", Ty::Str, "The tool's name as the server lists it."),
        ];
        if message {
            p.push(opt("message", Ty::Str, "Why; shown to agents."));
        }
        p
    };
    vec![
        Tool {
            name: "svc_tool_block",
            description: "Block one tool: it leaves tools/list and every call is refused.",
            effect: Effect::Destructive,
            params: params(true),
            operations: &["BlockTool"],
            run: |a| reply(set_status(a, "BlockTool")),
        },
        Tool {
            name: "svc_tool_deprecate",
            description: "Deprecate one tool: still callable, marked deprecated with the message.",
            effect: Effect::Write,
            params: params(true),
            operations: &["DeprecateTool"],
            run: |a| reply(set_status(a, "DeprecateTool")),
        },
        Tool {
            name: "svc_tool_restore",
            description: "Restore a blocked or deprecated tool to active.",
            effect: Effect::Write,
            params: params(false),
            operations: &["RestoreTool"],
            run: |a| reply(set_status(a, "RestoreTool")),
        },
    ]
}

async fn by_name(a: Args, method: &'static str) -> ApiResult<Value> {
    let id = a.resolve(Named::Tool, "name").await?;
    a.call(method, json!({"connection_id": id})).await
}

async fn set_status(a: Args, method: &'static str) -> ApiResult<Value> {
    let mut body = Value::Object(a.take(&["tool", "message"]));
    body["connection_id"] = a.resolve(Named::Tool, "connection").await?.into();
    a.call(method, body).await
}

/// The secrets an `authorization` argument stores.
fn secrets(a: &Args) -> Option<Value> {
    a.str("authorization").map(|v| json!({"Authorization": v}))
}

async fn add(a: Args) -> ApiResult<Value> {
    let mut config = Map::new();
    config.insert("url".into(), a.need("url")?.into());
    if let Some(h) = a.map.get("headers").filter(|v| !v.is_null()) {
        config.insert("headers".into(), h.clone());
    }
    let mut body =
        Value::Object(a.take(&["name", "auth_method", "credential_type", "write_tools"]));
    body["protocol"] = a.str("protocol").unwrap_or("streamable-http").into();
    body["protocol_config"] = Value::Object(config);
    if let Some(s) = secrets(&a) {
        body["secret_values"] = s;
    }
    let gateway_ids = a.gateway_ids().await?;
    let created = a.call("CreateMCPServerConnection", body).await?;
    let how = Joining {
        attach: "AddGatewayToolSource",
        get: "GetMCPServerConnection",
        field: "tool",
    };
    a.join(created, gateway_ids, how).await
}

/// Sends the full state to keep with the changes, as the update's overwrite rules require.
async fn update(a: Args) -> ApiResult<Value> {
    let id = a.resolve(Named::Tool, "name").await?;
    let stored = a
        .call("GetMCPServerConnection", json!({"connection_id": id}))
        .await?;
    let t = &stored["tool"];
    let mut config = t["protocol_config"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    if let Some(url) = a.str("url") {
        config.insert("url".into(), url.into());
    }
    if let Some(h) = a.map.get("headers").filter(|v| !v.is_null()) {
        config.insert("headers".into(), h.clone());
    }
    let mut body = Value::Object(a.take(&["auth_method", "credential_type"]));
    body["connection_id"] = id.into();
    body["protocol"] = t["protocol"].clone();
    body["protocol_config"] = Value::Object(config);
    body["field_classifications"] = t["field_classifications"].clone();
    body["write_tools"] = t["write_tools"].clone();
    if let Some(s) = secrets(&a) {
        body["secret_values"] = s;
    }
    a.call("UpdateMCPServerConnection", body).await
}
