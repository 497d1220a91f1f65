//! The session a request is read from and answered on — pingora's HTTP server session, HTTP/1
//! or HTTP/2 — and how long a connection may take to send a request. Every step that reads
//! a body or writes a response takes a [`Session`]; `server` accepts the connections.

use std::time::Duration;

/// One request on a downstream connection, HTTP/1 or HTTP/2.
pub type Session = pingora::protocols::http::ServerSession;

/// How long a request's header may take to arrive, from its first byte's wait.
pub const HEADER_READ: Duration = Duration::from_secs(10);
/// How long a kept connection may wait idle for its next request.
pub const IDLE_KEEPALIVE: Duration = Duration::from_secs(75);
