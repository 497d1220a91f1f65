//! The address a request came from, for the budgets kept per client (DESIGN §24): the
//! server hands each connection's peer to [`scope`], which makes it [`current`] while the
//! request is handled. Behind a reverse proxy this is the proxy's address.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, Request};
use axum::middleware::Next;
use axum::response::Response;

tokio::task_local! {
    static PEER: IpAddr;
}

/// Middleware: handles the request with its peer's address known.
pub async fn scope(request: Request, next: Next) -> Response {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    match peer {
        Some(ip) => PEER.scope(ip, next.run(request)).await,
        None => next.run(request).await,
    }
}

/// The address of the client whose request is being handled, when served over a socket.
pub fn current() -> Option<IpAddr> {
    PEER.try_with(|ip| *ip).ok()
}
