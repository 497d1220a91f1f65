//! Members whose upstream speaks Amazon Bedrock's Converse API.

pub mod from_anthropic;
pub mod from_openai;
