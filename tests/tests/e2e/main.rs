//! End-to-end tests over real control-plane processes, each run on SQLite and on PostgreSQL.

mod agents;
mod api;
mod gateways;
mod keys;
mod models;
mod pools;
mod rules;
mod secrets;
mod sync;
