//! Bounds on the connections a server holds (DESIGN §24), used by both daemons' accept loops:
//! at most so many at once, and at most so many from one client address, so that idle or
//! trickling connections (slowloris) cannot take every file descriptor. A connection over a
//! bound is closed as soon as it is accepted. Accept errors (out of descriptors, say) are
//! logged at most once a second, with how many were not.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The bounds and what is held against them; shared by every accept loop of one server.
pub struct ConnLimit {
    max_total: usize,
    max_per_ip: usize,
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// One admitted connection; dropping it gives its place back.
pub struct Admitted {
    limit: Arc<ConnLimit>,
    ip: IpAddr,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut held = self.limit.held();
        held.total = held.total.saturating_sub(1);
        if let Some(n) = held.per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                held.per_ip.remove(&self.ip);
            }
        }
    }
}

impl ConnLimit {
    pub fn new(max_total: usize, max_per_ip: usize) -> Arc<Self> {
        Arc::new(Self {
            max_total: max_total.max(1),
            max_per_ip: max_per_ip.max(1),
            held: Mutex::default(),
        })
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for a connection from `ip`, or `None` when a bound is reached.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<Admitted> {
        let mut held = self.held();
        let from_ip = held.per_ip.get(&ip).copied().unwrap_or(0);
        if held.total >= self.max_total || from_ip >= self.max_per_ip {
            return None;
        }
        held.total += 1;
        held.per_ip.insert(ip, from_ip + 1);
        Some(Admitted {
            limit: self.clone(),
            ip,
        })
    }

    /// Connections held now.
    pub fn held_now(&self) -> usize {
        self.held().total
    }
}

/// Logs refused connections and accept errors at most once a second each.
#[derive(Default)]
pub struct AcceptLog {
    last_second: AtomicU64,
    suppressed: AtomicU64,
}

impl AcceptLog {
    /// Records an accept error; logs it unless one was logged this second.
    pub fn error(&self, e: &std::io::Error) {
        if let Some(suppressed) = self.admit() {
            tracing::warn!(error = %e, suppressed, "Accepting a connection failed.");
        }
    }

    /// Records a connection refused at a bound.
    pub fn refused(&self, ip: IpAddr) {
        if let Some(suppressed) = self.admit() {
            tracing::warn!(%ip, suppressed, "Connection refused: the server holds as many connections as it allows (in all, or from this address).");
        }
    }

    fn admit(&self) -> Option<u64> {
        let now = crate::unix_millis() / 1000;
        if self.last_second.swap(now, Ordering::AcqRel) == now {
            self.suppressed.fetch_add(1, Ordering::AcqRel);
            return None;
        }
        Some(self.suppressed.swap(0, Ordering::AcqRel))
    }
}

/// After an accept error the loop pauses this long (out of descriptors: let some close).
pub const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// One server's door: its bounds and its accept log, shared by its accept loops.
pub struct Gate {
    limit: Arc<ConnLimit>,
    log: AcceptLog,
}

impl Gate {
    pub fn new(max_total: usize, max_per_ip: usize) -> Arc<Self> {
        Arc::new(Self {
            limit: ConnLimit::new(max_total, max_per_ip),
            log: AcceptLog::default(),
        })
    }

    /// The next connection within the bounds (Nagle off): an accept error is logged and
    /// paused after, a connection over a bound closed at once. Cancel-safe.
    pub async fn accept(
        &self,
        listener: &tokio::net::TcpListener,
    ) -> (tokio::net::TcpStream, std::net::SocketAddr, Admitted) {
        loop {
            match listener.accept().await {
                Err(e) => {
                    self.log.error(&e);
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                }
                Ok((tcp, peer)) => match self.limit.admit(peer.ip()) {
                    Some(admitted) => {
                        let _ = tcp.set_nodelay(true);
                        return (tcp, peer, admitted);
                    }
                    None => self.log.refused(peer.ip()),
                },
            }
        }
    }
}

/// Raises this process's open-file limit to its hard limit, so that the connection bounds,
/// not the descriptor limit, decide when connections are refused. Returns the limit in force.
pub fn raise_open_files() -> u64 {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!(error = %e, "Could not raise the open-file limit.");
            rlimit::Resource::NOFILE.get().map_or(0, |(soft, _)| soft)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_in_all_and_per_address_give_places_back() {
        let limit = ConnLimit::new(3, 2);
        let (a, b) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        let a1 = limit.admit(a).unwrap();
        let _a2 = limit.admit(a).unwrap();
        assert!(limit.admit(a).is_none(), "two from one address");
        let b1 = limit.admit(b).unwrap();
        assert!(limit.admit(b).is_none(), "three in all");
        drop(a1);
        assert!(limit.admit(b).is_some());
        drop(b1);
        assert_eq!(limit.held_now(), 1);
    }

    #[test]
    fn the_open_file_limit_is_raised_to_the_hard_limit() {
        let raised = raise_open_files();
        let (soft, hard) = rlimit::Resource::NOFILE.get().unwrap();
        assert_eq!(raised, soft);
        assert!(soft == hard || soft >= 1 << 20, "{soft} of {hard}");
    }
}
