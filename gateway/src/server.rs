//! Accepting connections, thread per core: every worker thread runs its own single-threaded
//! runtime and accept loop on its own `SO_REUSEPORT` socket (bound before start, so port 0
//! works and the real address is logged), so a request never hops threads. Optional TLS goes
//! through pingora's rustls acceptor; writes are gathered until pingora flushes
//! ([`coalesced`]), then pingora's HTTP server session handles the connection. On
//! shutdown each worker stops accepting, tells pingora to end keep-alive, and waits for its
//! in-flight requests up to the grace period. Connections are bounded in all and per client
//! address ([`Gate`]); a request's header must arrive within
//! [`HEADER_READ`](crate::session::HEADER_READ) of the
//! connection (or of the previous response, after
//! [`IDLE_KEEPALIVE`](crate::session::IDLE_KEEPALIVE) idle at most).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pingora::apps::ServerApp;
use pingora::listeners::tls::TlsSettings;
use pingora::protocols::l4::stream::Stream as L4Stream;
use pingora::protocols::{GetSocketDigest, SocketDigest, Stream};
use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{watch, Notify};

use portcullis_shared::conn_limit::Gate;

use crate::app::App;

mod coalesced;

use coalesced::Coalesced;

/// Counts live connections and wakes the drain when the last one ends.
#[derive(Default)]
struct Live {
    count: AtomicUsize,
    idle: Notify,
}

struct Guard(Arc<Live>);

impl Drop for Guard {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

pub struct Tls(pub Arc<pingora::listeners::tls::Acceptor>);

/// Builds the TLS acceptor from PEM files.
pub fn tls(cert: &str, key: &str) -> anyhow::Result<Tls> {
    let settings = TlsSettings::intermediate(cert, key).map_err(|e| anyhow::anyhow!("TLS: {e}"))?;
    Ok(Tls(Arc::new(settings.build())))
}

/// Binds `workers` sockets to one address with `SO_REUSEPORT`; the first may use port 0.
pub fn bind(addr: SocketAddr, workers: usize) -> std::io::Result<(SocketAddr, Vec<TcpSocket>)> {
    let socket = |addr: SocketAddr| -> std::io::Result<TcpSocket> {
        let s = if addr.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        s.set_reuseaddr(true)?;
        #[cfg(unix)]
        s.set_reuseport(true)?;
        s.set_nodelay(true)?;
        s.bind(addr)?;
        Ok(s)
    };
    let first = socket(addr)?;
    let bound = first.local_addr()?;
    let mut all = vec![first];
    for _ in 1..workers.max(1) {
        all.push(socket(bound)?);
    }
    Ok((bound, all))
}

/// What every worker's accept loop shares.
#[derive(Clone)]
pub struct Shared {
    pub app: Arc<App>,
    pub stop: watch::Receiver<bool>,
    pub grace: Duration,
    pub in_flight: Arc<AtomicUsize>,
    pub gate: Arc<Gate>,
}

/// Starts one worker thread per socket; each returns when `stop` flips and it has drained.
pub fn spawn_workers(
    sockets: Vec<TcpSocket>,
    tls: Option<Tls>,
    shared: Shared,
) -> std::io::Result<Vec<std::thread::JoinHandle<()>>> {
    let tls = tls.map(|t| t.0);
    let mut handles = Vec::new();
    for (i, socket) in sockets.into_iter().enumerate() {
        let (tls, shared) = (tls.clone(), shared.clone());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = std::thread::Builder::new()
            .name(format!("gateway-worker-{i}"))
            .spawn(move || {
                runtime.block_on(async move {
                    match socket.listen(4096) {
                        Ok(listener) => serve(listener, tls.map(Tls), shared).await,
                        Err(e) => tracing::error!(error = %e, "Could not listen."),
                    }
                });
            })?;
        handles.push(handle);
    }
    Ok(handles)
}

pub async fn serve(listener: TcpListener, tls: Option<Tls>, shared: Shared) {
    let Shared {
        app,
        mut stop,
        grace,
        in_flight,
        gate,
    } = shared;
    let (shutdown, shutdown_watch) = watch::channel(false);
    let live = Arc::new(Live::default());
    let tls = tls.map(|t| t.0);
    loop {
        let (tcp, _peer, admitted) = tokio::select! {
            a = gate.accept(&listener) => a,
            _ = stop.wait_for(|s| *s) => break,
        };
        live.count.fetch_add(1, Ordering::AcqRel);
        let guard = Guard(live.clone());
        let (app, tls, shutdown_watch) = (app.clone(), tls.clone(), shutdown_watch.clone());
        tokio::spawn(async move {
            let (_guard, _admitted) = (guard, admitted);
            // The peer's address for `client_addr` (read from the socket only when asked).
            let digest = SocketDigest::from_raw_fd(std::os::fd::AsRawFd::as_raw_fd(&tcp));
            let mut l4: L4Stream = tcp.into();
            l4.set_socket_digest(digest);
            let stream: Stream = match tls {
                None => Box::new(Coalesced::new(l4)),
                Some(acceptor) => match acceptor.tls_handshake(l4).await {
                    Ok(s) => Box::new(Coalesced::new(s)),
                    Err(e) => {
                        tracing::debug!(error = %e, "TLS handshake failed.");
                        return;
                    }
                },
            };
            let mut next = Some(stream);
            while let Some(stream) = next {
                next = app.process_new(stream, &shutdown_watch).await;
                if *shutdown_watch.borrow() {
                    break;
                }
            }
        });
    }
    drop(listener);
    let _ = shutdown.send(true);
    // Wait for requests in flight, not for idle keep-alive connections: those (blocked reading
    // a next request that may never come) are closed when this worker's runtime ends.
    let drained = tokio::time::timeout(grace, async {
        let mut quiet = 0;
        while live.count.load(Ordering::Acquire) > 0 && quiet < 2 {
            quiet = if in_flight.load(Ordering::Acquire) == 0 {
                quiet + 1
            } else {
                0
            };
            let wait = live.idle.notified();
            if live.count.load(Ordering::Acquire) == 0 {
                break;
            }
            tokio::select! {
                _ = wait => {}
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            open = live.count.load(Ordering::Acquire),
            "Shutdown grace period ended with connections open."
        );
    }
}
