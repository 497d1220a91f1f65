use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

fn url(s: &str) -> Url {
    Url::parse(s).unwrap()
}

#[test]
fn loopback_and_private_literals_are_refused_unless_allowed() {
    for u in [
        "https://127.0.0.1/x",
        "https://localhost:8443/",
        "http://api.localhost/",
        "https://10.1.2.3/",
        "https://[::1]/",
        "https://[::ffff:192.168.1.1]/",
        "https://[fd00::1]/",
    ] {
        let refused = check_url(&url(u), false).unwrap_err().to_string();
        assert!(refused.contains("private"), "{u}: {refused}");
        assert!(check_url(&url(u), true).is_ok(), "{u}");
    }
    assert!(check_url(&url("https://hooks.example.com/x"), false).is_ok());
    assert!(check_url(&url("https://8.8.8.8/"), false).is_ok());
    assert!(check_url(&url("ftp://example.com/"), true).is_err());
}

#[test]
fn metadata_and_link_local_are_refused_even_when_private_targets_are_allowed() {
    for u in [
        "http://169.254.169.254/latest/meta-data",
        "http://[fe80::1]/",
        "http://[::ffff:169.254.169.254]/",
        "http://0.0.0.0/",
        "http://100.100.100.200/",
        "http://[fd00:ec2::254]/",
    ] {
        assert!(check_url(&url(u), true).is_err(), "{u}");
    }
}

/// A listener that counts connections and answers each with `reply`.
async fn server(reply: Vec<u8>) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            let reply = reply.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = socket.read(&mut buf).await;
                let _ = socket.write_all(&reply).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (addr, seen)
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let (second, second_seen) =
        server(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".to_vec()).await;
    let redirect = format!(
        "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://{second}/stolen\r\n\
         content-length: 0\r\n\r\n"
    );
    let (first, _) = server(redirect.into_bytes()).await;
    let http = client(true, Duration::from_secs(5), "test");
    let answer = http
        .post(format!("http://{first}/"))
        .header("x-api-key", "secret")
        .body("prompt")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 307);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(second_seen.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn names_resolving_to_loopback_are_refused_before_connecting() {
    let (addr, seen) = server(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".to_vec()).await;
    let http = client(false, Duration::from_secs(5), "test");
    let sent = http
        .get(format!("http://localhost:{}/", addr.port()))
        .send()
        .await;
    assert!(sent.is_err());
    assert_eq!(seen.load(Ordering::SeqCst), 0);
    let allowed = client(true, Duration::from_secs(5), "test");
    let answer = allowed
        .get(format!("http://localhost:{}/", addr.port()))
        .send()
        .await;
    assert!(answer.is_ok_and(|a| a.status() == 200));
}

#[tokio::test]
async fn bodies_are_read_up_to_the_cap() {
    // No content-length: the body is read until the connection closes.
    let mut big = b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n".to_vec();
    big.extend(std::iter::repeat_n(b'a', 64 * 1024));
    let (addr, _) = server(big).await;
    let http = client(true, Duration::from_secs(5), "test");
    let answer = http.get(format!("http://{addr}/")).send().await.unwrap();
    assert!(matches!(
        read_capped(answer, 5 * 1024).await,
        Err(EgressError::TooLarge(5120))
    ));

    let declared = b"HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\n".to_vec();
    let (addr, _) = server(declared).await;
    let answer = http.get(format!("http://{addr}/")).send().await.unwrap();
    assert!(matches!(
        read_capped(answer, 1024).await,
        Err(EgressError::TooLarge(1024))
    ));

    let small = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello".to_vec();
    let (addr, _) = server(small).await;
    let answer = http.get(format!("http://{addr}/")).send().await.unwrap();
    assert_eq!(&read_capped(answer, 5).await.unwrap()[..], b"hello");
}
