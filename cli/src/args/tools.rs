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
