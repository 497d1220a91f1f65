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
        Command::Credential(c) => credential(ctx, c).await,
        Command::Identity => admin::identity(ctx).await,
        Command::Workspaces => admin::workspaces(ctx).await,
        Command::Workspace(c) => actas::workspace(ctx, c).await,
        Command::ActAsProvider(c) => actas::run(ctx, c).await,
        Command::Up(_) | Command::Completions { .. } => {
            anyhow::bail!("this command runs without a control-plane connection")
        }
    }
}

/// `portcullis credential …`: the connection is a tool or a model, by name or id.
async fn credential(ctx: &Ctx, cmd: crate::args::CredentialCmd) -> anyhow::Result<()> {
    use crate::args::CredentialCmd;
    use crate::ctx::Kind;
    let resolve = |name: String| async move {
        // Only a name no tool has is looked up among the models; other failures stand.
        match ctx.resolve(Kind::Tool, &name).await {
            Err(e) if e.to_string().starts_with("no tool named") => {
                ctx.resolve(Kind::Model, &name).await
            }
            found => found,
        }
    };
    match cmd {
        CredentialCmd::List { connection } => {
            let body = serde_json::json!({"connection_id": resolve(connection).await?});
            let reply = ctx.mgmt("ListUserCredentials", body).await?;
            output::list(
                ctx.json,
                &reply,
                "credentials",
                &["/subject", "/updated_at"],
            );
        }
        CredentialCmd::Delete {
            connection,
            subject,
        } => {
            let body = serde_json::json!({"connection_id": resolve(connection.clone()).await?, "subject": subject});
            let reply = ctx.mgmt("DeleteUserCredential", body).await?;
            done(
                ctx,
                &reply,
                &format!("Deleted {subject}'s credential on {connection}."),
            );
        }
    }
    Ok(())
}

/// Prints a JSON reply with `--json`, otherwise a one-line confirmation.
pub fn done(ctx: &Ctx, reply: &Value, message: &str) {
    if ctx.json {
        output::json(reply);
    } else {
        output::line(message);
    }
}
