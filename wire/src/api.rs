//! Wire types of the control-plane API (Connect unary JSON). Requests reject unknown fields;
//! replies never carry secrets.

pub mod actas;
pub mod agents;
pub mod catalog;
pub mod common;
pub mod credentials;
pub mod eventing;
pub mod gateways;
pub mod guards;
pub mod interactive;
pub mod models;
pub mod pools;
pub mod quotas;
pub mod rules;
pub mod tools;
pub mod workspace;

pub use common::*;

/// Service names, as they appear in `POST /<service>/<Operation>`.
pub mod service {
    pub const MGMT: &str = "svc.mgmt.v1.ManagementService";
    pub const AGENTS: &str = "svc.agents.v1.AgentService";
    pub const RULES: &str = "svc.rules.v1.RuleService";
    pub const SYNC: &str = "svc.sync.v1.SyncService";
    pub const AUDIT: &str = "svc.audit.v1.AuditService";
    pub const EVENTING: &str = "svc.eventing.v1.EventingService";
}

/// Every request body names its workspace; the server checks it against the caller's key.
pub trait WorkspaceScoped {
    /// Top-level fields where an empty string is a value of its own (it clears or resets the
    /// stored one, as an update's `token_ttl` does). Everywhere else an empty string means the
    /// field was not sent, as in proto3 JSON.
    const EMPTY_IS_A_VALUE: &'static [&'static str] = &[];

    /// The workspace the request is for; `None` only where the operation allows omitting it.
    fn workspace_id(&self) -> Option<&str>;
}

macro_rules! scoped {
    ($($ty:ty),* $(,)?) => {$(
        impl $crate::api::WorkspaceScoped for $ty {
            fn workspace_id(&self) -> Option<&str> {
                Some(&self.workspace_id)
            }
        }
    )*};
    ($ty:ty, empty_is_a_value: [$($field:literal),* $(,)?]) => {
        impl $crate::api::WorkspaceScoped for $ty {
            const EMPTY_IS_A_VALUE: &'static [&'static str] = &[$($field),*];

            fn workspace_id(&self) -> Option<&str> {
                Some(&self.workspace_id)
            }
        }
    };
}
pub(crate) use scoped;
