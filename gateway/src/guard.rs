//! Guards on what flows through the gateway: detectors compiled per scope
//! ([`detect::Detector`], in `shared` so the control plane checks and tries guards with the
//! same code) and the hold-back window that guards streamed text ([`window::StreamGuard`]).

pub mod apply;
pub use portcullis_shared::guard as detect;
pub mod scope;
#[cfg(test)]
mod tests;
pub mod window;

pub use apply::{Filtered, Log, Outcome, Tally};
