//! `fake-llm --listen ADDR [--chunk-delay-ms N] [--reply-bytes N]`: the testkit's fake OpenAI
//! upstream as a process, for the benchmark. Keeps no record of requests. `--reply-bytes`
//! makes every answer about that long: business prose with numbers and ids that look like
//! personal data or keys but are not, as guards see in real answers.

use portcullis_tests::FakeLlm;

#[tokio::main]
async fn main() {
    let mut listen = "127.0.0.1:0".to_string();
    let mut delay = 0;
    let mut reply_bytes = 0usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => listen = args.next().unwrap_or(listen),
            "--chunk-delay-ms" => delay = args.next().and_then(|v| v.parse().ok()).unwrap_or(0),
            "--reply-bytes" => reply_bytes = args.next().and_then(|v| v.parse().ok()).unwrap_or(0),
            other => {
                eprintln!("unknown argument {other}");
                std::process::exit(2);
            }
        }
    }
    let mut fake = FakeLlm::openai();
    if reply_bytes > 0 {
        fake = fake.reply(&prose(reply_bytes));
    }
    let fake = fake
        .no_record()
        .chunk_delay_ms(delay)
        .start_on(&listen)
        .await;
    eprintln!("fake-llm listening addr={}", fake.addr);
    let _ = tokio::signal::ctrl_c().await;
}

/// About `bytes` of prose with near misses: an order number that fails Luhn, a ticket id,
/// a version, a UUID.
fn prose(bytes: usize) -> String {
    const SENTENCE: &str = "The quarterly review lists order 4111111111111112 for the Lisbon \
        office, ticket REF-2024-000118 and release 1.2.3, tracked as \
        550e8400-e29b-41d4-a716-446655440000; nothing else changed this week. ";
    SENTENCE.repeat(bytes / SENTENCE.len() + 1)[..bytes].to_string()
}
