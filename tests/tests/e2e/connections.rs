//! The gateway's HTTP/1 connections, byte by byte: a connection carries request after request,
//! a refusal answered before its small body was read included; a refusal that leaves a large
//! body unread or whose body never arrives, and a request that is not HTTP (400), close their
//! connection.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::world::world;

const BODY: &str = r#"{"model":"gpt","messages":[{"role":"user","content":"hi"}]}"#;

fn chat_request(gateway_id: &str, key: Option<&str>) -> String {
    let auth = key.map_or(String::new(), |k| format!("Authorization: Bearer {k}\r\n"));
    format!(
        "POST /gateways/{gateway_id}/v1/chat/completions HTTP/1.1\r\nHost: gateway\r\n{auth}\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{BODY}",
        BODY.len()
    )
}

/// Reads one response with a `Content-Length` body: (status line, body).
async fn read_response(conn: &mut TcpStream) -> (String, String) {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_string();
            let length: usize = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().ok())?
                })
                .expect("a content-length");
            while data.len() < end + 4 + length {
                let n = conn.read(&mut buf).await.expect("read");
                assert!(n > 0, "the connection closed mid-body");
                data.extend_from_slice(&buf[..n]);
            }
            let body = String::from_utf8_lossy(&data[end + 4..end + 4 + length]).to_string();
            let status = head.lines().next().unwrap_or_default().to_string();
            return (status, body);
        }
        let n = conn.read(&mut buf).await.expect("read");
        assert!(n > 0, "the connection closed before a response");
        data.extend_from_slice(&buf[..n]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_carries_requests_and_refusals_and_a_garbled_one_is_closed() {
    let w = world().await;
    let addr = w.gw.url.trim_start_matches("http://").to_string();
    let mut conn = TcpStream::connect(&addr).await.unwrap();
    let key = Some(w.key.as_str());
    // The refusal is answered before the body is read; the connection still carries the next.
    for key in [key, key, None, key, None] {
        conn.write_all(chat_request(&w.gateway_id, key).as_bytes())
            .await
            .unwrap();
        let (status, body) = read_response(&mut conn).await;
        let expected = if key.is_some() { "200" } else { "401" };
        assert!(
            status.starts_with(&format!("HTTP/1.1 {expected}")),
            "{status}: {body}"
        );
    }

    // A refusal that leaves a large body unread closes its connection rather than wait for it,
    // and so does one whose small body never comes (once the drain gives up). None of either
    // body is sent, so the close is a clean one.
    for declared in [1024 * 1024, 16] {
        let mut unsent = TcpStream::connect(&addr).await.unwrap();
        let head = format!(
            "POST /gateways/{}/v1/chat/completions HTTP/1.1\r\nHost: gateway\r\n\
             Content-Type: application/json\r\nContent-Length: {declared}\r\n\r\n",
            w.gateway_id,
        );
        unsent.write_all(head.as_bytes()).await.unwrap();
        let reply = read_until_closed(&mut unsent).await;
        assert!(reply.starts_with("HTTP/1.1 401"), "{declared}: {reply}");
    }

    let mut garbled = TcpStream::connect(&addr).await.unwrap();
    garbled.write_all(b"NOT HTTP AT ALL\r\n\r\n").await.unwrap();
    let reply = read_until_closed(&mut garbled).await;
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
}

/// Everything the gateway sends until it closes the connection.
async fn read_until_closed(conn: &mut TcpStream) -> String {
    let mut reply = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        conn.read_to_end(&mut reply),
    )
    .await
    .expect("the connection is closed")
    .unwrap();
    String::from_utf8_lossy(&reply).to_string()
}
