//! Flags of `model`, `pool` and `gateway`.

use clap::{Args, Subcommand};
use portcullis_shared::api::gateways::GatewayState;
use portcullis_shared::api::pools::PoolStrategy;
use portcullis_shared::api::{AuthMethod, CredentialType};

use crate::parse;

/// The flags `model add` and `model update` share.
#[derive(Debug, Args, Default)]
pub struct ModelConfig {
    /// Upstream model id (provider_config.model).
    #[arg(long = "model")]
    pub upstream_model: Option<String>,
    /// provider_config.base_url
    #[arg(long)]
    pub base_url: Option<String>,
    /// provider_config.region
    #[arg(long)]
    pub region: Option<String>,
    /// provider_config.project
    #[arg(long)]
    pub project: Option<String>,
    /// provider_config.location
    #[arg(long)]
    pub location: Option<String>,
    /// provider_config.api_version
    #[arg(long)]
    pub api_version: Option<String>,
    /// provider_config.role_arn: an IAM role the gateway assumes for a Bedrock model that uses
    /// its own AWS identity (--auth-method none).
    #[arg(long)]
    pub role_arn: Option<String>,
    /// provider_config.external_id, with --role-arn.
    #[arg(long)]
    pub external_id: Option<String>,
    /// The whole provider_config as a JSON object (overrides the flags above).
    #[arg(long)]
    pub config: Option<String>,
    /// none | api-key | oauth
    #[arg(long, value_parser = parse::auth_method)]
    pub auth_method: Option<AuthMethod>,
    /// none | shared | per-user
    #[arg(long, value_parser = parse::credential_type)]
    pub credential_type: Option<CredentialType>,
    /// OAuth client settings as a JSON object (issuer, authorization_url, token_url,
    /// revocation_url, registration_url, client_id, client_secret, scopes, resource); with
    /// none, endpoints are discovered from `issuer` and the client registers itself.
    #[arg(long, value_name = "JSON")]
    pub oauth_config: Option<String>,
    /// API key, stored under the provider's own header and scheme.
    #[arg(long, env = "PORTCULLIS_MODEL_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// A secret value, NAME=VALUE (NAME is the upstream header); repeatable.
    #[arg(long = "secret")]
    pub secrets: Vec<String>,
    /// Bedrock: the AWS access key id calls are signed with.
    #[arg(long)]
    pub aws_access_key_id: Option<String>,
    /// Bedrock: its secret access key.
    #[arg(long, env = "PORTCULLIS_AWS_SECRET_ACCESS_KEY", hide_env_values = true)]
    pub aws_secret_access_key: Option<String>,
    /// Bedrock: a session token, for temporary keys.
    #[arg(long, env = "PORTCULLIS_AWS_SESSION_TOKEN", hide_env_values = true)]
    pub aws_session_token: Option<String>,
    /// Vertex: a service-account key file (JSON), stored sealed.
    #[arg(long)]
    pub service_account_file: Option<std::path::PathBuf>,
    /// A rule attribute, KEY=VALUE; repeatable.
    #[arg(long = "attr")]
    pub attrs: Vec<String>,
    /// Bytes of the reply the output filter looks back over (0: off).
    #[arg(long)]
    pub filter_window_bytes: Option<u64>,
    /// Tokens of the reply the output filter looks back over (0: off).
    #[arg(long)]
    pub filter_window_tokens: Option<u64>,
}

#[derive(Debug, Subcommand)]
pub enum ModelCmd {
    /// Add a model connection.
    Add {
        name: String,
        /// Provider id (openai, anthropic, google, bedrock, openai_compatible, …).
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
        /// Name or id.
        model: String,
        /// New name.
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        config: ModelConfig,
        /// Remove the stored secret values.
        #[arg(long, conflicts_with_all = ["api_key", "secrets"])]
        clear_secrets: bool,
        /// Remove all attributes.
        #[arg(long, conflicts_with = "attrs")]
        clear_attrs: bool,
    },
    /// Show one model connection.
    Get {
        /// Name or id.
        model: String,
    },
    /// List model connections.
    List,
    /// Delete a model connection (it leaves every pool and gateway).
    Remove {
        /// Name or id.
        model: String,
    },
    /// Start administrator OAuth consent.
    OauthConnect {
        /// Name or id.
        model: String,
    },
    /// Revoke the stored OAuth grant.
    OauthDisconnect {
        /// Name or id.
        model: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum PoolCmd {
    /// Create a pool.
    Create {
        name: String,
        /// round_robin | weighted | priority
        #[arg(long, value_parser = parse::strategy)]
        strategy: Option<PoolStrategy>,
        /// MODEL[:WEIGHT[:PRIORITY]]; repeatable.
        #[arg(long = "member")]
        members: Vec<String>,
    },
    /// Change a pool; only what you pass changes.
    Update {
        /// Name or id.
        pool: String,
        /// New name.
        #[arg(long)]
        name: Option<String>,
        /// round_robin | weighted | priority
        #[arg(long, value_parser = parse::strategy)]
        strategy: Option<PoolStrategy>,
        /// Replaces all members: MODEL[:WEIGHT[:PRIORITY]]; repeatable.
        #[arg(long = "member")]
        members: Vec<String>,
    },
    /// Show one pool.
    Get {
        /// Name or id.
        pool: String,
    },
    /// List pools.
    List,
    /// Delete a pool.
    Remove {
        /// Name or id.
        pool: String,
    },
    /// Add a model to a pool.
    MemberAdd {
        pool: String,
        model: String,
        /// Weight, at least 1 (default 1).
        #[arg(long)]
        weight: Option<u32>,
        /// Priority, lower is tried first (default 0).
        #[arg(long)]
        priority: Option<u32>,
    },
    /// Remove a model from a pool.
    MemberRemove { pool: String, model: String },
}

#[derive(Debug, Subcommand)]
pub enum GatewayCmd {
    /// Create a gateway.
    Create {
        name: String,
        #[arg(long, default_value = "")]
        description: String,
    },
    /// Change a gateway's name or description.
    Update {
        /// Name or id.
        gateway: String,
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        description: Option<String>,
    },
    /// Show one gateway.
    Get {
        /// Name or id.
        gateway: String,
    },
    /// List gateways.
    List,
    /// Delete a gateway.
    Remove {
        /// Name or id.
        gateway: String,
    },
    /// Set the state: active or disabled.
    State {
        gateway: String,
        /// active | disabled
        #[arg(value_parser = parse::gateway_state)]
        state: GatewayState,
    },
    /// Move the workspace default marker to this gateway.
    Default { gateway: String },
    /// Attach a model connection.
    ModelAdd { gateway: String, model: String },
    /// Attach one discovered operation of a tool connection.
    ToolAdd {
        gateway: String,
        tool: String,
        operation: String,
    },
    /// Attach a whole tool connection.
    ToolSourceAdd { gateway: String, tool: String },
    /// Attach a pool.
    PoolAdd { gateway: String, pool: String },
    /// Detach a model, a pool or a tool.
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
        /// Agent id or name.
        agent: String,
        #[arg(long, conflicts_with = "revoke", required_unless_present = "revoke")]
        grant: bool,
        #[arg(long)]
        revoke: bool,
    },
    /// Spend quotas on gateways.
    #[command(subcommand)]
    Quota(crate::args::GatewayQuotaCmd),
    /// Grant or withdraw access for every agent of the workspace.
    AllAgents {
        gateway: String,
        #[arg(long, conflicts_with = "revoke", required_unless_present = "revoke")]
        grant: bool,
        #[arg(long)]
        revoke: bool,
    },
}
