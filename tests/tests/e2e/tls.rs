//! The gateway terminates TLS with rustls when given a certificate and key.

use portcullis_tests::process::{bin, Spawned};
use portcullis_tests::{Backend, ControlPlane};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_serves_https() {
    let cp = ControlPlane::start(Backend::Sqlite).await;
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let status = tokio::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .await
        .expect("openssl");
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let token = cp
        .ok(
            "svc.mgmt.v1.ManagementService",
            "CreateDeployment",
            cp.body(json!({"name": "tls", "public_url": "https://localhost"})),
        )
        .await["token"]
        .as_str()
        .unwrap()
        .to_string();
    let mut command = tokio::process::Command::new(bin("portcullis-gateway"));
    command
        .args([
            "--control-plane-url",
            &cp.url,
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
        ])
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key)
        .arg("--data-dir")
        .arg(dir.path().join("gw"))
        .env("PORTCULLIS_TOKEN", &token);
    let mut gw = Spawned::spawn(command);
    let addr = gw.wait_listening("gateway").await;
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let mut ready = 0;
    for _ in 0..100 {
        if let Ok(r) = client.get(format!("https://{addr}/ready")).send().await {
            ready = r.status().as_u16();
            if ready == 200 {
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(ready, 200, "{}", gw.logs());
    let plain = reqwest::get(format!("http://{addr}/ready")).await;
    assert!(
        plain.map(|r| r.status().as_u16() != 200).unwrap_or(true),
        "plain HTTP is not served on a TLS listener"
    );
}
