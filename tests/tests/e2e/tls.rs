//! The gateway and the control plane terminate TLS with rustls when given a certificate and
//! key.

use portcullis_tests::process::{bin, Spawned};
use portcullis_tests::{Backend, ControlPlane};
use serde_json::json;

/// A self-signed certificate for localhost and its key, in `dir`.
async fn self_signed(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
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
    (cert, key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_serves_https() {
    let cp = ControlPlane::start(Backend::Sqlite).await;
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed(dir.path()).await;
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

/// Issue 38, L9: the control plane speaks HTTPS when given a certificate, and only HTTPS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_plane_serves_https() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed(dir.path()).await;
    let mut command = tokio::process::Command::new(bin("portcullis-controlplane"));
    command
        .args(["--listen", "127.0.0.1:0", "--tls-cert"])
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key)
        .arg("--data-dir")
        .arg(dir.path().join("cp"));
    let mut cp = Spawned::spawn(command);
    let addr = cp.wait_listening("control plane").await;
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let health = client
        .get(format!("https://{addr}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status().as_u16(), 200, "{}", cp.logs());
    let key = std::fs::read_to_string(dir.path().join("cp/admin.key")).unwrap();
    let identity = client
        .post(format!(
            "https://{addr}/svc.mgmt.v1.ManagementService/GetIdentity"
        ))
        .bearer_auth(key.trim())
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(identity.status().as_u16(), 200);
    let plain = reqwest::get(format!("http://{addr}/healthz")).await;
    assert!(
        plain.map(|r| r.status().as_u16() != 200).unwrap_or(true),
        "plain HTTP is not served on a TLS listener"
    );
    let meta: serde_json::Value = client
        .get(format!(
            "https://{addr}/.well-known/oauth-authorization-server"
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        meta["issuer"].as_str().unwrap().starts_with("https://"),
        "{meta}"
    );
    cp.terminate().await;
}
