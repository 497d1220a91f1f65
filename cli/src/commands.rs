//! One module per resource group; each turns its flags into requests.

mod admin;
mod agents;
mod gateways;
mod keys;
mod models;
mod pools;
mod rules;
mod tools;

use crate::args::Command;
use crate::ctx::Ctx;

pub async fn run(ctx: &Ctx, command: Command) -> anyhow::Result<()> {
    match command {
        Command::Model(c) => models::run(ctx, c).await,
        Command::Pool(c) => pools::run(ctx, c).await,
        Command::Gateway(c) => gateways::run(ctx, c).await,
        Command::Tool(c) => tools::run(ctx, c).await,
        Command::Agent(c) => agents::run(ctx, c).await,
        Command::Key(c) => keys::run(ctx, c).await,
        Command::Rules(c) => rules::run(ctx, c).await,
        Command::Deployment(c) => admin::deployment(ctx, c).await,
        Command::PlatformKey(c) => admin::platform_key(ctx, c).await,
        Command::Identity => admin::identity(ctx).await,
        Command::Workspaces => admin::workspaces(ctx).await,
        Command::Up(_) => unreachable_up(),
    }
}

fn unreachable_up() -> anyhow::Result<()> {
    anyhow::bail!("`up` runs without a control-plane connection")
}
