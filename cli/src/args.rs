//! The command tree.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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
    /// Control-plane URL.
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
    /// Workspace id (default: the key's workspace).
    #[arg(long, global = true, env = "PORTCULLIS_WORKSPACE")]
    pub workspace: Option<String>,
    /// Print the raw JSON reply.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the control plane and one gateway in this process (SQLite in the data dir).
    Up(UpArgs),
    /// Model connections.
    #[command(subcommand)]
    Model(ModelCmd),
    /// Model pools.
    #[command(subcommand)]
    Pool(PoolCmd),
    /// Gateways, their members and access grants.
    #[command(subcommand)]
    Gateway(GatewayCmd),
    /// MCP tool connections and their catalog.
    #[command(subcommand)]
    Tool(ToolCmd),
    /// Agents.
    #[command(subcommand)]
    Agent(AgentCmd),
    /// Agent API keys.
    #[command(subcommand)]
    Key(KeyCmd),
    /// Cedar rule bundles.
    #[command(subcommand)]
    Rules(RulesCmd),
    /// Gateway deployments (the tokens gateways sync with).
    #[command(subcommand)]
    Deployment(DeploymentCmd),
    /// Platform keys (admin access to this API).
    #[command(subcommand, name = "platform-key")]
    PlatformKey(PlatformKeyCmd),
    /// Who the platform key is.
    Identity,
    /// The workspaces the key can see.
    Workspaces,
}

#[derive(Debug, Args, Default)]
pub struct ModelConfig {
    /// Upstream model id (provider_config.model).
    #[arg(long = "model")]
    pub upstream_model: Option<String>,
    #[arg(long)]
    pub base_url: Option<String>,
    #[arg(long)]
    pub region: Option<String>,
    #[arg(long)]
    pub project: Option<String>,
    #[arg(long)]
    pub location: Option<String>,
    #[arg(long)]
    pub api_version: Option<String>,
    /// The whole provider_config as JSON (overrides the flags above).
    #[arg(long)]
    pub config: Option<String>,
    /// none | api-key | oauth
    #[arg(long)]
    pub auth_method: Option<String>,
    /// none | shared | per-user
    #[arg(long)]
    pub credential_type: Option<String>,
    /// API key, stored under the provider's own header and scheme.
    #[arg(long, env = "PORTCULLIS_MODEL_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// A secret value, NAME=VALUE (NAME is the upstream header); repeatable.
    #[arg(long = "secret")]
    pub secrets: Vec<String>,
    /// A rule attribute, KEY=VALUE; repeatable.
    #[arg(long = "attr")]
    pub attrs: Vec<String>,
    #[arg(long)]
    pub filter_window_bytes: Option<u64>,
    #[arg(long)]
    pub filter_window_tokens: Option<u64>,
}

