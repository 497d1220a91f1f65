//! Flags of `agent` and `key`.

use clap::{Args, Subcommand};
use portcullis_shared::api::agents::AgentStatus;

use crate::parse;

/// The fields `agent register` and `agent update` share.
#[derive(Debug, Args, Default)]
pub struct AgentFields {
    /// Metadata as a JSON object.
    #[arg(long)]
    pub metadata: Option<String>,
    /// Access-token lifetime, 1m–24h (on update, "" resets it to the default).
    #[arg(long)]
    pub token_ttl: Option<String>,
    /// Allowed pool name; repeatable.
    #[arg(long = "pool")]
    pub pools: Vec<String>,
    /// Allowed direct model name; repeatable.
    #[arg(long = "model")]
    pub models: Vec<String>,
    /// Allowed tool, CONNECTION/TOOL; repeatable.
    #[arg(long = "tool")]
    pub tools: Vec<String>,
    /// Allowed gateway (name or id); repeatable.
    #[arg(long = "gateway")]
    pub gateways: Vec<String>,
    /// Act-as: an allowed end-user group; repeatable.
    #[arg(long = "actas-group")]
    pub actas_groups: Vec<String>,
    /// Act-as: an allowed end-user email; repeatable.
    #[arg(long = "actas-email")]
    pub actas_emails: Vec<String>,
    /// Act-as: an allowed end-user subject; repeatable.
    #[arg(long = "actas-subject")]
    pub actas_subjects: Vec<String>,
    /// none | oidc | hmac | bound (on update, "" clears it)
    #[arg(long, value_parser = parse::actas_method_text)]
    pub actas_method: Option<String>,
    #[arg(long)]
    pub actas_provider_id: Option<String>,
    #[arg(long)]
    pub actas_oidc_url: Option<String>,
    #[arg(long, env = "PORTCULLIS_ACTAS_HMAC_SECRET", hide_env_values = true)]
    pub actas_hmac_secret: Option<String>,
    #[arg(long)]
    pub actas_config_name: Option<String>,
}

/// The `--clear-*` flags of `agent update`: which lists it sends empty.
#[derive(Debug, Args, Default)]
pub struct AgentClears {
    /// Empty the allowed pools.
    #[arg(long, conflicts_with = "pools")]
    pub clear_pools: bool,
    /// Empty the allowed direct models.
    #[arg(long, conflicts_with = "models")]
    pub clear_models: bool,
    /// Empty the allowed tools.
    #[arg(long, conflicts_with = "tools")]
    pub clear_tools: bool,
    /// Withdraw every gateway grant.
    #[arg(long, conflicts_with = "gateways")]
    pub clear_gateways: bool,
    /// Empty the act-as groups.
    #[arg(long, conflicts_with = "actas_groups")]
    pub clear_actas_groups: bool,
    /// Empty the act-as emails.
    #[arg(long, conflicts_with = "actas_emails")]
    pub clear_actas_emails: bool,
    /// Empty the act-as subjects.
    #[arg(long, conflicts_with = "actas_subjects")]
    pub clear_actas_subjects: bool,
}

