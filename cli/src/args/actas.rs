//! `portcullis actas-provider …` and `portcullis workspace update`.

use clap::Subcommand;
use portcullis_shared::api::actas::{ActAsStrength, ProviderMethod};

use crate::parse;

/// The settings of a verification provider (all optional on update).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ProviderFields {
    /// oidc: the issuer (`iss`), where discovery starts.
    #[arg(long)]
    pub issuer: Option<String>,
    /// oidc: the value tokens' `aud` must hold.
    #[arg(long)]
    pub audience: Option<String>,
    /// oidc: the key set URL, instead of discovery (on update, "" goes back to discovery).
    #[arg(long)]
    pub jwks_url: Option<String>,
    /// The claim holding the email (default email).
    #[arg(long)]
    pub email_claim: Option<String>,
    /// The claim holding the groups (default groups).
    #[arg(long)]
    pub groups_claim: Option<String>,
    /// oidc: true to take a token's email without `email_verified: true`, for an issuer that
    /// only issues verified emails (default false).
    #[arg(long, value_name = "true|false")]
    pub trust_unverified_email: Option<bool>,
    /// hmac: the shared secret agents sign identities with (16 to 1024 characters).
    #[arg(long, env = "PORTCULLIS_ACTAS_HMAC_SECRET", hide_env_values = true)]
    pub hmac_secret: Option<String>,
    /// oidc: a client registered at the issuer for interactive sign-in (redirect URI
    /// {base_url}/oauth2/signin/callback), for issuers without dynamic registration; "" clears.
    #[arg(long)]
    pub signin_client_id: Option<String>,
    /// oidc: that client's secret.
    #[arg(long, env = "PORTCULLIS_SIGNIN_CLIENT_SECRET", hide_env_values = true)]
    pub signin_client_secret: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum ActAsProviderCmd {
    /// Add a verification provider agents can name with --actas-provider-id.
    Create {
        name: String,
        /// oidc (default) or hmac.
        #[arg(long, value_parser = parse::provider_method)]
        method: Option<ProviderMethod>,
        #[command(flatten)]
        fields: ProviderFields,
    },
    /// Change a provider's settings.
    Update {
        /// Provider id or name.
        provider: String,
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        fields: ProviderFields,
    },
    /// Show one provider.
    Get { provider: String },
    /// List the workspace's providers.
    List,
    /// Delete a provider no agent names.
    Delete { provider: String },
}

#[derive(Debug, Subcommand)]
pub enum WorkspaceCmd {
    /// Change the workspace's settings.
    Update {
        /// free or pro.
        #[arg(long)]
        plan: Option<String>,
        /// The weakest act-as identity admitted: none (asserted by the agent), hmac or oidc.
        #[arg(long, value_parser = parse::actas_strength)]
        actas_min_method: Option<ActAsStrength>,
        /// Streamed output held back for the output guards, in bytes (at most 1 MiB).
        #[arg(long)]
        filter_window_bytes: Option<u64>,
        /// The same in tokens (at most 4096).
        #[arg(long)]
        filter_window_tokens: Option<u64>,
    },
}
