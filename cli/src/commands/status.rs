//! `portcullis status`: one screen about the workspace — who the key is, what is configured,
//! which agents are live, which gateways synced lately, and the quotas.

use std::collections::BTreeMap;

use portcullis_shared::api::service::{AGENTS, MGMT};
use serde_json::{json, Value};

use crate::ctx::Ctx;
use crate::output::{self, Lines};

/// The list replies the summary counts: (service, operation, reply field).
const LISTS: &[(&str, &str, &str)] = &[
    (MGMT, "ListGateways", "gateways"),
    (MGMT, "ListLLMModelConnections", "models"),
    (MGMT, "ListLLMPools", "pools"),
    (MGMT, "ListMCPServerConnections", "tools"),
    (MGMT, "ListLLMQuotas", "quotas"),
    (MGMT, "ListDeployments", "deployments"),
];

pub async fn run(ctx: &Ctx) -> anyhow::Result<()> {
    let identity = ctx.mgmt("GetIdentity", json!({})).await?["identity"].clone();
    let mut lists = BTreeMap::new();
    for (service, operation, field) in LISTS {
        let reply = ctx.call(service, operation, json!({})).await?;
        lists.insert(
            *field,
            reply[*field].as_array().cloned().unwrap_or_default(),
        );
    }
    // Counted by status with the list's total, so a workspace of any size is counted whole.
    let mut agents = serde_json::Map::new();
    for status in ["active", "suspended", "provisioned", "revoked"] {
        let page = ctx
            .call(AGENTS, "ListAgents", json!({"status": status, "limit": 1}))
            .await?;
        if let Some(n) = page["total"].as_u64().filter(|n| *n > 0) {
            agents.insert(status.into(), n.into());
        }
    }
    let summary = json!({
        "workspace": {"id": identity["workspace_id"], "name": identity["workspace_name"]},
        "key": {"name": identity["key_name"], "role": identity["role"]},
        "gateways": count_by(&lists["gateways"], "state"),
        "models": lists["models"].len(),
        "pools": lists["pools"].len(),
        "tools": lists["tools"].len(),
        "tool_operations": lists["tools"].iter().filter_map(|t| t["tool_count"].as_u64()).sum::<u64>(),
        "agents": agents,
        "quotas": {
            "enabled": lists["quotas"].iter().filter(|q| q["enabled"] == true).count(),
            "disabled": lists["quotas"].iter().filter(|q| q["enabled"] != true).count(),
        },
        "deployments": lists["deployments"].iter().map(|d| json!({
            "name": d["name"], "last_seen_at": d["last_seen_at"],
        })).collect::<Vec<_>>(),
    });
    if ctx.json {
        output::json(&summary);
    } else {
        print(&summary);
    }
    Ok(())
}

/// `{value: count}` of one field over a list.
fn count_by(items: &[Value], field: &str) -> Value {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for item in items {
        let key = item[field].as_str().unwrap_or("unknown").to_string();
        *counts.entry(key).or_default() += 1;
    }
    json!(counts)
}

/// `3 active, 1 disabled`, or `none`.
fn counts_text(counts: &Value) -> String {
    let parts: Vec<String> = counts
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{v} {k}"))
        .collect();
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

fn print(s: &Value) {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let deployments: Vec<String> = s["deployments"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            let seen = d["last_seen_at"].as_str().unwrap_or("never synced");
            format!("{} ({seen})", text(&d["name"]))
        })
        .collect();
    Lines::new()
        .add(
            "workspace",
            format!(
                "{} ({})",
                text(&s["workspace"]["name"]),
                text(&s["workspace"]["id"])
            ),
        )
        .add(
            "key",
            format!("{} ({})", text(&s["key"]["name"]), text(&s["key"]["role"])),
        )
        .add("gateways", counts_text(&s["gateways"]))
        .add("models", &s["models"])
        .add("pools", &s["pools"])
        .add(
            "tools",
            format!(
                "{} connections, {} operations",
                s["tools"], s["tool_operations"]
            ),
        )
        .add("agents", counts_text(&s["agents"]))
        .add(
            "quotas",
            format!(
                "{} enforced, {} tracking only",
                s["quotas"]["enabled"], s["quotas"]["disabled"]
            ),
        )
        .add(
            "deployments",
            if deployments.is_empty() {
                "none".to_string()
            } else {
                deployments.join(", ")
            },
        )
        .print();
}
