//! Flags of `tool`: MCP tool connections, their catalog and egress headers.

use clap::{Args, Subcommand};

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
    /// OAuth client settings as a JSON object (issuer, authorization_url, token_url,
    /// revocation_url, registration_url, client_id, client_secret, scopes, resource); with
    /// none, they are discovered from the server and the client registers itself.
    #[arg(long, value_name = "JSON")]
    pub oauth_config: Option<String>,
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
    /// The REST services the catalog offers (adapters), with the version an install pins.
    Catalog,
    /// Install a catalog adapter as a tool connection, pinned to its newest version.
    ///
    /// Example: portcullis tool install github-issues github --api-key ghp_… --operation list_issues --operation get_issue
    Install(InstallArgs),
    /// Re-copy the newest version of the connection's adapter (name, filter and credential
    /// are kept).
    Upgrade {
        tool: String,
    },
    /// Remove an installed adapter's connection and its credential.
    Uninstall {
        tool: String,
    },
    /// Start administrator OAuth consent: prints the one-time consent URL.
    ///
    /// Example: portcullis tool oauth-connect github
    OauthConnect {
        /// Name or id.
        tool: String,
        /// Your act-as subject, for a per-user OAuth connection.
        #[arg(long)]
        act_as_sub: Option<String>,
    },
    /// Revoke the stored OAuth grant (the client settings stay).
    OauthDisconnect {
        /// Name or id.
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

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// The adapter's slug (see `tool catalog`).
    pub slug: String,
    /// The connection's name; agents call its tools as NAME/operation.
    pub name: String,
    /// The credential, sent in the adapter's auth header.
    #[arg(long, env = "PORTCULLIS_TOOL_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Each person provisions their own credential (where the adapter supports it).
    #[arg(long)]
    pub per_user: bool,
    /// Offer only this operation; repeatable (all when left out).
    #[arg(long = "operation")]
    pub operations: Vec<String>,
    /// Replace the adapter's base URL (a self-hosted service, such as GitHub Enterprise).
    #[arg(long)]
    pub base_url: Option<String>,
    /// Attach to this gateway (name or id); repeatable.
    #[arg(long = "gateway")]
    pub gateways: Vec<String>,
}
