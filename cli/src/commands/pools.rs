//! `portcullis pool …`: model pools.

use portcullis_shared::api::pools::*;
use portcullis_shared::api::service::MGMT;

use crate::args::PoolCmd;
use crate::ctx::{Ctx, Kind, Reply};
use crate::output::{self, Lines};
use crate::parse;

/// `--member MODEL[:WEIGHT[:PRIORITY]]` flags, models resolved to ids.
async fn members(ctx: &Ctx, specs: &[String]) -> anyhow::Result<Vec<PoolMemberInput>> {
    let mut out = Vec::with_capacity(specs.len());
    for spec in specs {
        let (model, weight, priority) = parse::member(spec)?;
        out.push(PoolMemberInput {
            connection_id: ctx.resolve(Kind::Model, &model).await?,
            weight,
            priority,
        });
    }
    Ok(out)
}

pub async fn run(ctx: &Ctx, cmd: PoolCmd) -> anyhow::Result<()> {
    let workspace_id = ctx.ws().await?;
    let reply: Reply<PoolResponse> = match cmd {
        PoolCmd::Create {
            name,
            strategy,
            members: specs,
        } => {
            let req = CreateLLMPoolRequest {
                workspace_id,
                name,
                strategy,
                members: members(ctx, &specs).await?,
            };
            ctx.send(MGMT, "CreateLLMPool", &req).await?
        }
        PoolCmd::Update {
            pool,
            name,
            strategy,
            members: specs,
        } => {
            let req = UpdateLLMPoolRequest {
                workspace_id,
                pool_id: ctx.resolve(Kind::Pool, &pool).await?,
                name,
                strategy,
                members: if specs.is_empty() {
                    None
                } else {
                    Some(members(ctx, &specs).await?)
                },
            };
            ctx.send(MGMT, "UpdateLLMPool", &req).await?
        }
        PoolCmd::Get { pool } => {
            let req = id_request(ctx, workspace_id, &pool).await?;
            ctx.send(MGMT, "GetLLMPool", &req).await?
        }
        PoolCmd::List => {
            let req = ListLLMPoolsRequest { workspace_id };
            let reply: Reply<ListLLMPoolsResponse> = ctx.send(MGMT, "ListLLMPools", &req).await?;
            ctx.print(&reply, |r| table(&r.pools));
            return Ok(());
        }
        PoolCmd::Remove { pool } => {
            let req = id_request(ctx, workspace_id, &pool).await?;
            let message = format!("Removed pool {pool}.");
            return ctx.send_done(MGMT, "DeleteLLMPool", &req, &message).await;
        }
        PoolCmd::MemberAdd {
            pool,
            model,
            weight,
            priority,
        } => {
            let req = AddLLMPoolMemberRequest {
                workspace_id,
                pool_id: ctx.resolve(Kind::Pool, &pool).await?,
                connection_id: ctx.resolve(Kind::Model, &model).await?,
                weight,
                priority,
            };
            ctx.send(MGMT, "AddLLMPoolMember", &req).await?
        }
        PoolCmd::MemberRemove { pool, model } => {
            let req = RemoveLLMPoolMemberRequest {
                workspace_id,
                pool_id: ctx.resolve(Kind::Pool, &pool).await?,
                connection_id: ctx.resolve(Kind::Model, &model).await?,
            };
            ctx.send(MGMT, "RemoveLLMPoolMember", &req).await?
        }
    };
    ctx.print(&reply, |r| show(&r.pool));
    Ok(())
}

/// A request naming one pool, by its name or id.
async fn id_request(ctx: &Ctx, workspace_id: String, pool: &str) -> anyhow::Result<PoolIdRequest> {
    Ok(PoolIdRequest {
        workspace_id,
        pool_id: ctx.resolve(Kind::Pool, pool).await?,
    })
}

fn member_text(members: &[PoolMember]) -> String {
    let list: Vec<String> = members
        .iter()
        .map(|m| format!("{} (weight {}, priority {})", m.name, m.weight, m.priority))
        .collect();
    output::join(&list)
}

fn show(p: &LLMPool) {
    Lines::new()
        .add("name", &p.name)
        .add("pool_id", &p.pool_id)
        .add("strategy", p.strategy.as_str())
        .add("members", member_text(&p.members))
        .add("gateways", output::names(&p.gateways))
        .print();
}

fn table(pools: &[LLMPool]) {
    let rows = pools
        .iter()
        .map(|p| {
            let names: Vec<&str> = p.members.iter().map(|m| m.name.as_str()).collect();
            vec![
                p.name.clone(),
                p.pool_id.clone(),
                p.strategy.as_str().to_string(),
                output::join(&names),
                output::names(&p.gateways),
            ]
        })
        .collect();
    output::table(&["name", "id", "strategy", "members", "gateways"], rows);
}
