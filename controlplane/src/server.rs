//! Accepting connections for the API, the OAuth endpoints and the pages: HTTP/1 over hyper,
//! each request handed to the router with its peer's address (`ConnectInfo`). Connections are
//! bounded in all and per client address ([`ConnLimit`]); a request's header must arrive
//! within [`HEADER_READ`], which also bounds how long a kept connection waits for its next
//! request. On shutdown the loop stops accepting and waits for open connections to finish.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use portcullis_shared::conn_limit::{AcceptLog, Admitted, ConnLimit, ACCEPT_ERROR_PAUSE};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tower_service::Service;

/// How long a request's header may take to arrive (and a kept connection may sit idle).
pub const HEADER_READ: Duration = Duration::from_secs(10);

/// Serves `router` on `listener` until `stop` flips, then drains.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limit: Arc<ConnLimit>,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let log = AcceptLog::default();
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ)
        .keep_alive(true);
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.wait_for(|s| *s) => break,
        };
        let (tcp, peer) = match accepted {
            Ok(pair) => pair,
            Err(e) => {
                log.error(&e);
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                continue;
            }
        };
        let Some(admitted) = limit.admit(peer.ip()) else {
            log.refused(peer.ip());
            continue;
        };
        connection(&http, &graceful, &router, tcp, peer, admitted);
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Serves one connection in its own task.
fn connection(
    http: &hyper::server::conn::http1::Builder,
    graceful: &GracefulShutdown,
    router: &Router,
    tcp: TcpStream,
    peer: SocketAddr,
    admitted: Admitted,
) {
    let _ = tcp.set_nodelay(true);
    let router = router.clone();
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        let mut router = router.clone();
        async move { router.call(request.map(axum::body::Body::new)).await }
    });
    let served = graceful.watch(http.serve_connection(TokioIo::new(tcp), service));
    tokio::spawn(async move {
        let _admitted = admitted;
        if let Err(e) = served.await {
            tracing::debug!(error = %e, %peer, "Connection ended with an error.");
        }
    });
}
