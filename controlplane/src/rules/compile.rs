//! Compiles an agent's allow lists into Cedar policies, exactly as the spec says: a permit per
//! gateway, pool, direct model and tool, and one `forbid … unless` over the act-as allow lists.
//! Every policy carries an `@id`, qualified by the bundle prefix, that denials report.

use std::fmt::Write;

use portcullis_shared::policy::{cedar_ref, quote, Action, Kind};

/// Policy ids of the all-agents gateway grants start with this.
pub const GATEWAY_PREFIX: &str = "gateway";

pub fn agent_prefix(agent_id: &str) -> String {
    format!("agent/{agent_id}")
}

pub struct AgentRules<'a> {
    pub agent_id: &'a str,
    pub gateway_ids: &'a [String],
    pub pools: &'a [String],
    pub models: &'a [String],
    pub tools: &'a [String],
    pub groups: &'a [String],
    pub emails: &'a [String],
    pub subjects: &'a [String],
}

fn permit(out: &mut String, id: &str, principal: &str, action: &str, resource: &str) {
    let _ = writeln!(
        out,
        "@id({})\npermit (principal == {principal}, action {action}, resource == {resource});\n",
        quote(id)
    );
}

fn set(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| quote(s)).collect();
    format!("[{}]", quoted.join(", "))
}

/// The agent's managed policies; empty when it has no rule at all.
pub fn agent_policies(a: &AgentRules<'_>) -> String {
    let principal = cedar_ref(Kind::Agent, a.agent_id);
    let mut out = String::new();
    let eq = |action: Action| format!("== {}", action.cedar());
    for g in a.gateway_ids {
        let resource = cedar_ref(Kind::Gateway, g);
        permit(
            &mut out,
            &format!("gateway/{g}"),
            &principal,
            &eq(Action::GatewayAccess),
            &resource,
        );
    }
    for p in a.pools {
        let resource = cedar_ref(Kind::Pool, p);
        permit(
            &mut out,
            &format!("pool/{p}"),
            &principal,
            &eq(Action::LlmInvoke),
            &resource,
        );
    }
    for m in a.models {
        let resource = cedar_ref(Kind::Model, m);
        permit(
            &mut out,
            &format!("model/{m}"),
            &principal,
            &eq(Action::LlmInvoke),
            &resource,
        );
    }
    let mcp = format!(
        "in [{}, {}]",
        Action::McpCall.cedar(),
        Action::McpDiscover.cedar()
    );
    for t in a.tools {
        permit(
            &mut out,
            &format!("tool/{t}"),
            &principal,
            &mcp,
            &cedar_ref(Kind::Tool, t),
        );
    }
    let mut matches = Vec::new();
    if !a.groups.is_empty() {
        matches.push(format!(
            "context.act_as.groups.containsAny({})",
            set(a.groups)
        ));
    }
    for (field, list) in [("email", a.emails), ("sub", a.subjects)] {
        let (exact, patterns): (Vec<String>, Vec<String>) =
            list.iter().cloned().partition(|v| !v.contains('*'));
        if !exact.is_empty() {
            matches.push(format!("{}.contains(context.act_as.{field})", set(&exact)));
        }
        for p in patterns {
            matches.push(format!("context.act_as.{field} like {}", quote(&p)));
        }
    }
    if !matches.is_empty() {
        let _ = writeln!(
            out,
            "@id(\"actas\")\nforbid (principal == {principal}, action, resource)\nunless {{ \
             context.act_as.present && ({}) }};\n",
            matches.join(" || ")
        );
    }
    out
}

/// Policy ids of the managed blocked-operation forbids start with this.
pub const BLOCKED_PREFIX: &str = "blocked";

/// One forbid per blocked operation: hidden from discovery and denied on call, whatever any
/// other rule permits. Empty when nothing is blocked, so the bundle disappears.
pub fn blocked_tool_policies(blocked: &[(String, String)]) -> String {
    let mut out = String::new();
    for (connection, tool) in blocked {
        let name = format!("{connection}/{tool}");
        let _ = writeln!(
            out,
            "@id({})\nforbid (principal, action in [{}, {}], resource == {});\n",
            quote(&name),
            Action::McpCall.cedar(),
            Action::McpDiscover.cedar(),
            cedar_ref(Kind::Tool, &name)
        );
    }
    out
}

/// One permit per gateway granted to every agent of the workspace.
pub fn all_agents_policies(gateway_ids: &[String]) -> String {
    let mut out = String::new();
    for g in gateway_ids {
        let _ = writeln!(
            out,
            "@id({})\npermit (principal is {}, action == {}, resource == {});\n",
            quote(&format!("{g}/all-agents")),
            Kind::Agent.type_name(),
            Action::GatewayAccess.cedar(),
            cedar_ref(Kind::Gateway, g)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::check;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn an_agent_without_rules_compiles_to_nothing() {
        let empty: Vec<String> = Vec::new();
        let rules = AgentRules {
            agent_id: "a1",
            gateway_ids: &empty,
            pools: &empty,
            models: &empty,
            tools: &empty,
            groups: &empty,
            emails: &empty,
            subjects: &empty,
        };
        assert_eq!(agent_policies(&rules), "");
    }

    #[test]
    fn every_field_compiles_and_validates_with_stable_ids() {
        let (g, p, m, t) = (
            strings(&["g1"]),
            strings(&["gpt"]),
            strings(&["claude-3.5"]),
            strings(&["everything/echo"]),
        );
        let (groups, emails, subs) = (
            strings(&["eng"]),
            strings(&["a@x.com", "*@corp.com"]),
            strings(&["u1"]),
        );
        let rules = AgentRules {
            agent_id: "a1",
            gateway_ids: &g,
            pools: &p,
            models: &m,
            tools: &t,
            groups: &groups,
            emails: &emails,
            subjects: &subs,
        };
        let text = agent_policies(&rules);
        let ids = check(&agent_prefix("a1"), &text).unwrap();
        assert_eq!(
            ids,
            [
                "agent/a1/gateway/g1",
                "agent/a1/pool/gpt",
                "agent/a1/model/claude-3.5",
                "agent/a1/tool/everything/echo",
                "agent/a1/actas"
            ]
        );
        assert!(
            text.contains(r#"context.act_as.email like "*@corp.com""#),
            "{text}"
        );
    }

    #[test]
    fn all_agents_grants_validate() {
        let ids = check(
            GATEWAY_PREFIX,
            &all_agents_policies(&strings(&["g1", "g2"])),
        )
        .unwrap();
        assert_eq!(ids, ["gateway/g1/all-agents", "gateway/g2/all-agents"]);
    }
}
