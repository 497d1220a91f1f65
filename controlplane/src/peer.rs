//! The address a request came from, for the budgets kept per client (DESIGN §24): the
//! server hands each connection's peer to [`scope`], which makes it [`current`] while the
//! request is handled, and a [`Budget`] rations what one address may do (fetch client
//! metadata documents, register clients). Behind a reverse proxy this is the proxy's address.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

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

/// Most client addresses a [`Budget`] keeps at once.
const MAX_ADDRESSES: usize = 4096;

/// A token bucket per client address (an IPv6 client by its /64): `burst` actions at once,
/// refilled at one per `refill`. Only [`MAX_ADDRESSES`] are kept; full buckets are forgotten
/// first.
pub struct Budget {
    burst: u32,
    refill: Duration,
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

/// How many actions were left when the bucket was last looked at.
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Budget {
    pub fn new(burst: u32, refill: Duration) -> Self {
        Self {
            burst,
            refill,
            buckets: Mutex::default(),
        }
    }

    fn refilled(&self, b: &Bucket, now: Instant) -> f64 {
        let gained = now.duration_since(b.at).as_secs_f64() / self.refill.as_secs_f64();
        (b.tokens + gained).min(f64::from(self.burst))
    }

    /// Takes one action from the budget of the client at `peer`; false when it is used up.
    pub fn spend(&self, peer: IpAddr) -> bool {
        let key = network(peer);
        let now = Instant::now();
        let full = f64::from(self.burst);
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= MAX_ADDRESSES && !buckets.contains_key(&key) {
            buckets.retain(|_, b| self.refilled(b, now) < full);
            if buckets.len() >= MAX_ADDRESSES {
                let any = buckets.keys().next().copied();
                if let Some(k) = any {
                    buckets.remove(&k);
                }
            }
        }
        let bucket = buckets.entry(key).or_insert(Bucket {
            tokens: full,
            at: now,
        });
        let tokens = self.refilled(bucket, now);
        bucket.at = now;
        bucket.tokens = if tokens >= 1.0 { tokens - 1.0 } else { tokens };
        tokens >= 1.0
    }
}

/// The address a budget is kept for: an IPv4 address, or an IPv6 address's /64.
fn network(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_address_gets_a_burst_then_waits() {
        let budget = Budget::new(5, Duration::from_secs(12));
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        for _ in 0..5 {
            assert!(budget.spend(a));
        }
        assert!(!budget.spend(a));
        assert!(
            budget.spend("192.0.2.2".parse().unwrap()),
            "another address"
        );
        assert!(
            !budget.spend("::ffff:192.0.2.1".parse().unwrap()),
            "the same address, IPv4-mapped"
        );
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        for _ in 0..5 {
            assert!(budget.spend(v6));
        }
        assert!(
            !budget.spend("2001:db8::2".parse().unwrap()),
            "the same /64"
        );
    }

    #[test]
    fn a_budget_refills_over_time_and_keeps_few_addresses() {
        let budget = Budget::new(1, Duration::from_millis(20));
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        assert!(budget.spend(a));
        assert!(!budget.spend(a));
        std::thread::sleep(Duration::from_millis(30));
        assert!(budget.spend(a), "refilled");
        for i in 0..MAX_ADDRESSES as u32 + 10 {
            budget.spend(IpAddr::V4(i.into()));
        }
        assert!(budget.buckets.lock().unwrap().len() <= MAX_ADDRESSES);
    }
}
