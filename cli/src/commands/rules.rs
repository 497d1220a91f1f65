//! `portcullis rules …`

use serde_json::json;

use super::models::done;
use crate::args::RulesCmd;
use crate::ctx::Ctx;
use crate::output;
use portcullis_shared::api::service::RULES;

pub async fn run(ctx: &Ctx, cmd: RulesCmd) -> anyhow::Result<()> {
    match cmd {
        RulesCmd::Deploy {
            file,
            policies,
            scope,
            scope_id,
            name,
        } => {
            let text = match (file, policies) {
                (Some(path), _) => std::fs::read_to_string(&path)
                    .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?,
                (None, Some(text)) => text,
                (None, None) => anyhow::bail!("give --file or --policies"),
            };
            let body =
                json!({"policies": text, "scope": scope, "scope_id": scope_id, "name": name});
            let reply = ctx.call(RULES, "DeployRuleBundle", body).await?;
            output::show(
                ctx.json,
                &reply,
                &[
                    ("bundle_id", "/bundle/bundle_id"),
                    ("name", "/bundle/name"),
                    ("scope", "/bundle/scope"),
                    ("scope_id", "/bundle/scope_id"),
                    ("policies", "/bundle/policy_ids"),
                ],
            );
        }
        RulesCmd::List {
            scope,
            scope_id,
            include_managed,
        } => {
            let body =
                json!({"scope": scope, "scope_id": scope_id, "include_managed": include_managed});
            let reply = ctx.call(RULES, "ListRuleBundles", body).await?;
            output::list(
                ctx.json,
                &reply,
                "bundles",
                &["/bundle_id", "/name", "/scope", "/scope_id", "/policy_ids"],
            );
        }
        RulesCmd::Delete { bundle_id } => {
            let reply = ctx
                .call(RULES, "DeleteRuleBundle", json!({"bundle_id": bundle_id}))
                .await?;
            done(ctx, &reply, &format!("Deleted rule bundle {bundle_id}."));
        }
    }
    Ok(())
}
