//! `portcullis guard …` flags. A guard's config comes from `--pattern`, `--keyword` or
//! `--pii-type` (which also imply its kind), or raw from `--config`.

use clap::Subcommand;
use portcullis_shared::api::guards::{GuardAction, GuardKind, GuardStage};

use crate::parse;

const GUARD_EXAMPLES: &str = "\
Examples:
  portcullis guard create tickets --stage llm_output --action redact --pattern 'TICKET-\\d{4}'
  portcullis guard create no-keys --stage tool_result --kind secrets --action block --tool docs
  portcullis guard create shape --stage tool_result --action redact --tool crm \\
    --schema '{\"type\": \"object\", \"properties\": {\"id\": {\"type\": \"integer\"}}}'
  portcullis guard test tickets --sample 'see TICKET-1234'";

/// What a guard looks at and for, and where (all optional on update).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct GuardFields {
    /// llm_output | llm_input | tool_result | tool_arguments
    #[arg(long, value_parser = parse::guard_stage)]
    pub stage: Option<GuardStage>,
    /// regex | keywords | pii | secrets | json_schema (implied by --pattern, --keyword,
    /// --pii-type or --schema).
    #[arg(long, value_parser = parse::guard_kind)]
    pub kind: Option<GuardKind>,
    /// block (the call fails) | redact (a match becomes [REDACTED:<kind>]).
    #[arg(long, value_parser = parse::guard_action)]
    pub action: Option<GuardAction>,
    /// regex: a pattern (repeatable), bounded in length (`\d{1,12}`, not `\d+`).
    #[arg(long = "pattern", value_name = "REGEX", conflicts_with_all = ["keywords", "pii_types", "config"])]
    pub patterns: Vec<String>,
    /// keywords: a word or phrase (repeatable), matched case-insensitively by default.
    #[arg(long = "keyword", value_name = "WORD", conflicts_with_all = ["pii_types", "config"])]
    pub keywords: Vec<String>,
    /// keywords: match the --keyword values with their case.
    #[arg(long, requires = "keywords")]
    pub case_sensitive: bool,
    /// pii: email, phone, card_number, iban or us_ssn (repeatable; none given = all).
    #[arg(long = "pii-type", value_name = "TYPE", conflicts_with_all = ["schema", "config"])]
    pub pii_types: Vec<String>,
    /// json_schema (tool_result only): the JSON Schema results must conform to, as JSON.
    #[arg(long, value_name = "JSON", conflicts_with_all = ["patterns", "keywords", "config"])]
    pub schema: Option<String>,
    /// The kind's settings as JSON instead of the flags above, e.g. '{"patterns": ["x{2}"]}'.
    #[arg(long, value_name = "JSON")]
    pub config: Option<String>,
    /// Only on this gateway (name or id; repeatable). No scope flag: everywhere.
    #[arg(long = "gateway", value_name = "GATEWAY")]
    pub gateways: Vec<String>,
    /// llm stages: only for this model connection or pool (name or id; repeatable).
    #[arg(long = "model", value_name = "MODEL")]
    pub models: Vec<String>,
    /// tool stages: only for this tool connection (name or id; repeatable).
    #[arg(long = "tool", value_name = "TOOL")]
    pub tools: Vec<String>,
}

#[derive(Debug, Subcommand)]
#[command(after_help = GUARD_EXAMPLES)]
pub enum GuardCmd {
    /// Add a guard; gateways enforce it at their next snapshot.
    #[command(after_help = GUARD_EXAMPLES)]
    Create {
        name: String,
        #[command(flatten)]
        fields: GuardFields,
        /// Store without enforcing.
        #[arg(long)]
        disabled: bool,
    },
    /// Change a guard. Scope flags replace the whole stored scope, config flags the config.
    Update {
        /// Guard id or name.
        guard: String,
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        fields: GuardFields,
        #[arg(long, conflicts_with = "disable")]
        enable: bool,
        #[arg(long)]
        disable: bool,
        /// Apply everywhere again (clears the scope).
        #[arg(long, conflicts_with_all = ["gateways", "models", "tools"])]
        all_scope: bool,
    },
    /// Show one guard.
    Get { guard: String },
    /// List the workspace's guards, disabled ones included.
    List {
        /// Only the guards of this stage.
        #[arg(long, value_parser = parse::guard_stage)]
        stage: Option<GuardStage>,
    },
    /// Delete a guard.
    Delete { guard: String },
    /// Run a guard on a sample: what it finds, and what would be delivered.
    #[command(
        after_help = "Example:\n  echo 'mail bob@example.com' | portcullis guard test pii --sample -"
    )]
    Test {
        /// Guard id or name.
        guard: String,
        /// The text to run it on (`-` reads standard input); at most 1 MiB.
        #[arg(long)]
        sample: String,
    },
}
