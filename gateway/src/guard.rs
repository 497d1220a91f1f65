//! Guards on what flows through the gateway: detectors compiled per scope
//! ([`detect::Detector`]) and the hold-back window that guards streamed text
//! ([`window::StreamGuard`]).

pub mod detect;
#[cfg(test)]
mod tests;
pub mod window;
