//! Who reads `/metrics` (issue 38, L7): callers on the same host without a token; with a
//! metrics token configured, only a caller presenting it, on both daemons.

use portcullis_tests::{Backend, ControlPlane, GatewayProcess};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_need_the_token_once_one_is_set() {
    let plain = ControlPlane::start(Backend::Sqlite).await;
    let open = reqwest::get(format!("{}/metrics", plain.url))
        .await
        .unwrap();
    assert_eq!(open.status().as_u16(), 200, "loopback without a token");

    let token = [("PORTCULLIS_METRICS_TOKEN", "scrape-9c1d")];
    let cp = ControlPlane::start_with(Backend::Sqlite, &token).await;
    let gw = GatewayProcess::start_with(&cp, &token).await;
    gw.wait_ready().await;
    let client = reqwest::Client::new();
    for base in [&cp.url, &gw.url] {
        let url = format!("{base}/metrics");
        let refused = client.get(&url).send().await.unwrap();
        assert_eq!(refused.status().as_u16(), 403, "{base} without the token");
        let wrong = client.get(&url).bearer_auth("nope").send().await.unwrap();
        assert_eq!(wrong.status().as_u16(), 403);
        let ok = client
            .get(&url)
            .bearer_auth("scrape-9c1d")
            .send()
            .await
            .unwrap();
        assert_eq!(ok.status().as_u16(), 200);
        assert!(ok.text().await.unwrap().contains("portcullis_"));
    }
}
