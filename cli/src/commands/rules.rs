//! `portcullis rules …`: Cedar rule bundles.

use anyhow::Context as _;
use portcullis_shared::api::rules::*;
use portcullis_shared::api::service::RULES;

use crate::args::RulesCmd;
use crate::ctx::{Ctx, Kind, Reply};
use crate::output::{self, Lines};

/// A scope's target as an id: gateways by name through ListGateways, agents through GetAgent.
async fn scope_id(
    ctx: &Ctx,
    scope: Option<BundleScope>,
    id: Option<String>,
) -> anyhow::Result<Option<String>> {
    match (scope, id) {
        (Some(BundleScope::Gateway), Some(g)) => Ok(Some(ctx.resolve(Kind::Gateway, &g).await?)),
        (Some(BundleScope::Agent), Some(a)) => Ok(Some(ctx.agent_id(&a).await?)),
        (_, id) => Ok(id),
    }
}

pub async fn run(ctx: &Ctx, cmd: RulesCmd) -> anyhow::Result<()> {
    let workspace_id = ctx.ws().await?;
    match cmd {
        RulesCmd::Deploy {
            file,
            policies,
            scope,
            scope_id: target,
            name,
        } => {
            let policies = match (file, policies) {
                (Some(path), _) => std::fs::read_to_string(&path)
                    .with_context(|| format!("reading {}", path.display()))?,
                (None, Some(text)) => text,
                (None, None) => anyhow::bail!("give --file or --policies"),
            };
            let req = DeployRuleBundleRequest {
                workspace_id,
                scope,
                scope_id: scope_id(ctx, scope, target).await?,
                name,
                policies,
            };
            let reply: Reply<RuleBundleResponse> =
                ctx.send(RULES, "DeployRuleBundle", &req).await?;
            ctx.print(&reply, |r| show(&r.bundle));
        }
        RulesCmd::List {
            scope,
            scope_id: target,
            include_managed,
        } => {
            let req = ListRuleBundlesRequest {
                workspace_id,
                scope,
                scope_id: scope_id(ctx, scope, target).await?,
                include_managed,
            };
            let reply: Reply<ListRuleBundlesResponse> =
                ctx.send(RULES, "ListRuleBundles", &req).await?;
            ctx.print(&reply, |r| table(&r.bundles));
        }
        RulesCmd::Delete { bundle_id } => {
            let message = format!("Deleted rule bundle {bundle_id}.");
            let req = DeleteRuleBundleRequest {
                workspace_id,
                bundle_id,
            };
            ctx.send_done(RULES, "DeleteRuleBundle", &req, &message)
                .await?;
        }
    }
    Ok(())
}

fn show(b: &RuleBundle) {
    Lines::new()
        .add("bundle_id", &b.bundle_id)
        .add("name", &b.name)
        .add("scope", b.scope.as_str())
        .opt("scope_id", b.scope_id.as_ref())
        .opt("managed", b.managed.then_some("yes"))
        .add("policies", output::join(&b.policy_ids))
        .add("created", &b.created_at)
        .print();
}

fn table(bundles: &[RuleBundle]) {
    let rows = bundles
        .iter()
        .map(|b| {
            vec![
                b.name.clone(),
                b.bundle_id.clone(),
                b.scope.as_str().to_string(),
                b.scope_id.clone().unwrap_or_else(|| "-".into()),
                output::yes(b.managed).to_string(),
                b.policy_ids.len().to_string(),
            ]
        })
        .collect();
    output::table(
        &["name", "id", "scope", "scope_id", "managed", "policies"],
        rows,
    );
}
