//! Members whose upstream speaks OpenAI's chat completions.

pub mod from_anthropic;
pub mod from_openai;
