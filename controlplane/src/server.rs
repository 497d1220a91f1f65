//! Accepting connections for the API, the OAuth endpoints and the pages: HTTP/1 over hyper,
//! each request handed to the router with its peer's address (`ConnectInfo`). Connections are
//! bounded in all and per client address ([`Gate`]); a request's header must arrive
//! within [`HEADER_READ`], which also bounds how long a kept connection waits for its next
//! request. With a certificate and key (`tls_cert`, `tls_key`) it speaks HTTPS only, the TLS
//! handshake bounded by the same deadline. On shutdown the loop stops accepting and waits for
//! open connections to finish.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use portcullis_shared::conn_limit::{Admitted, Gate};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tower_service::Service;

/// How long a request's header may take to arrive (and a kept connection may sit idle).
pub const HEADER_READ: Duration = Duration::from_secs(10);

/// Builds the TLS acceptor from PEM files: the certificate chain and its private key.
pub fn tls(cert: &std::path::Path, key: &std::path::Path) -> anyhow::Result<TlsAcceptor> {
    use anyhow::Context;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("reading the TLS certificate {}", cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("reading the TLS key {}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("the TLS certificate and key do not match")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Serves `router` on `listener` until `stop` flips, then drains.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<TlsAcceptor>,
    gate: Arc<Gate>,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ)
        .keep_alive(true);
    loop {
        let (tcp, peer, admitted) = tokio::select! {
            a = gate.accept(&listener) => a,
            _ = stop.wait_for(|s| *s) => break,
        };
        let conn = Conn {
            http: http.clone(),
            watcher: graceful.watcher(),
            router: router.clone(),
            peer,
            admitted,
        };
        tokio::spawn(conn.run(tcp, tls.clone()));
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// One accepted connection and what serving it needs.
struct Conn {
    http: hyper::server::conn::http1::Builder,
    watcher: Watcher,
    router: Router,
    peer: SocketAddr,
    /// Its place among the connections held, given back when it ends.
    admitted: Admitted,
}

impl Conn {
    /// Completes the TLS handshake if there is one (within [`HEADER_READ`]), then serves.
    async fn run(self, tcp: TcpStream, tls: Option<TlsAcceptor>) {
        match tls {
            None => self.serve(TokioIo::new(tcp)).await,
            Some(acceptor) => match tokio::time::timeout(HEADER_READ, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => self.serve(TokioIo::new(stream)).await,
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, peer = %self.peer, "TLS handshake failed.")
                }
                Err(_) => tracing::debug!(peer = %self.peer, "TLS handshake timed out."),
            },
        }
    }

    async fn serve<IO>(self, io: TokioIo<IO>)
    where
        IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let Conn {
            http,
            watcher,
            router,
            peer,
            admitted,
        } = self;
        let _admitted = admitted;
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            let mut router = router.clone();
            async move { router.call(request.map(axum::body::Body::new)).await }
        });
        if let Err(e) = watcher.watch(http.serve_connection(io, service)).await {
            tracing::debug!(error = %e, %peer, "Connection ended with an error.");
        }
    }
}
