//! The wire formats of the model APIs the gateway speaks, typed for translation.

pub mod anthropic;
pub mod bedrock;
pub mod eventstream;
pub mod gemini;
pub mod openai;
