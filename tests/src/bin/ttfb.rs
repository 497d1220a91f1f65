//! `ttfb URL KEY MODEL COUNT`: sends COUNT streaming chat completions one after another and
//! prints the time to the first body byte (p50, p99, in ms) as JSON. `KEY` may be `-`.

#![allow(clippy::print_stdout, clippy::unwrap_used)]

use std::time::Instant;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, key, model, count] = args.as_slice() else {
        eprintln!("usage: ttfb URL KEY MODEL COUNT");
        std::process::exit(2);
    };
    let count: usize = count.parse().unwrap_or(1000);
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .unwrap_or_default();
    let body = serde_json::json!({"model": model, "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let mut samples = Vec::with_capacity(count);
    for i in 0..count + count / 10 {
        let mut request = client.post(url).json(&body);
        if key != "-" {
            request = request.bearer_auth(key);
        }
        let started = Instant::now();
        let Ok(mut response) = request.send().await else {
            continue;
        };
        let first = response.chunk().await;
        let elapsed = started.elapsed();
        while let Ok(Some(_)) = response.chunk().await {}
        // The first tenth warms connections and is not counted.
        if i >= count / 10 && matches!(first, Ok(Some(_))) {
            samples.push(elapsed.as_secs_f64() * 1000.0);
        }
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    let pick = |q: f64| {
        samples
            .get(((samples.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    println!(
        "{}",
        serde_json::json!({"count": samples.len(), "p50_ms": pick(0.5), "p99_ms": pick(0.99)})
    );
}
