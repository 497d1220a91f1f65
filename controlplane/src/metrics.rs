//! Request counters and latency sums per operation and result code, in Prometheus text form.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

/// (operation, result code) → (count, seconds).
type Cells = BTreeMap<(String, &'static str), (u64, f64)>;

#[derive(Default)]
pub struct Metrics {
    by_op: Mutex<Cells>,
}

impl Metrics {
    pub fn record(&self, operation: &str, code: &'static str, elapsed: Duration) {
        let mut map = self.by_op.lock().unwrap_or_else(|e| e.into_inner());
        let entry = map.entry((operation.to_string(), code)).or_insert((0, 0.0));
        entry.0 += 1;
        entry.1 += elapsed.as_secs_f64();
    }

    pub fn render(&self) -> String {
        let map = self.by_op.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        out.push_str("# HELP portcullis_cp_requests_total Control-plane operations handled.\n");
        out.push_str("# TYPE portcullis_cp_requests_total counter\n");
        for ((op, code), (count, _)) in map.iter() {
            let _ = writeln!(
                out,
                "portcullis_cp_requests_total{{operation=\"{op}\",code=\"{code}\"}} {count}"
            );
        }
        out.push_str("# HELP portcullis_cp_request_seconds_total Time spent in operations.\n");
        out.push_str("# TYPE portcullis_cp_request_seconds_total counter\n");
        for ((op, code), (_, secs)) in map.iter() {
            let _ = writeln!(
                out,
                "portcullis_cp_request_seconds_total{{operation=\"{op}\",code=\"{code}\"}} {secs}"
            );
        }
        out
    }
}
