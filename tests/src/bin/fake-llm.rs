//! `fake-llm --listen ADDR [--chunk-delay-ms N]`: the testkit's fake OpenAI upstream as a
//! process, for the benchmark. Keeps no record of requests.

use portcullis_tests::FakeLlm;

#[tokio::main]
async fn main() {
    let mut listen = "127.0.0.1:0".to_string();
    let mut delay = 0;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => listen = args.next().unwrap_or(listen),
            "--chunk-delay-ms" => delay = args.next().and_then(|v| v.parse().ok()).unwrap_or(0),
            other => {
                eprintln!("unknown argument {other}");
                std::process::exit(2);
            }
        }
    }
    let fake = FakeLlm::openai()
        .no_record()
        .chunk_delay_ms(delay)
        .start_on(&listen)
        .await;
    eprintln!("fake-llm listening addr={}", fake.addr);
    let _ = tokio::signal::ctrl_c().await;
}
