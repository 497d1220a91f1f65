//! End-to-end tests over real control-plane processes, each run on SQLite and on PostgreSQL.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

mod actas;
mod actas_egress;
mod agents;
mod anthropic;
mod api;
mod api_limits;
mod audit;
mod audit_delivery;
mod bodies;
mod catalog;
mod cli;
mod cli_families;
mod cloud;
mod conformance;
mod connections;
mod egress;
mod eventing;
mod exchange;
mod gateways;
mod guarded;
mod guards;
mod interactive;
mod interactive_consent;
mod interactive_limits;
mod keys;
mod llm;
mod mcp;
mod mcp_admin;
mod mcp_admin_more;
mod mcp_admin_webhooks;
mod metrics_access;
mod models;
mod oauth;
mod oauth_rest;
mod peruser;
mod pools;
mod quotas;
mod resilience;
mod rules;
mod sdk;
mod secrets;
mod slowloris;
mod spend;
mod spend_shared;
mod sync;
mod tls;
mod tools;
mod tools_rest;
mod tools_stdio;
mod webhooks;
mod world;
