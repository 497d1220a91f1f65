//! The interactive store's purge, on SQLite.

use portcullis_shared::seal::Cipher;

use super::*;
use crate::store::{SqliteSync, Store};

const DAY: i64 = 24 * 3600 * 1000;

fn client(id: &str, created_at: i64) -> ClientRow {
    ClientRow {
        client_id: id.into(),
        client_name: id.into(),
        redirect_uris: "[\"https://app.example/cb\"]".into(),
        auth_method: "none".into(),
        secret_hash: String::new(),
        created_at,
    }
}

async fn clients(store: &Store) -> Vec<String> {
    let mut conn = store.read().await.unwrap();
    let rows: Vec<(String,)> =
        sqlx::query_as("SELECT client_id FROM interactive_clients ORDER BY client_id")
            .fetch_all(&mut *conn)
            .await
            .unwrap();
    rows.into_iter().map(|r| r.0).collect()
}

#[tokio::test]
async fn clients_no_code_grant_or_consent_used_are_purged_a_day_after_registering() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("t.db").display());
    let store = Store::open(&url, Cipher::from_key(&[7; 32]), SqliteSync::Normal)
        .await
        .unwrap();
    let now = 100 * DAY;
    let old = now - DAY - 1;
    let mut tx = store.write_unscoped().await.unwrap();
    let conn = tx.conn();
    sqlx::query("INSERT INTO workspaces (id, name, created_at) VALUES ('w1', 'w1', 0)")
        .execute(&mut *conn)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO agents (id, workspace_id, name, status, metadata, token_ttl_secs, \
         allowed_pool_names, allowed_direct_model_names, allowed_tools, actas_allowed_groups, \
         actas_allowed_emails, actas_allowed_subjects, created_at, updated_at) \
         VALUES ('a1', 'w1', 'a1', 'active', '{}', 3600, '[]', '[]', '[]', '[]', '[]', '[]', 0, 0)",
    )
    .execute(&mut *conn)
    .await
    .unwrap();
    for (id, at) in [
        ("old-unused", old),
        ("old-coded", old),
        ("old-granted", old),
        ("old-consented", old),
        ("young-unused", now - DAY + 60_000),
    ] {
        save_client(conn, &client(id, at)).await.unwrap();
    }
    mark_client_used(conn, "old-coded", old + 1000)
        .await
        .unwrap();
    insert_grant(
        conn,
        &GrantRow {
            id: "g1".into(),
            workspace_id: "w1".into(),
            agent_id: "a1".into(),
            gateway_id: "gw".into(),
            client_id: "old-granted".into(),
            subject: "s".into(),
            email: String::new(),
            created_at: old,
            last_used_at: old,
            revoked_at: Some(old + 1),
        },
    )
    .await
    .unwrap();
    put_consent(conn, "w1", "s", "old-consented", "a1", old)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.write_unscoped().await.unwrap();
    assert_eq!(purge(tx.conn(), now).await.unwrap(), 1);
    tx.commit().await.unwrap();
    assert_eq!(
        clients(&store).await,
        ["old-coded", "old-consented", "old-granted", "young-unused"]
    );

    let mut tx = store.write_unscoped().await.unwrap();
    assert_eq!(purge(tx.conn(), now + DAY).await.unwrap(), 1, "a day later");
    tx.commit().await.unwrap();
    assert_eq!(
        clients(&store).await,
        ["old-coded", "old-consented", "old-granted"]
    );
}
