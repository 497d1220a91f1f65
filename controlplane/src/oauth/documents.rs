//! What the authorization server remembers of the client metadata documents it fetches
//! (`/oauth2/authorize` with a URL as `client_id`): each document for a few minutes, in a
//! bounded memo, and a budget of fetches per client address, so that an unauthenticated
//! caller cannot make this service fetch URLs at will (DESIGN §24). The budget of client
//! registrations per address ([`REGISTER_BURST`]) is set here too.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::peer::Budget;
use crate::store::interactive::ClientRow;

/// How long a fetched document is used before it is fetched again.
pub const DOCUMENT_TTL: Duration = Duration::from_secs(300);
/// Most documents remembered at once.
const MAX_DOCUMENTS: usize = 256;
/// Fetches one client address may make at once, refilled at one per [`REFILL`].
pub const FETCH_BURST: u32 = 5;
const REFILL: Duration = Duration::from_secs(12);
/// Client registrations (`/oauth2/register`) one client address may make at once, refilled
/// at one per [`REGISTER_REFILL`].
pub const REGISTER_BURST: u32 = 10;
pub const REGISTER_REFILL: Duration = Duration::from_secs(30);

/// Fetched documents and the fetch budgets.
pub struct Documents {
    memo: Mutex<HashMap<String, (Instant, ClientRow)>>,
    budget: Budget,
}

impl Default for Documents {
    fn default() -> Self {
        Self {
            memo: Mutex::default(),
            budget: Budget::new(FETCH_BURST, REFILL),
        }
    }
}

impl Documents {
    /// The document at `url`, when fetched within [`DOCUMENT_TTL`].
    pub fn get(&self, url: &str) -> Option<ClientRow> {
        let memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
        memo.get(url)
            .filter(|(at, _)| at.elapsed() < DOCUMENT_TTL)
            .map(|(_, row)| row.clone())
    }

    /// Remembers the document fetched from `url`.
    pub fn put(&self, url: &str, row: ClientRow) {
        let mut memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
        if memo.len() >= MAX_DOCUMENTS && !memo.contains_key(url) {
            memo.retain(|_, (at, _)| at.elapsed() < DOCUMENT_TTL);
            if memo.len() >= MAX_DOCUMENTS {
                let oldest = memo.iter().min_by_key(|(_, (at, _))| *at);
                if let Some(key) = oldest.map(|(k, _)| k.clone()) {
                    memo.remove(&key);
                }
            }
        }
        memo.insert(url.to_string(), (Instant::now(), row));
    }

    /// Takes one fetch from the budget of the client at `peer` (an IPv6 client by its /64);
    /// false when it is used up.
    pub fn spend(&self, peer: IpAddr) -> bool {
        self.budget.spend(peer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str) -> ClientRow {
        ClientRow {
            client_id: id.into(),
            client_name: id.into(),
            redirect_uris: "[]".into(),
            auth_method: "none".into(),
            secret_hash: String::new(),
            created_at: 0,
        }
    }

    #[test]
    fn a_client_address_gets_a_burst_of_fetches_then_waits() {
        let docs = Documents::default();
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        for _ in 0..FETCH_BURST {
            assert!(docs.spend(a));
        }
        assert!(!docs.spend(a));
        assert!(docs.spend("192.0.2.2".parse().unwrap()), "another address");
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        for _ in 0..FETCH_BURST {
            assert!(docs.spend(v6));
        }
        assert!(!docs.spend("2001:db8::2".parse().unwrap()), "the same /64");
    }

    #[test]
    fn documents_are_remembered_within_bounds() {
        let docs = Documents::default();
        for i in 0..MAX_DOCUMENTS + 10 {
            docs.put(&format!("https://c/{i}"), row(&i.to_string()));
        }
        assert_eq!(docs.memo.lock().unwrap().len(), MAX_DOCUMENTS);
        let last = format!("https://c/{}", MAX_DOCUMENTS + 9);
        assert!(docs.get(&last).is_some());
    }
}
