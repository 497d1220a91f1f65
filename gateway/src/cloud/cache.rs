//! A value that expires (a token, temporary credentials): served from memory while it is
//! fresh, fetched by one caller when it is not while the others wait for that fetch.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;

/// A cached value and when it stops being served.
struct Entry<T> {
    value: T,
    stale_at: Instant,
}

pub struct Expiring<T> {
    current: ArcSwapOption<Entry<T>>,
    refresh: tokio::sync::Mutex<()>,
    /// How long before its expiry a value is replaced.
    margin: Duration,
}

impl<T: Clone> Expiring<T> {
    pub fn new(margin: Duration) -> Self {
        Self {
            current: ArcSwapOption::empty(),
            refresh: tokio::sync::Mutex::new(()),
            margin,
        }
    }

    fn fresh(&self) -> Option<T> {
        self.current
            .load()
            .as_ref()
            .filter(|e| Instant::now() < e.stale_at)
            .map(|e| e.value.clone())
    }

    /// The value, fetching it (once for all concurrent callers) when there is none or it is
    /// within the margin of its expiry. `fetch` yields the value and how long it is valid;
    /// `None` is valid until the process ends.
    pub async fn get<E, F, Fut>(&self, fetch: F) -> Result<T, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(T, Option<Duration>), E>>,
    {
        if let Some(v) = self.fresh() {
            return Ok(v);
        }
        let _one_at_a_time = self.refresh.lock().await;
        // Another caller may have fetched it while this one waited.
        if let Some(v) = self.fresh() {
            return Ok(v);
        }
        let (value, valid_for) = fetch().await?;
        let now = Instant::now();
        let stale_at = match valid_for {
            Some(d) => now + d.saturating_sub(self.margin),
            None => now + Duration::from_secs(100 * 365 * 24 * 3600),
        };
        self.current.store(Some(Arc::new(Entry {
            value: value.clone(),
            stale_at,
        })));
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_callers_one_fetch_and_a_refresh_before_expiry() {
        let cache = Arc::new(Expiring::<String>::new(Duration::from_millis(50)));
        let fetches = Arc::new(AtomicUsize::new(0));
        let fetch = |fetches: Arc<AtomicUsize>| async move {
            let n = fetches.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok::<_, ()>((format!("token-{n}"), Some(Duration::from_millis(150))))
        };
        let mut tasks = Vec::new();
        for _ in 0..32 {
            let (cache, fetches) = (cache.clone(), fetches.clone());
            tasks.push(tokio::spawn(
                async move { cache.get(|| fetch(fetches)).await },
            ));
        }
        for t in tasks {
            assert_eq!(t.await.unwrap().unwrap(), "token-0");
        }
        assert_eq!(
            fetches.load(Ordering::SeqCst),
            1,
            "one fetch for 32 callers"
        );
        // Valid for 150 ms with a 50 ms margin: replaced after 100 ms.
        tokio::time::sleep(Duration::from_millis(120)).await;
        let v = cache.get(|| fetch(fetches.clone())).await.unwrap();
        assert_eq!((v.as_str(), fetches.load(Ordering::SeqCst)), ("token-1", 2));
        // A failed fetch is an error for its caller and leaves nothing cached.
        let failing = Expiring::<String>::new(Duration::ZERO);
        assert!(failing
            .get(|| async { Err::<(String, Option<Duration>), _>("down") })
            .await
            .is_err());
    }
}
