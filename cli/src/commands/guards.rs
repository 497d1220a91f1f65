//! `portcullis guard create|update|get|list|delete|test`.

use std::io::Read as _;

use anyhow::Context as _;
use portcullis_shared::api::guards::*;
use portcullis_shared::api::service::RULES;
use serde_json::{json, Value};

use crate::args::{GuardCmd, GuardFields};
use crate::ctx::{Ctx, Reply};
use crate::output::{self, Lines};
use crate::parse;

/// The kind and config the flags give: `--config` as sent, or one of `--pattern`,
/// `--keyword`, `--pii-type`, which also imply the kind when `--kind` is not given.
fn config(f: &GuardFields) -> anyhow::Result<(Option<GuardKind>, Option<Value>)> {
    if let Some(text) = &f.config {
        let value: Value = serde_json::from_str(text).context("--config is not valid JSON")?;
        return Ok((f.kind, Some(value)));
    }
    let (implied, value) = if !f.patterns.is_empty() {
        (GuardKind::Regex, json!({"patterns": f.patterns}))
    } else if !f.keywords.is_empty() {
        (
            GuardKind::Keywords,
            json!({"keywords": f.keywords, "case_sensitive": f.case_sensitive}),
        )
    } else if !f.pii_types.is_empty() {
        (GuardKind::Pii, json!({"types": f.pii_types}))
    } else if let Some(text) = &f.schema {
        let schema: Value = serde_json::from_str(text).context("--schema is not valid JSON")?;
        (GuardKind::JsonSchema, json!({ "schema": schema }))
    } else {
        return Ok((f.kind, None));
    };
    Ok((Some(f.kind.unwrap_or(implied)), Some(value)))
}

/// The scope flags, or `None` when none is given.
fn scope(f: &GuardFields) -> Option<GuardScope> {
    let scope = GuardScope {
        gateways: f.gateways.clone(),
        models: f.models.clone(),
        tools: f.tools.clone(),
    };
    (!scope.is_all()).then_some(scope)
}

fn describe_scope(scope: &Option<GuardScope>) -> String {
    let Some(s) = scope.as_ref().filter(|s| !s.is_all()) else {
        return "everywhere".into();
    };
    [
        ("gateways", &s.gateways),
        ("models", &s.models),
        ("tools", &s.tools),
    ]
    .iter()
    .filter(|(_, ids)| !ids.is_empty())
    .map(|(label, ids)| format!("{label}: {}", output::join(ids)))
    .collect::<Vec<_>>()
    .join("; ")
}

fn show(g: &Guard) {
    Lines::new()
        .add("name", &g.name)
        .add("guard_id", &g.guard_id)
        .add("stage", g.stage.as_str())
        .add("kind", g.kind.as_str())
        .add("action", g.action.as_str())
        .add("enabled", output::yes(g.enabled))
        .add("config", g.config.to_string())
        .add("scope", describe_scope(&g.scope))
        .print();
}

fn sample(given: String) -> anyhow::Result<String> {
    if given != "-" {
        return Ok(given);
    }
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .context("reading the sample from standard input")?;
    Ok(text)
}

pub async fn run(ctx: &Ctx, cmd: GuardCmd) -> anyhow::Result<()> {
    let workspace_id = ctx.ws().await?;
    let reply: Reply<GuardResponse> = match cmd {
        GuardCmd::Create {
            name,
            fields,
            disabled,
        } => {
            let (kind, config) = config(&fields)?;
            let req = CreateGuardRequest {
                workspace_id,
                name,
                stage: fields.stage,
                kind,
                action: fields.action,
                config: config.unwrap_or(Value::Null),
                enabled: disabled.then_some(false),
                scope: scope(&fields),
            };
            ctx.send(RULES, "CreateGuard", &req).await?
        }
        GuardCmd::Update {
            guard,
            name,
            fields,
            enable,
            disable,
            all_scope,
        } => {
            let (kind, config) = config(&fields)?;
            let scope = if all_scope {
                Some(GuardScope::default())
            } else {
                scope(&fields)
            };
            let req = UpdateGuardRequest {
                workspace_id,
                guard_id: guard,
                name,
                stage: fields.stage,
                kind,
                action: fields.action,
                config,
                enabled: parse::toggle(enable, disable),
                scope,
            };
            ctx.send(RULES, "UpdateGuard", &req).await?
        }
        GuardCmd::Get { guard } => {
            let req = guard_ref(workspace_id, guard);
            ctx.send(RULES, "GetGuard", &req).await?
        }
        GuardCmd::List { stage } => {
            let req = ListGuardsRequest {
                workspace_id,
                stage,
            };
            let reply: Reply<ListGuardsResponse> = ctx.send(RULES, "ListGuards", &req).await?;
            ctx.print(&reply, table);
            return Ok(());
        }
        GuardCmd::Delete { guard } => {
            let message = format!("Deleted guard {guard}.");
            let req = guard_ref(workspace_id, guard);
            return ctx.send_done(RULES, "DeleteGuard", &req, &message).await;
        }
        GuardCmd::Test { guard, sample: s } => {
            let req = TestGuardRequest {
                workspace_id,
                guard_id: guard,
                sample: sample(s)?,
            };
            let reply: Reply<TestGuardResponse> = ctx.send(RULES, "TestGuard", &req).await?;
            ctx.print(&reply, show_test);
            return Ok(());
        }
    };
    ctx.print(&reply, |r| show(&r.guard));
    Ok(())
}

fn guard_ref(workspace_id: String, guard_id: String) -> GuardRefRequest {
    GuardRefRequest {
        workspace_id,
        guard_id,
    }
}

fn table(r: &ListGuardsResponse) {
    let rows = r
        .guards
        .iter()
        .map(|g| {
            vec![
                g.name.clone(),
                g.guard_id.clone(),
                g.stage.as_str().to_string(),
                g.kind.as_str().to_string(),
                g.action.as_str().to_string(),
                output::yes(g.enabled).to_string(),
                describe_scope(&g.scope),
            ]
        })
        .collect();
    output::table(
        &["name", "id", "stage", "kind", "action", "enabled", "scope"],
        rows,
    );
}

/// What `guard test` found in the sample, and the output when it was not blocked.
fn show_test(r: &TestGuardResponse) {
    Lines::new()
        .add("blocked", output::yes(r.blocked))
        .add("matches", r.matches.len())
        .print();
    for m in &r.matches {
        output::line(&format!("  {} at {}..{}", m.kind, m.start, m.end));
    }
    if !r.blocked {
        output::line(&format!("output: {}", r.output));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_imply_the_kind_and_build_its_config() {
        let f = GuardFields {
            keywords: vec!["falcon".into()],
            case_sensitive: true,
            ..Default::default()
        };
        assert_eq!(
            config(&f).unwrap(),
            (
                Some(GuardKind::Keywords),
                Some(json!({"keywords": ["falcon"], "case_sensitive": true}))
            )
        );
        let f = GuardFields {
            kind: Some(GuardKind::Pii),
            ..Default::default()
        };
        assert_eq!(config(&f).unwrap(), (Some(GuardKind::Pii), None));
        let f = GuardFields {
            config: Some("{\"patterns\": [\"x{2}\"]}".into()),
            ..Default::default()
        };
        assert_eq!(config(&f).unwrap().1, Some(json!({"patterns": ["x{2}"]})));
        let f = GuardFields {
            config: Some("{".into()),
            ..Default::default()
        };
        assert!(config(&f).is_err());
        assert_eq!(scope(&GuardFields::default()), None);
    }
}
