//! `portcullis audit …` flags.

use clap::{Args, Subcommand};

/// Filters both a query and a tail take.
#[derive(Debug, Clone, Default, Args)]
pub struct StreamFilters {
    /// Event type (repeatable): model.call, tool.call, tool.list, access.denied, mgmt.operation, …
    #[arg(long = "type")]
    pub event_types: Vec<String>,
    /// Result (repeatable): allowed, denied, error (or RESULT_ALLOWED, …).
    #[arg(long = "result")]
    pub results: Vec<String>,
    /// Actor id: an agent id, platform key id or user subject.
    #[arg(long)]
    pub actor: Option<String>,
    /// Producer service: gateway or controlplane.
    #[arg(long)]
    pub producer: Option<String>,
    /// Request surface: llm, mcp, management (or INITIATOR_SURFACE_…).
    #[arg(long)]
    pub surface: Option<String>,
    /// Operation (rpc method, e.g. CreateAgentKey or tools/call).
    #[arg(long)]
    pub operation: Option<String>,
    /// Resource id or name.
    #[arg(long)]
    pub resource: Option<String>,
    /// A payload field and value, `field=value` (repeatable; dotted paths allowed).
    #[arg(long = "payload")]
    pub payload: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum AuditCmd {
    /// Events, newest first, a page at a time.
    Query {
        #[command(flatten)]
        filters: StreamFilters,
        /// Agent id or name (repeatable).
        #[arg(long = "agent")]
        agents: Vec<String>,
        /// RFC 3339 time, or a duration back from now such as 15m, 2h, 7d.
        #[arg(long)]
        since: Option<String>,
        /// RFC 3339 time, or a duration back from now.
        #[arg(long)]
        until: Option<String>,
        #[arg(long)]
        trace_id: Option<String>,
        #[arg(long)]
        activity_id: Option<String>,
        #[arg(long)]
        resource_id: Option<String>,
        #[arg(long)]
        resource_kind: Option<String>,
        /// Events per page (default 50, at most 1000).
        #[arg(long)]
        limit: Option<u32>,
        /// The next-page token a previous query printed.
        #[arg(long)]
        page_token: Option<String>,
    },
    /// One event, whole.
    Get { event_id: String },
    /// New events as they are recorded, until interrupted.
    Tail {
        #[command(flatten)]
        filters: StreamFilters,
    },
}
