//! The command tree: global options and one subcommand per resource group. Each group's flags
//! live in a submodule; `up` takes its own arguments from `crate::up`.

mod actas;
mod admin;
mod agents;
mod audit;
mod guards;
mod models;
mod quotas;
mod tools;
mod webhooks;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub use actas::{ActAsProviderCmd, WorkspaceCmd};
pub use admin::{DeploymentCmd, PlatformKeyCmd, RulesCmd};
pub use agents::{AgentClears, AgentCmd, AgentFields, GrantCmd, KeyCmd};
pub use audit::{AuditCmd, StreamFilters};
pub use guards::{GuardCmd, GuardFields};
pub use models::{GatewayCmd, ModelCmd, ModelConfig, PoolCmd};
pub use quotas::{GatewayQuotaCmd, QuotaChanges, QuotaCmd};
pub use tools::{HeaderCmd, InstallArgs, ToolCmd, ToolFields};
pub use webhooks::{DeliveryCmd, DestinationCmd, SubscriptionCmd, Target, WebhookCmd};

use crate::up::UpArgs;

#[derive(Debug, Parser)]
#[command(
    name = "portcullis",
    version,
    about = "Manage a Portcullis gateway deployment, or run one with `portcullis up`."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct Global {
    /// Control-plane URL. (Named --control-url because `tool add --url` is the MCP server's.)
    #[arg(
        long,
        global = true,
        env = "PORTCULLIS_URL",
        default_value = "http://127.0.0.1:7700"
    )]
    pub control_url: String,
    /// Platform key (svc_pk_…).
    #[arg(long, global = true, env = "PORTCULLIS_KEY", hide_env_values = true)]
    pub key: Option<String>,
    /// File holding the platform key (default: .portcullis/admin.key when present).
    #[arg(long, global = true, env = "PORTCULLIS_KEY_FILE")]
    pub key_file: Option<PathBuf>,
    /// Workspace id (default: the key's workspace, from GetIdentity).
    #[arg(long, global = true, env = "PORTCULLIS_WORKSPACE")]
    pub workspace: Option<String>,
    /// Print the raw JSON reply.
    #[arg(long, global = true)]
    pub json: bool,
}

/// Commands that run without a control-plane connection (`up`) are matched in `main` before
/// connecting; every other variant goes to `commands::run`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the control plane and one gateway in this process (SQLite in the data dir).
    #[command(
        after_help = "Examples:\n  portcullis up\n  portcullis up --data-dir /var/lib/portcullis"
    )]
    Up(UpArgs),
    /// Model connections.
    #[command(
        subcommand,
        after_help = "Examples:\n  portcullis model add gpt --provider openai --model gpt-4o-mini --api-key sk-… --gateway default\n  portcullis model update gpt --attr tier=gold\n  portcullis model list --json"
    )]
    Model(ModelCmd),
    /// Model pools.
    #[command(
        subcommand,
        after_help = "Examples:\n  portcullis pool create chat --strategy priority --member gpt:1:0 --member claude:1:1\n  portcullis pool member-add chat mistral"
    )]
    Pool(PoolCmd),
    /// Gateways, their members and access grants.
    #[command(
        subcommand,
        after_help = "Examples:\n  portcullis gateway create edge\n  portcullis gateway model-add edge gpt\n  portcullis gateway quota set edge --limit 250"
    )]
    Gateway(GatewayCmd),
    /// MCP tool connections and their catalog.
    #[command(
        subcommand,
        after_help = "Examples:\n  portcullis tool add docs --url https://mcp.example.com/mcp --secret api_key=… --header X-Api-Key=secret:api_key --gateway default\n  portcullis tool block docs delete_page --message read-only\n  portcullis tool install github-issues github --api-key ghp_… --gateway default"
    )]
    Tool(ToolCmd),
    /// Agents.
    #[command(
        subcommand,
        after_help = "Examples:\n  portcullis agent register support-bot --gateway default --model gpt --tool docs/search\n  portcullis agent suspend support-bot --reason incident\n  portcullis agent reach --json"
    )]
    Agent(AgentCmd),
    /// Agent API keys.
    #[command(
        subcommand,
        after_help = "Examples:\n  portcullis key create support-bot prod\n  portcullis key rotate support-bot prod"
    )]
    Key(KeyCmd),
    /// Act-as verification providers: trusted OpenID issuers and shared HMAC secrets.
    #[command(
        subcommand,
        name = "actas-provider",
        after_help = "Examples:\n  portcullis actas-provider create okta --method oidc --issuer https://example.okta.com --audience portcullis"
    )]
    ActAsProvider(ActAsProviderCmd),
    /// Cedar rule bundles.
    #[command(
        subcommand,
        after_help = "Examples:\n  portcullis rules deploy --file policies/no-weekends.cedar\n  portcullis rules list"
    )]
    Rules(RulesCmd),
    /// Guards: what gateways block or redact in model and tool traffic.
    #[command(
        subcommand,
        after_help = "Examples:\n  portcullis guard create no-ssn --stage llm_output --pii-type us_ssn --action redact\n  portcullis guard test no-ssn --sample 123-45-6789"
    )]
    Guard(GuardCmd),
    /// Gateway deployments (the tokens gateways sync with).
    #[command(
        subcommand,
        after_help = "Examples:\n  portcullis deployment create eu-1 --public-url https://gw.example.com"
    )]
    Deployment(DeploymentCmd),
    /// Platform keys (admin access to this API).
    #[command(
        subcommand,
        name = "platform-key",
        after_help = "Examples:\n  portcullis platform-key create ci --role operator"
    )]
    PlatformKey(PlatformKeyCmd),
    /// LLM spend quotas.
    #[command(
        subcommand,
        after_help = "Examples:\n  portcullis quota create --subject workspace --limit 1000\n  portcullis quota create --subject agent --agent support-bot --limit 25 --window daily"
    )]
    Quota(QuotaCmd),
    /// Audit events: query, get, tail.
    #[command(
        subcommand,
        after_help = "Examples:\n  portcullis audit query --since 24h --type tool.call\n  portcullis audit tail --type model.call"
    )]
    Audit(AuditCmd),
    /// Webhooks: subscriptions, destinations, deliveries.
    #[command(
        subcommand,
        after_help = "Examples:\n  portcullis webhook subscription create ops --endpoint https://hooks.example.com/portcullis --event-type quota.threshold\n  portcullis webhook delivery replay-failed --since 24h"
    )]
    Webhook(WebhookCmd),
    /// One screen about the workspace: the key, what is configured, agents by status,
    /// quotas, and when each gateway deployment last synced.
    ///
    /// Example: portcullis status --json
    Status,
    /// Print a shell completion script.
    ///
    /// Example: portcullis completions bash > ~/.local/share/bash-completion/completions/portcullis
    Completions {
        /// bash | zsh | fish | elvish | powershell
        shell: clap_complete::Shell,
    },
    /// People's own credentials on per-user tools and models (values are never shown).
    #[command(
        subcommand,
        after_help = "Examples:\n  portcullis credential list github"
    )]
    Credential(CredentialCmd),
    /// Who the platform key is.
    Identity,
    /// The workspaces the key can see.
    Workspaces,
    /// The workspace's settings.
    #[command(
        subcommand,
        after_help = "Examples:\n  portcullis workspace update --actas-min-method hmac"
    )]
    Workspace(WorkspaceCmd),
}

