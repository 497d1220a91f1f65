//! One module per resource group; each turns its flags into typed requests and prints the
//! reply.

mod actas;
mod admin;
mod agents;
mod audit;
mod gateways;
mod guards;
pub mod keys;
mod models;
mod pools;
mod quotas;
mod rules;
mod status;
mod tools;
mod webhooks;

use serde_json::Value;

use crate::args::Command;
use crate::ctx::Ctx;
use crate::output;

pub async fn run(ctx: &Ctx, command: Command) -> anyhow::Result<()> {
    match command {
        Command::Model(c) => models::run(ctx, c).await,
        Command::Pool(c) => pools::run(ctx, c).await,
        Command::Gateway(c) => gateways::run(ctx, c).await,
        Command::Tool(c) => tools::run(ctx, c).await,
        Command::Agent(c) => agents::run(ctx, c).await,
        Command::Key(c) => keys::run(ctx, c).await,
        Command::Rules(c) => rules::run(ctx, c).await,
        Command::Guard(c) => guards::run(ctx, c).await,
        Command::Deployment(c) => admin::deployment(ctx, c).await,
        Command::PlatformKey(c) => admin::platform_key(ctx, c).await,
        Command::Audit(c) => audit::run(ctx, c).await,
        Command::Quota(c) => quotas::run(ctx, c).await,
        Command::Webhook(c) => webhooks::run(ctx, c).await,
        Command::Status => status::run(ctx).await,
        Command::Identity => admin::identity(ctx).await,
        Command::Workspaces => admin::workspaces(ctx).await,
        Command::Workspace(c) => actas::workspace(ctx, c).await,
        Command::ActAsProvider(c) => actas::run(ctx, c).await,
        Command::Up(_) | Command::Completions { .. } => {
            anyhow::bail!("this command runs without a control-plane connection")
        }
    }
}

/// Prints a JSON reply with `--json`, otherwise a one-line confirmation.
pub fn done(ctx: &Ctx, reply: &Value, message: &str) {
    if ctx.json {
        output::json(reply);
    } else {
        output::line(message);
    }
}
