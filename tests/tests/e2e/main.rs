//! End-to-end tests over real control-plane processes, each run on SQLite and on PostgreSQL.

mod agents;
mod api;
mod gateways;
mod keys;
mod llm;
mod models;
mod pools;
mod resilience;
mod rules;
mod secrets;
mod sync;
mod world;
