//! Members whose upstream speaks Gemini's `generateContent` (the Gemini API, Gemini on Vertex).

pub mod from_anthropic;
pub mod from_openai;