#[derive(Debug, Subcommand)]
pub enum AgentCmd {
    /// Register an agent.
    Register {
        name: String,
        /// Parent agent (id or name).
        #[arg(long)]
        parent: Option<String>,
        #[command(flatten)]
        fields: AgentFields,
        /// Calls must name the end user the agent acts for.
        #[arg(long)]
        actas_required: bool,
        /// Allow interactive (end-user driven) access.
        #[arg(long)]
        interactive_access: bool,
    },
    /// Change an agent; a list flag replaces that whole list.
    Update {
        /// Id or name.
        agent: String,
        #[command(flatten)]
        fields: AgentFields,
        /// true | false
        #[arg(long)]
        actas_required: Option<bool>,
        /// true | false
        #[arg(long)]
        interactive_access: Option<bool>,
        #[command(flatten)]
        clear: AgentClears,
    },
    /// Show one agent, with the endpoints of its gateway.
    Get {
        /// Id or name.
        agent: String,
        /// The gateway whose endpoints to show, when the agent reaches several.
        #[arg(long)]
        gateway: Option<String>,
    },
    /// List agents.
    List {
        /// active | suspended | provisioned | revoked
        #[arg(long, value_parser = parse::agent_status)]
        status: Option<AgentStatus>,
        /// At most this many (default 100, at most 1000).
        #[arg(long)]
        limit: Option<u32>,
        #[arg(long)]
        offset: Option<u32>,
    },
    /// Every agent and the tools it reaches (offered on a gateway it may use, in the catalog
    /// and not blocked, and named by its allow list).
    ///
    /// Example: portcullis agent reach --json
    Reach,
    /// Suspend an active agent.
    Suspend {
        agent: String,
        #[arg(long)]
        reason: Option<String>,
        /// Also suspend its descendants.
        #[arg(long)]
        cascade: bool,
    },
    /// Reactivate a suspended agent.
    Reactivate { agent: String },
    /// Revoke an agent for good.
    Revoke {
        agent: String,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Delete a revoked agent and its data.
    Delete {
        agent: String,
        #[arg(long)]
        reason: Option<String>,
        /// Also delete its descendants.
        #[arg(long)]
        cascade: bool,
    },
    /// Grants people gave MCP clients to use agents interactively.
    #[command(subcommand)]
    Grants(GrantCmd),
}

#[derive(Debug, Subcommand)]
pub enum GrantCmd {
    /// Everyone's interactive grants (a platform key holds none of its own).
    ///
    /// Example: portcullis agent grants list --agent support-bot
    List {
        /// Only this agent's grants (id or name).
        #[arg(long)]
        agent: Option<String>,
    },
    /// Revoke a grant: its refresh tokens end at once, its access tokens when gateways next
    /// sync.
    ///
    /// Example: portcullis agent grants revoke 0b5c…
    Revoke { grant_id: String },
}

/// The end user a key is bound to, for agents whose act-as method is `bound`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct BoundArgs {
    /// Bind the key to this end user (`sub`): every call with it acts for them.
    #[arg(long = "bound-sub")]
    pub sub: Option<String>,
    /// The bound end user's email.
    #[arg(long = "bound-email", requires = "sub")]
    pub email: Option<String>,
    /// A group of the bound end user; repeat for several.
    #[arg(long = "bound-group", requires = "sub")]
    pub groups: Vec<String>,
}

impl BoundArgs {
    pub fn subject(self) -> Option<portcullis_shared::api::agents::BoundSubject> {
        let sub = self.sub?;
        Some(portcullis_shared::api::agents::BoundSubject {
            sub,
            email: self.email.unwrap_or_default(),
            groups: self.groups,
        })
    }
}

#[derive(Debug, Subcommand)]
pub enum KeyCmd {
    /// Create an API key; prints the token once.
    Create {
        /// Agent id or name.
        agent: String,
        /// Key name, unique per agent.
        name: String,
        /// The gateway the key is for (needed when the agent reaches several).
        #[arg(long)]
        gateway: Option<String>,
        #[command(flatten)]
        bound: BoundArgs,
    },
    /// Create the key, or rotate it when it exists; prints the token once.
    Ensure {
        agent: String,
        name: String,
        #[arg(long)]
        gateway: Option<String>,
        #[command(flatten)]
        bound: BoundArgs,
    },
    /// Issue a new token for an existing key; prints it once.
    Rotate {
        agent: String,
        name: String,
        #[arg(long)]
        gateway: Option<String>,
    },
    /// Revoke a key.
    Revoke { agent: String, name: String },
    /// List an agent's keys.
    List { agent: String },
    /// Trade an agent API key for a short-lived token (the agent's token_ttl) that one
    /// gateway accepts in its place. Needs no platform key.
    Exchange {
        /// The agent API key (svc_…).
        #[arg(long, env = "PORTCULLIS_AGENT_KEY", hide_env_values = true)]
        agent_key: String,
        /// The gateway the token is for (needed when the agent reaches several).
        #[arg(long)]
        gateway: Option<String>,
    },
}
