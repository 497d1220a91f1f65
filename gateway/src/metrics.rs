//! Request counters by route and status class, and the snapshot revision, in Prometheus
//! text form. Lock-free: one atomic per cell.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const ROUTES: [&str; 5] = ["chat", "messages", "models", "mcp", "other"];
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

#[derive(Default)]
pub struct Metrics {
    counts: [[AtomicU64; 5]; 5],
    micros: [AtomicU64; 5],
    /// Calls refused because the person had no credential for a per-user connection.
    credential_required: AtomicU64,
}

impl Metrics {
    pub fn record(&self, route: &str, status: u16, elapsed: Duration) {
        let r = ROUTES
            .iter()
            .position(|x| *x == route)
            .unwrap_or(ROUTES.len() - 1);
        let c = usize::from(status / 100).saturating_sub(1).min(4);
        self.counts[r][c].fetch_add(1, Ordering::Relaxed);
        self.micros[r].fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed);
    }

    /// A call needed a person's credential they have not provided.
    pub fn credential_required(&self) {
        self.credential_required.fetch_add(1, Ordering::Relaxed);
    }

    pub fn render(&self, revision: Option<u64>) -> String {
        let mut out = String::from("# TYPE portcullis_gateway_requests_total counter\n");
        for (r, route) in ROUTES.iter().enumerate() {
            for (c, class) in CLASSES.iter().enumerate() {
                let n = self.counts[r][c].load(Ordering::Relaxed);
                let _ = writeln!(
                    out,
                    "portcullis_gateway_requests_total{{route=\"{route}\",status=\"{class}\"}} {n}"
                );
            }
        }
        out.push_str("# TYPE portcullis_gateway_request_seconds_total counter\n");
        for (r, route) in ROUTES.iter().enumerate() {
            let secs = self.micros[r].load(Ordering::Relaxed) as f64 / 1e6;
            let _ = writeln!(
                out,
                "portcullis_gateway_request_seconds_total{{route=\"{route}\"}} {secs}"
            );
        }
        out.push_str("# TYPE portcullis_gateway_credential_required_total counter\n");
        let _ = writeln!(
            out,
            "portcullis_gateway_credential_required_total {}",
            self.credential_required.load(Ordering::Relaxed)
        );
        out.push_str("# TYPE portcullis_gateway_snapshot_revision gauge\n");
        let _ = writeln!(
            out,
            "portcullis_gateway_snapshot_revision {}",
            revision.map_or(-1, |r| r as i64)
        );
        out
    }
}
