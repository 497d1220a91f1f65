//! `svc_agents_*`: agents, their lifecycle and their API keys. The agent operations take an
//! agent's id or name already, so these tools pass their arguments through.

use serde_json::Value;

use super::kit::{opt, reply, req, Args, Effect, Param, Tool, Ty};
use crate::error::ApiResult;

const STATUS: &[&str] = &["active", "suspended", "provisioned", "revoked"];
const ACTAS_METHODS: &[&str] = &["none", "hmac", "oidc", "bound"];

/// Runs `method` with the tool's arguments as its body.
async fn pass(a: Args, method: &'static str) -> ApiResult<Value> {
    let body = Value::Object(a.map.clone());
    a.call(method, body).await
}

/// The settings register and update share.
fn settings() -> Vec<Param> {
    let list = |name, what| opt(name, Ty::StrList, what);
    vec![
        opt("metadata", Ty::Object, "Free-form metadata."),
        opt(
            "token_ttl",
            Ty::Str,
            "Lifetime of exchanged tokens, such as 10m or 1h (1m to 24h).",
        ),
        list(
            "allowed_pool_names",
            "Pools the agent may call (replaces the list).",
        ),
        list(
            "allowed_direct_model_names",
            "Models the agent may call directly (replaces the list).",
        ),
        list(
            "allowed_tools",
            "Tools as connection/tool (replaces the list).",
        ),
        list(
            "allowed_gateway_ids",
            "Gateways the agent may use (replaces the list).",
        ),
        list(
            "actas_allowed_groups",
            "End-user groups the agent may act for.",
        ),
        list(
            "actas_allowed_emails",
            "End-user emails the agent may act for.",
        ),
        list(
            "actas_allowed_subjects",
            "End-user subjects the agent may act for.",
        ),
        opt(
            "actas_method",
            Ty::Str,
            "How end-user identity is verified.",
        )
        .one_of(ACTAS_METHODS),
        opt(
            "actas_required",
            Ty::Bool,
            "Refuse calls without a verified end user.",
        ),
        opt(
            "actas_provider_id",
            Ty::Str,
            "The act-as verification provider.",
        ),
        opt("actas_oidc_url", Ty::Str, "The OIDC issuer URL (https)."),
        opt(
            "actas_hmac_secret",
            Ty::Str,
            "The HMAC secret (stored sealed).",
        ),
        opt(
            "actas_config_name",
            Ty::Str,
            "A named act-as configuration.",
        ),
        opt(
            "interactive_access",
            Ty::Bool,
            "Allow people to sign in to the agent.",
        ),
    ]
}

fn agent_id() -> Param {
    req("agent_id", Ty::Str, "The agent's id or name.")
}

pub fn tools() -> Vec<Tool> {
    let mut register = vec![
        req(
            "name",
            Ty::Str,
            "The agent's name, unique in the workspace.",
        ),
        opt("parent_id", Ty::Str, "The parent agent's id."),
    ];
    register.extend(settings());
    let mut update = vec![agent_id()];
    update.extend(settings());
    let mut list = vec![
        Tool {
            name: "svc_agents_list",
            description: "Agents of the workspace, optionally by status, paginated.",
            effect: Effect::Read,
            params: vec![
                opt("status", Ty::Str, "Only agents in this status.").one_of(STATUS),
                opt("limit", Ty::Int, "Page size (default 100, at most 1000)."),
                opt("offset", Ty::Int, "Agents to skip."),
            ],
            operations: &["ListAgents"],
            run: |a| reply(pass(a, "ListAgents")),
        },
        Tool {
            name: "svc_agents_get",
            description: "One agent, with its endpoints on a gateway.",
            effect: Effect::Read,
            params: vec![
                agent_id(),
                opt("gateway_id", Ty::Str, "Needed when the agent reaches more than one gateway."),
            ],
            operations: &["GetAgent"],
            run: |a| reply(pass(a, "GetAgent")),
        },
        Tool {
            name: "svc_agents_register",
            description: "Register an agent. Any pool, model, tool, gateway or act-as setting also needs rules.deploy.",
            effect: Effect::Write,
            params: register,
            operations: &["RegisterAgent"],
            run: |a| reply(pass(a, "RegisterAgent")),
        },
        Tool {
            name: "svc_agents_update",
            description: "Change an agent; parameters not sent keep their values, lists replace.",
            effect: Effect::Write,
            params: update,
            operations: &["UpdateAgent"],
            run: |a| reply(pass(a, "UpdateAgent")),
        },
    ];
    list.push(Tool {
        name: "svc_tools_list",
        description: "Every agent and the tools it reaches: offered on a gateway it may use, \
                      in the catalog and not blocked, and named by its allow list.",
        effect: Effect::Read,
        params: vec![],
        operations: &["ListToolReach"],
        run: |a| reply(pass(a, "ListToolReach")),
    });
    list.extend(lifecycle_tools());
    list.extend(key_tools());
    list.extend(grant_tools());
    list
}

