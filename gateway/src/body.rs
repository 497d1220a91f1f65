//! Reading a request body whole, size-capped, for the routes that decide on it (model calls
//! and MCP), against a budget of bytes all requests in flight may hold at once
//! (`max_in_flight_body_bytes`): without it, a handful of large concurrent bodies (each held
//! while it is parsed and translated) could take the gateway's memory. A body whose length is
//! declared takes its whole share before it is read, waiting up to [`BUDGET_WAIT`]; a chunked
//! body takes its share as it arrives and never waits. Either way, a body that cannot have its
//! share is refused with 503 `overloaded`, and nothing of it is kept.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::GatewayError;
use crate::session::Session;

/// How long a body with a declared length waits for its share of the budget.
pub const BUDGET_WAIT: Duration = Duration::from_secs(10);

/// Bytes of request bodies that may be held at once, counted in KiB.
pub struct Budget {
    kib: Arc<Semaphore>,
    total_kib: usize,
}

/// A body's share of the budget, given back when the request is answered.
#[derive(Default)]
pub struct Held(Option<OwnedSemaphorePermit>);

fn kib(bytes: usize) -> usize {
    bytes.div_ceil(1024)
}

impl Budget {
    pub fn new(bytes: usize) -> Self {
        let total_kib = kib(bytes).max(1);
        Self {
            kib: Arc::new(Semaphore::new(total_kib)),
            total_kib,
        }
    }

    /// Bytes held now, for `/metrics`.
    pub fn held_bytes(&self) -> usize {
        (self.total_kib - self.kib.available_permits()) * 1024
    }

    /// Takes `bytes` of the budget, waiting up to `wait` (none: only what is free now).
    async fn take(
        &self,
        held: &mut Held,
        bytes: usize,
        wait: Duration,
    ) -> Result<(), GatewayError> {
        let n = u32::try_from(kib(bytes)).unwrap_or(u32::MAX);
        let permit = match self.kib.clone().try_acquire_many_owned(n) {
            Ok(p) => p,
            Err(_) if wait.is_zero() => return Err(busy()),
            Err(_) => tokio::time::timeout(wait, self.kib.clone().acquire_many_owned(n))
                .await
                .map_err(|_| busy())?
                .map_err(|_| busy())?,
        };
        match &mut held.0 {
            Some(p) => p.merge(permit),
            None => held.0 = Some(permit),
        }
        Ok(())
    }
}

fn busy() -> GatewayError {
    GatewayError::Overloaded(
        "the gateway is holding as many request bodies as it may; retry shortly".into(),
    )
}

/// Reads the whole request body, refusing more than `limit` bytes. An oversized body is still
/// read (up to four times the limit) and discarded, so the caller receives the error rather
/// than a reset connection. The body's share of `budget` is held until [`Held`] is dropped.
pub async fn read(
    session: &mut Session,
    limit: usize,
    budget: &Budget,
) -> Result<(bytes::Bytes, Held), GatewayError> {
    let mut held = Held::default();
    let declared = declared_length(session).filter(|n| *n <= limit);
    if let Some(n) = declared {
        budget.take(&mut held, n, BUDGET_WAIT).await?;
    }
    let mut body = Vec::with_capacity(declared.unwrap_or(0));
    let mut seen = 0usize;
    while let Some(chunk) = session
        .read_request_body()
        .await
        .map_err(|e| GatewayError::BadRequest(format!("could not read the request body: {e}")))?
    {
        seen += chunk.len();
        if seen <= limit {
            if declared.is_none_or(|n| seen > n) {
                budget.take(&mut held, chunk.len(), Duration::ZERO).await?;
            }
            body.extend_from_slice(&chunk);
        } else if seen > limit.saturating_mul(4) {
            break;
        }
    }
    if seen > limit {
        return Err(GatewayError::TooLarge(limit));
    }
    Ok((bytes::Bytes::from(body), held))
}

fn declared_length(session: &Session) -> Option<usize> {
    session
        .req_header()
        .headers
        .get(http::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn shares_are_given_back_and_a_full_budget_refuses_or_waits() {
        let budget = Budget::new(100 * 1024);
        let mut a = Held::default();
        budget
            .take(&mut a, 60 * 1024, Duration::ZERO)
            .await
            .unwrap();
        budget.take(&mut a, 1, Duration::ZERO).await.unwrap();
        assert_eq!(budget.held_bytes(), 61 * 1024);
        let mut b = Held::default();
        let refused = budget.take(&mut b, 50 * 1024, Duration::ZERO).await;
        assert!(matches!(refused, Err(GatewayError::Overloaded(_))));
        let waited = budget
            .take(&mut b, 50 * 1024, Duration::from_millis(20))
            .await;
        assert!(matches!(waited, Err(GatewayError::Overloaded(_))));
        drop(a);
        assert_eq!(budget.held_bytes(), 0);
        budget
            .take(&mut b, 50 * 1024, Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(budget.held_bytes(), 50 * 1024);
    }
}
