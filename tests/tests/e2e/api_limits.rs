//! The management API's per-caller bounds (DESIGN §24, issue 38): a platform key holds at most
//! eight `StreamEvents` streams open, and the REST tool routes authenticate before they read a
//! body.

use std::time::Duration;

use portcullis_client::AdminClient;
use portcullis_shared::audit::QueryEventsRequest;
use portcullis_tests::controlplane::MGMT;
use portcullis_tests::{Backend, ControlPlane};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The Connect code a refused stream open ends with.
fn code(err: &portcullis_client::ClientError) -> String {
    err.code()
        .map(|c| c.as_str().to_string())
        .unwrap_or_else(|| format!("no code: {err}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_platform_key_holds_at_most_eight_event_streams() {
    let cp = ControlPlane::start(Backend::Sqlite).await;
    let admin = AdminClient::new(&cp.url, &cp.key).unwrap();
    let all = QueryEventsRequest::default();
    let mut open = Vec::new();
    for i in 0..8 {
        let stream = admin.stream_events(&all).await;
        open.push(stream.unwrap_or_else(|e| panic!("stream {i}: {e}")));
    }
    let refused = admin.stream_events(&all).await.err().expect("a 9th stream");
    assert_eq!(code(&refused), "resource_exhausted", "{refused}");
    assert!(refused.to_string().contains("8 event streams"), "{refused}");

    // Another key has its own share.
    let created = cp
        .ok(
            MGMT,
            "CreatePlatformKey",
            cp.body(json!({"name": "tail", "role": "viewer"})),
        )
        .await;
    let other = AdminClient::new(&cp.url, created["token"].as_str().unwrap()).unwrap();
    let _theirs = other.stream_events(&all).await.unwrap();

    // A stream whose client went away gives its place back.
    open.pop();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let _again = loop {
        match admin.stream_events(&all).await {
            Ok(s) => break s,
            Err(e) if tokio::time::Instant::now() < deadline => {
                assert_eq!(code(&e), "resource_exhausted", "{e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("the closed stream's place never came back: {e}"),
        }
    };
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anonymous_rest_tool_request_is_refused_before_its_body_is_read() {
    let cp = ControlPlane::start(Backend::Sqlite).await;
    let addr = cp.url.trim_start_matches("http://").to_string();
    // A body of 3 MiB is announced and 64 KiB of it sent: the refusal comes without the rest.
    for key in ["", "svc_pk_not-a-real-key"] {
        let mut conn = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let auth = if key.is_empty() {
            String::new()
        } else {
            format!("authorization: Bearer {key}\r\n")
        };
        let head = format!(
            "POST /v1/tools HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
             {auth}content-length: {}\r\n\r\n",
            3 * 1024 * 1024
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        conn.write_all(&vec![b' '; 64 * 1024]).await.unwrap();
        let mut answer = vec![0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut answer))
            .await
            .expect("an answer before the body is sent")
            .unwrap();
        let answer = String::from_utf8_lossy(&answer[..n]).to_string();
        assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
        assert!(answer.contains("unauthenticated"), "{answer}");
    }
}
