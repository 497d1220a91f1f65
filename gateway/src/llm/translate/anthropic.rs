//! Members whose upstream speaks Anthropic's Messages API.

pub mod from_anthropic;
pub mod from_openai;