#[derive(Debug, Subcommand)]
pub enum ModelCmd {
    /// Add a model connection.
    Add {
        name: String,
        #[arg(long)]
        provider: String,
        #[command(flatten)]
        config: ModelConfig,
        /// Attach to this gateway (name or id); repeatable.
        #[arg(long = "gateway")]
        gateways: Vec<String>,
    },
    /// Change a model connection; only what you pass changes.
    Update {
        model: String,
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        config: ModelConfig,
        /// Remove the stored secret values.
        #[arg(long)]
        clear_secrets: bool,
        /// Remove all attributes.
        #[arg(long)]
        clear_attrs: bool,
    },
    Get {
        model: String,
    },
    List,
    Remove {
        model: String,
    },
    /// Start administrator OAuth consent.
    OauthConnect {
        model: String,
    },
    /// Revoke the stored OAuth grant.
    OauthDisconnect {
        model: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum PoolCmd {
    Create {
        name: String,
        /// round_robin | weighted | priority
        #[arg(long)]
        strategy: Option<String>,
        /// MODEL[:WEIGHT[:PRIORITY]]; repeatable.
        #[arg(long = "member")]
        members: Vec<String>,
    },
    Update {
        pool: String,
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        strategy: Option<String>,
        /// Replaces all members: MODEL[:WEIGHT[:PRIORITY]]; repeatable.
        #[arg(long = "member")]
        members: Vec<String>,
    },
    Get {
        pool: String,
    },
    List,
    Remove {
        pool: String,
    },
    MemberAdd {
        pool: String,
        model: String,
        #[arg(long)]
        weight: Option<u32>,
        #[arg(long)]
        priority: Option<u32>,
    },
    MemberRemove {
        pool: String,
        model: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum GatewayCmd {
    Create {
        name: String,
        #[arg(long, default_value = "")]
        description: String,
    },
    Update {
        gateway: String,
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        description: Option<String>,
    },
    Get {
        gateway: String,
    },
    List,
    Remove {
        gateway: String,
    },
    /// Set the state: active or disabled.
    State {
        gateway: String,
        state: String,
    },
    /// Move the workspace default marker to this gateway.
    Default {
        gateway: String,
    },
    ModelAdd {
        gateway: String,
        model: String,
    },
    /// Attach one discovered operation of a tool connection.
    ToolAdd {
        gateway: String,
        tool: String,
        operation: String,
    },
    /// Attach a whole tool connection.
    ToolSourceAdd {
        gateway: String,
        tool: String,
    },
    PoolAdd {
        gateway: String,
        pool: String,
    },
    MemberRemove {
        gateway: String,
        #[arg(long, conflicts_with_all = ["pool", "tool"], required_unless_present_any = ["pool", "tool"])]
        model: Option<String>,
        #[arg(long, conflicts_with = "tool")]
        pool: Option<String>,
        /// A tool connection (whole), or with --operation one of its operations.
        #[arg(long)]
        tool: Option<String>,
        #[arg(long, requires = "tool")]
        operation: Option<String>,
    },
    /// Grant or withdraw one agent's access.
    Access {
        gateway: String,
        agent: String,
        #[arg(long, conflicts_with = "revoke", required_unless_present = "revoke")]
        grant: bool,
        #[arg(long)]
        revoke: bool,
    },
    /// Grant or withdraw access for every agent of the workspace.
    AllAgents {
        gateway: String,
        #[arg(long, conflicts_with = "revoke", required_unless_present = "revoke")]
        grant: bool,
        #[arg(long)]
        revoke: bool,
    },
}

#[derive(Debug, Args, Default)]
pub struct AgentFields {
    /// Metadata as a JSON object.
    #[arg(long)]
    pub metadata: Option<String>,
    /// Access-token lifetime, 1m–24h ("" resets to 10m on update).
    #[arg(long)]
    pub token_ttl: Option<String>,
    /// Allowed pool; repeatable.
    #[arg(long = "pool")]
    pub pools: Vec<String>,
    /// Allowed direct model; repeatable.
    #[arg(long = "model")]
    pub models: Vec<String>,
    /// Allowed tool, connection/tool; repeatable.
    #[arg(long = "tool")]
    pub tools: Vec<String>,
    /// Allowed gateway (name or id); repeatable.
    #[arg(long = "gateway")]
    pub gateways: Vec<String>,
    #[arg(long = "actas-group")]
    pub actas_groups: Vec<String>,
    #[arg(long = "actas-email")]
    pub actas_emails: Vec<String>,
    #[arg(long = "actas-subject")]
    pub actas_subjects: Vec<String>,
    /// none | oidc | hmac | bound
    #[arg(long)]
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

#[derive(Debug, Subcommand)]
pub enum AgentCmd {
    Register {
        name: String,
        /// Parent agent (id or name).
        #[arg(long)]
        parent: Option<String>,
        #[command(flatten)]
        fields: AgentFields,
        #[arg(long)]
        actas_required: bool,
        #[arg(long)]
        interactive_access: bool,
    },
    /// Change an agent; a list flag replaces that whole list.
    Update {
        agent: String,
        #[command(flatten)]
        fields: AgentFields,
        #[arg(long)]
        actas_required: Option<bool>,
        #[arg(long)]
        interactive_access: Option<bool>,
        #[arg(long)]
        clear_pools: bool,
        #[arg(long)]
        clear_models: bool,
        #[arg(long)]
        clear_tools: bool,
        #[arg(long)]
        clear_gateways: bool,
        #[arg(long)]
        clear_actas_groups: bool,
        #[arg(long)]
        clear_actas_emails: bool,
        #[arg(long)]
        clear_actas_subjects: bool,
    },
    Get {
        agent: String,
        #[arg(long)]
        gateway: Option<String>,
    },
    List {
        #[arg(long)]
        status: Option<String>,
        #[arg(long)]
        limit: Option<u32>,
        #[arg(long)]
        offset: Option<u32>,
    },
    Suspend {
        agent: String,
        #[arg(long)]
        reason: Option<String>,
        #[arg(long)]
        cascade: bool,
    },
    Reactivate {
        agent: String,
    },
    Revoke {
        agent: String,
        #[arg(long)]
        reason: Option<String>,
    },
    Delete {
        agent: String,
        #[arg(long)]
        reason: Option<String>,
        #[arg(long)]
        cascade: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum KeyCmd {
    Create {
        agent: String,
        name: String,
        #[arg(long)]
        gateway: Option<String>,
    },
    /// Create the key, or rotate it when it exists.
    Ensure {
        agent: String,
        name: String,
        #[arg(long)]
        gateway: Option<String>,
    },
    Rotate {
        agent: String,
        name: String,
        #[arg(long)]
        gateway: Option<String>,
    },
    Revoke {
        agent: String,
        name: String,
    },
    List {
        agent: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum RulesCmd {
    Deploy {
        /// Cedar file.
        #[arg(
            long,
            conflicts_with = "policies",
            required_unless_present = "policies"
        )]
        file: Option<PathBuf>,
        /// Cedar text.
        #[arg(long)]
        policies: Option<String>,
        /// workspace | gateway | agent
        #[arg(long)]
        scope: Option<String>,
        #[arg(long)]
        scope_id: Option<String>,
        #[arg(long)]
        name: Option<String>,
    },
    List {
        #[arg(long)]
        scope: Option<String>,
        #[arg(long)]
        scope_id: Option<String>,
        /// Include the bundles compiled from agents and gateway grants.
        #[arg(long)]
        include_managed: bool,
    },
    Delete {
        bundle_id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum DeploymentCmd {
    Create {
        name: String,
        #[arg(long)]
        public_url: String,
    },
    List,
    Revoke {
        deployment_id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum PlatformKeyCmd {
    Create {
        name: String,
        /// admin | operator | viewer
        #[arg(long)]
        role: String,
        /// Narrow the role to these permissions; repeatable.
        #[arg(long = "permission")]
        permissions: Vec<String>,
    },
    List,
    Revoke {
        key_id: String,
    },
}

#[derive(Debug, Args, Default)]
pub struct ToolFields {
    /// streamable-http | stdio
    #[arg(long)]
    pub protocol: Option<String>,
    /// Server URL (streamable-http).
    #[arg(long)]
    pub url: Option<String>,
    /// Command to run (stdio).
    #[arg(long)]
    pub command: Option<String>,
    /// Command argument (stdio); repeatable.
    #[arg(long = "arg")]
    pub args: Vec<String>,
    /// Environment variable NAME=VALUE (stdio); repeatable.
    #[arg(long = "env")]
    pub env: Vec<String>,
    /// Working directory (stdio).
    #[arg(long)]
    pub cwd: Option<String>,
    /// Egress header NAME=VALUE (literal), NAME=secret:KEY or NAME=actas; repeatable.
    #[arg(long = "header")]
    pub headers: Vec<String>,
    /// none | api-key | oauth
    #[arg(long)]
    pub auth_method: Option<String>,
    /// none | shared | per-user
    #[arg(long)]
    pub credential_type: Option<String>,
    /// Value of the upstream Authorization header (e.g. "Bearer …"), stored as a secret.
    #[arg(long, env = "PORTCULLIS_TOOL_AUTHORIZATION", hide_env_values = true)]
    pub authorization: Option<String>,
    /// A secret value, NAME=VALUE; repeatable.
    #[arg(long = "secret")]
    pub secrets: Vec<String>,
    /// An operation treated as a write; repeatable.
    #[arg(long = "write-tool")]
    pub write_tools: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum ToolCmd {
    /// Add an MCP server connection.
    Add {
        name: String,
        #[command(flatten)]
        fields: ToolFields,
        /// Attach to this gateway (name or id); repeatable.
        #[arg(long = "gateway")]
        gateways: Vec<String>,
    },
    /// Change a connection. Like the API, it overwrites the protocol config, headers and write
    /// tools with what you give, starting from the stored values.
    Update {
        tool: String,
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        fields: ToolFields,
    },
    Get {
        tool: String,
    },
    List,
    Remove {
        tool: String,
    },
    /// Refresh a per-user tool's catalog with your own credential.
    Sync {
        tool: String,
        #[arg(long)]
        act_as_sub: Option<String>,
    },
    Block {
        tool: String,
        operation: String,
        #[arg(long)]
        message: Option<String>,
    },
    Deprecate {
        tool: String,
        operation: String,
        #[arg(long)]
        message: Option<String>,
    },
    Restore {
        tool: String,
        operation: String,
    },
    /// The stored catalog of discovered operations.
    Tools {
        tool: String,
        #[arg(long)]
        with_schema: bool,
        #[arg(long)]
        include_blocked: bool,
    },
    /// Egress headers.
    #[command(subcommand)]
    Header(HeaderCmd),
}

#[derive(Debug, Subcommand)]
pub enum HeaderCmd {
    List {
        tool: String,
    },
    /// Add or replace one header: NAME=VALUE, NAME=secret:KEY or NAME=actas.
    Add {
        tool: String,
        header: String,
    },
    Remove {
        tool: String,
        name: String,
    },
}
