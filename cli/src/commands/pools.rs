//! `portcullis pool …`

use serde_json::{json, Value};

use super::models::done;
use crate::args::PoolCmd;
use crate::ctx::{Ctx, Kind};
use crate::{output, parse};

const FIELDS: &[(&str, &str)] = &[
    ("name", "/pool/name"),
    ("pool_id", "/pool/pool_id"),
    ("strategy", "/pool/strategy"),
    ("members", "/pool/members"),
    ("gateways", "/pool/gateways"),
];

async fn members(ctx: &Ctx, specs: &[String]) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for spec in specs {
        let (model, weight, priority) = parse::member(spec)?;
        let id = ctx.resolve(Kind::Model, &model).await?;
        let mut m = json!({"connection_id": id});
        if let Some(w) = weight {
            m["weight"] = json!(w);
        }
        if let Some(p) = priority {
            m["priority"] = json!(p);
        }
        out.push(m);
    }
    Ok(out)
}

pub async fn run(ctx: &Ctx, cmd: PoolCmd) -> anyhow::Result<()> {
    let reply = match cmd {
        PoolCmd::Create {
            name,
            strategy,
            members: specs,
        } => {
            let mut body = json!({"name": name, "members": members(ctx, &specs).await?});
            if let Some(s) = strategy {
                body["strategy"] = json!(s);
            }
            ctx.mgmt("CreateLLMPool", body).await?
        }
        PoolCmd::Update {
            pool,
            name,
            strategy,
            members: specs,
        } => {
            let mut body = json!({"pool_id": ctx.resolve(Kind::Pool, &pool).await?});
            if let Some(n) = name {
                body["name"] = json!(n);
            }
            if let Some(s) = strategy {
                body["strategy"] = json!(s);
            }
            if !specs.is_empty() {
                body["members"] = json!(members(ctx, &specs).await?);
            }
            ctx.mgmt("UpdateLLMPool", body).await?
        }
        PoolCmd::Get { pool } => {
            ctx.mgmt(
                "GetLLMPool",
                json!({"pool_id": ctx.resolve(Kind::Pool, &pool).await?}),
            )
            .await?
        }
        PoolCmd::List => {
            let reply = ctx.mgmt("ListLLMPools", json!({})).await?;
            output::list(
                ctx.json,
                &reply,
                "pools",
                &["/name", "/pool_id", "/strategy", "/members"],
            );
            return Ok(());
        }
        PoolCmd::Remove { pool } => {
            let reply = ctx
                .mgmt(
                    "DeleteLLMPool",
                    json!({"pool_id": ctx.resolve(Kind::Pool, &pool).await?}),
                )
                .await?;
            done(ctx, &reply, &format!("Removed pool {pool}."));
            return Ok(());
        }
        PoolCmd::MemberAdd {
            pool,
            model,
            weight,
            priority,
        } => {
            let mut body = json!({"pool_id": ctx.resolve(Kind::Pool, &pool).await?, "connection_id": ctx.resolve(Kind::Model, &model).await?});
            if let Some(w) = weight {
                body["weight"] = json!(w);
            }
            if let Some(p) = priority {
                body["priority"] = json!(p);
            }
            ctx.mgmt("AddLLMPoolMember", body).await?
        }
        PoolCmd::MemberRemove { pool, model } => {
            let body = json!({"pool_id": ctx.resolve(Kind::Pool, &pool).await?, "connection_id": ctx.resolve(Kind::Model, &model).await?});
            ctx.mgmt("RemoveLLMPoolMember", body).await?
        }
    };
    output::show(ctx.json, &reply, FIELDS);
    Ok(())
}
