//! `portcullis quota …` flags. Limits are in USD on the command line (micro-USD on the API).

use clap::{Args, Subcommand};
use portcullis_shared::api::quotas::{QuotaSubject, QuotaWindow};

use crate::parse;

#[derive(Debug, Subcommand)]
pub enum QuotaCmd {
    /// Create a spend quota. One per subject and window: a second create conflicts.
    Create {
        /// workspace | agent | act-as | pool | model | gateway
        #[arg(long, value_parser = parse::quota_subject)]
        subject: QuotaSubject,
        /// The limit in USD per window (e.g. 25 or 0.50).
        #[arg(long, value_parser = parse::usd)]
        limit: u64,
        /// daily (from UTC midnight) | monthly (from the UTC month start; default)
        #[arg(long, value_parser = parse::quota_window)]
        window: Option<QuotaWindow>,
        #[arg(long)]
        name: Option<String>,
        /// For --subject agent: the agent id (or name).
        #[arg(long)]
        agent: Option<String>,
        /// For --subject act-as: the end user's verified OIDC `sub`.
        #[arg(long = "act-as")]
        act_as: Option<String>,
        /// For --subject pool: the pool name; with --subject model: scope to this pool.
        #[arg(long)]
        pool: Option<String>,
        /// For --subject model: the model connection name.
        #[arg(long)]
        model: Option<String>,
        /// For --subject gateway: the gateway name or id.
        #[arg(long)]
        gateway: Option<String>,
        /// Model quotas: a separate budget for each agent and each verified end user.
        #[arg(long)]
        per_caller: bool,
        /// Store without enforcing.
        #[arg(long)]
        disabled: bool,
    },
    /// Change a quota's limit, window, name or enabled flag (its subject never changes).
    Update {
        quota_id: String,
        #[command(flatten)]
        changes: QuotaChanges,
    },
    /// List quotas, disabled ones included.
    List {
        /// Only the quotas of this gateway (name or id).
        #[arg(long)]
        gateway: Option<String>,
    },
    /// Delete a quota.
    Delete { quota_id: String },
}

/// What an update changes; flags left out keep their values.
#[derive(Debug, Args)]
pub struct QuotaChanges {
    /// The new limit in USD.
    #[arg(long, value_parser = parse::usd)]
    pub limit: Option<u64>,
    #[arg(long, value_parser = parse::quota_window)]
    pub window: Option<QuotaWindow>,
    #[arg(long)]
    pub name: Option<String>,
    #[arg(long, conflicts_with = "disable")]
    pub enable: bool,
    #[arg(long)]
    pub disable: bool,
}

/// `portcullis gateway quota …`: quotas on gateways only; ids of other subjects' quotas are
/// refused.
#[derive(Debug, Subcommand)]
pub enum GatewayQuotaCmd {
    /// Set a spend quota on one gateway.
    ///
    /// Example: portcullis gateway quota set edge --limit 250 --window monthly
    Set {
        /// The gateway's name or id.
        gateway: String,
        /// The limit in USD per window.
        #[arg(long, value_parser = parse::usd)]
        limit: u64,
        /// daily | monthly (default)
        #[arg(long, value_parser = parse::quota_window)]
        window: Option<QuotaWindow>,
        #[arg(long)]
        name: Option<String>,
        /// Store without enforcing.
        #[arg(long)]
        disabled: bool,
    },
    /// Change a gateway quota.
    Update {
        quota_id: String,
        #[command(flatten)]
        changes: QuotaChanges,
    },
    /// Gateway quotas, of every gateway or of one.
    List {
        /// The gateway's name or id.
        gateway: Option<String>,
    },
    /// Delete a gateway quota.
    Remove { quota_id: String },
}