fn grant_tools() -> Vec<Tool> {
    vec![
        Tool {
            name: "svc_agents_interactive_grants_list",
            description: "Grants people gave MCP clients to use agents interactively. A \
                          platform key holds none of its own: set all_users, or agent_id.",
            effect: Effect::Read,
            params: vec![
                opt(
                    "all_users",
                    Ty::Bool,
                    "Everyone's grants, not only your own.",
                ),
                opt(
                    "agent_id",
                    Ty::Str,
                    "Only this agent's grants (id or name); implies all_users.",
                ),
            ],
            operations: &["ListInteractiveGrants"],
            run: |a| reply(pass(a, "ListInteractiveGrants")),
        },
        Tool {
            name: "svc_agents_interactive_grants_revoke",
            description: "Revoke an interactive grant: its refresh tokens end at once, its \
                          access tokens when gateways next sync.",
            effect: Effect::Destructive,
            params: vec![req("grant_id", Ty::Str, "The grant's id (a UUID).")],
            operations: &["RevokeInteractiveGrant"],
            run: |a| reply(pass(a, "RevokeInteractiveGrant")),
        },
    ]
}

fn lifecycle_tools() -> Vec<Tool> {
    let reason = || opt("reason", Ty::Str, "Why (recorded in the audit trail).");
    let cascade = || opt("cascade", Ty::Bool, "Also act on the agent's descendants.");
    vec![
        Tool {
            name: "svc_agents_suspend",
            description: "Suspend an agent: its keys stop working until it is reactivated.",
            effect: Effect::Destructive,
            params: vec![agent_id(), reason(), cascade()],
            operations: &["SuspendAgent"],
            run: |a| reply(pass(a, "SuspendAgent")),
        },
        Tool {
            name: "svc_agents_reactivate",
            description: "Reactivate a suspended agent.",
            effect: Effect::Write,
            params: vec![agent_id()],
            operations: &["ReactivateAgent"],
            run: |a| reply(pass(a, "ReactivateAgent")),
        },
        Tool {
            name: "svc_agents_revoke",
            description:
                "Revoke an agent for good: its keys stop working and it cannot be reactivated.",
            effect: Effect::Destructive,
            params: vec![agent_id(), reason()],
            operations: &["RevokeAgent"],
            run: |a| reply(pass(a, "RevokeAgent")),
        },
        Tool {
            name: "svc_agents_delete",
            description: "Delete an agent and its keys.",
            effect: Effect::Destructive,
            params: vec![agent_id(), reason(), cascade()],
            operations: &["DeleteAgent"],
            run: |a| reply(pass(a, "DeleteAgent")),
        },
    ]
}

fn key_tools() -> Vec<Tool> {
    let agent = || req("agent", Ty::Str, "The agent's name (or id).");
    let key_name = || req("key_name", Ty::Str, "The key's name.");
    let gateway = || {
        opt(
            "gateway_id",
            Ty::Str,
            "The gateway whose endpoints to return.",
        )
    };
    vec![
        Tool {
            name: "svc_agents_create_key",
            description: "Issue an API key for an agent; the secret is returned once.",
            effect: Effect::Write,
            params: vec![
                agent(),
                req("name", Ty::Str, "The key's name, unique per agent."),
                gateway(),
            ],
            operations: &["CreateAgentKey"],
            run: |a| reply(pass(a, "CreateAgentKey")),
        },
        Tool {
            name: "svc_agents_list_keys",
            description: "An agent's keys (never their secrets).",
            effect: Effect::Read,
            params: vec![agent()],
            operations: &["ListAgentKeys"],
            run: |a| reply(pass(a, "ListAgentKeys")),
        },
        Tool {
            name: "svc_agents_rotate_key",
            description:
                "Replace a key's secret: the old one stops working, the new one is returned once.",
            effect: Effect::Destructive,
            params: vec![agent(), key_name(), gateway()],
            operations: &["RotateAgentKey"],
            run: |a| reply(pass(a, "RotateAgentKey")),
        },
        Tool {
            name: "svc_agents_revoke_key",
            description: "Revoke one of an agent's keys.",
            effect: Effect::Destructive,
            params: vec![agent(), key_name()],
            operations: &["RevokeAgentKey"],
            run: |a| reply(pass(a, "RevokeAgentKey")),
        },
    ]
}