#[derive(Debug, Subcommand)]
pub enum CredentialCmd {
    /// Who has stored a credential on a per-user tool or model.
    ///
    /// Example: portcullis credential list github
    List {
        /// The tool or model (name or id).
        connection: String,
    },
    /// Delete one person's credential: gateways stop using it within a minute, and the
    /// person's next call asks them for a new one.
    ///
    /// Example: portcullis credential delete github 00u-zoe
    Delete {
        /// The tool or model (name or id).
        connection: String,
        /// The person's act-as `sub`.
        subject: String,
    },
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_tree_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_options_go_before_or_after_the_subcommand() {
        let cli = Cli::try_parse_from(["portcullis", "model", "list", "--json"]).unwrap();
        assert!(cli.global.json);
        let cli =
            Cli::try_parse_from(["portcullis", "--workspace", "w", "gateway", "list"]).unwrap();
        assert_eq!(cli.global.workspace.as_deref(), Some("w"));
    }

    #[test]
    fn bad_enum_values_are_usage_errors() {
        let err = Cli::try_parse_from(["portcullis", "pool", "create", "p", "--strategy", "x"])
            .unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("round_robin"), "{err}");
    }

    #[test]
    fn grant_and_revoke_exclude_each_other() {
        assert!(Cli::try_parse_from(["portcullis", "gateway", "access", "g", "a"]).is_err());
        assert!(Cli::try_parse_from([
            "portcullis",
            "gateway",
            "access",
            "g",
            "a",
            "--grant",
            "--revoke"
        ])
        .is_err());
        assert!(
            Cli::try_parse_from(["portcullis", "gateway", "all-agents", "g", "--revoke"]).is_ok()
        );
    }

    #[test]
    fn clear_flags_conflict_with_values() {
        assert!(Cli::try_parse_from([
            "portcullis",
            "model",
            "update",
            "m",
            "--clear-secrets",
            "--api-key",
            "k"
        ])
        .is_err());
        assert!(Cli::try_parse_from([
            "portcullis",
            "agent",
            "update",
            "a",
            "--clear-pools",
            "--pool",
            "p"
        ])
        .is_err());
        let cli = Cli::try_parse_from([
            "portcullis",
            "agent",
            "update",
            "a",
            "--actas-required",
            "false",
            "--token-ttl",
            "",
        ])
        .unwrap();
        let Command::Agent(AgentCmd::Update {
            actas_required,
            fields,
            ..
        }) = cli.command
        else {
            panic!("parsed as the wrong command")
        };
        assert_eq!(actas_required, Some(false));
        assert_eq!(fields.token_ttl.as_deref(), Some(""));
    }
}
