//! Slow clients (issue 38, M2): connections that never finish their request header stop
//! neither server, and each server closes them once the header deadline (10 s) has passed.

use std::time::Duration;

use portcullis_tests::{Backend, ControlPlane, GatewayProcess};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `count` connections to `base` that each send the start of a header and nothing more.
async fn half_open(base: &str, count: usize) -> Vec<TcpStream> {
    let addr = base.trim_start_matches("http://");
    let mut held = Vec::with_capacity(count);
    for _ in 0..count {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /ready HTTP/1.1\r\nHost: slow\r\n")
            .await
            .unwrap();
        held.push(s);
    }
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_connections_stop_neither_server() {
    let cp = ControlPlane::start(Backend::Sqlite).await;
    let gw = GatewayProcess::start(&cp).await;
    gw.wait_ready().await;
    let mut held = half_open(&cp.url, 500).await;
    held.extend(half_open(&gw.url, 500).await);
    let ports: Vec<u16> = held.iter().map(|s| s.peer_addr().unwrap().port()).collect();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    for base in [&cp.url, &gw.url] {
        let ready = client.get(format!("{base}/ready")).send().await.unwrap();
        assert_eq!(
            ready.status().as_u16(),
            200,
            "{base} answers beside 500 slow clients"
        );
    }
    tokio::time::sleep(Duration::from_secs(11)).await;
    let mut closed = 0;
    let mut open_ports = Vec::new();
    for (i, mut s) in held.into_iter().enumerate() {
        let mut buf = [0u8; 512];
        // Closed by the server: end of stream (or a reset), possibly after an error answer.
        let read = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => return true,
                    Ok(_) => continue,
                }
            }
        })
        .await;
        if read.unwrap_or(false) {
            closed += 1;
        } else {
            open_ports.push((i, ports[i]));
        }
    }
    assert_eq!(
        closed, 1000,
        "every slow connection was closed at the header deadline; open: {open_ports:?}"
    );
    for base in [&cp.url, &gw.url] {
        let ready = client.get(format!("{base}/ready")).send().await.unwrap();
        assert_eq!(ready.status().as_u16(), 200);
    }
}
