//! The testkit: real Portcullis processes on port 0 with throwaway data dirs and databases,
//! and helpers to call them. Tests build the binaries first (`cargo build --workspace --bins`,
//! which `scripts/test` does) and find them next to the test executable, or in
//! `PORTCULLIS_BIN_DIR`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod act_as;
pub mod controlplane;
pub mod everything;
pub mod fake_llm;
pub mod fake_mcp;
pub mod gateway;
pub mod oauth_upstream;
pub mod oidc;
pub mod process;
pub mod python;
pub mod receiver;
pub mod recorded_service;

pub use controlplane::{Backend, ControlPlane, Reply};
pub use fake_llm::FakeLlm;
pub use gateway::GatewayProcess;

/// Runs one async test body against both store backends, as two tests `sqlite` and
/// `postgres` in a module named after the function.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let cp = $crate::ControlPlane::start($crate::Backend::Sqlite).await;
                super::$name(&cp).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let cp = $crate::ControlPlane::start($crate::Backend::Postgres).await;
                super::$name(&cp).await;
            }
        }
    )*};
}
