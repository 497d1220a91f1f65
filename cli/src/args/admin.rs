//! Flags of `rules`, `deployment` and `platform-key`.

use std::path::PathBuf;

use clap::Subcommand;
use portcullis_shared::api::rules::BundleScope;
use portcullis_shared::api::workspace::{Permission, Role};

use crate::parse;

#[derive(Debug, Subcommand)]
pub enum RulesCmd {
    /// Deploy a Cedar bundle; one with the same name in the same scope is replaced.
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
        /// workspace | gateway | agent (default workspace)
        #[arg(long, value_parser = parse::bundle_scope)]
        scope: Option<BundleScope>,
        /// The gateway or agent (id or name) for those scopes.
        #[arg(long)]
        scope_id: Option<String>,
        #[arg(long)]
        name: Option<String>,
    },
    /// List rule bundles.
    List {
        /// workspace | gateway | agent
        #[arg(long, value_parser = parse::bundle_scope)]
        scope: Option<BundleScope>,
        /// Only bundles of this gateway or agent (id or name).
        #[arg(long)]
        scope_id: Option<String>,
        /// Include the bundles compiled from agents and gateway grants.
        #[arg(long)]
        include_managed: bool,
    },
    /// Delete a rule bundle.
    Delete { bundle_id: String },
}

#[derive(Debug, Subcommand)]
pub enum DeploymentCmd {
    /// Create a gateway deployment; prints its token once.
    Create {
        name: String,
        /// The base URL agents reach this deployment's gateways at.
        #[arg(long)]
        public_url: String,
    },
    /// List deployments.
    List,
    /// Revoke a deployment's token.
    Revoke { deployment_id: String },
}

#[derive(Debug, Subcommand)]
pub enum PlatformKeyCmd {
    /// Create a platform key; prints the token once.
    Create {
        name: String,
        /// admin | operator | viewer
        #[arg(long, value_parser = parse::role)]
        role: Role,
        /// Narrow the role to these permissions; repeatable.
        #[arg(long = "permission", value_parser = parse::permission)]
        permissions: Vec<Permission>,
    },
    /// List platform keys.
    List,
    /// Revoke a platform key.
    Revoke { key_id: String },
}
