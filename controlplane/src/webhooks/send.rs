//! The sender: claims due deliveries with a lease, sends each attempt signed with the
//! destination's live keys, and records the outcome — `succeeded` on a 2xx, the next attempt
//! on the schedule otherwise (a `Retry-After` can push it later), `dlq` when the schedule is
//! used up, `failed` when no attempt can succeed (the destination was deleted or disabled),
//! and `410 Gone` disables the destination and fails what was queued for it.
//! Results are written only while the lease is still held, so a delivery canceled meanwhile
//! stays canceled.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{stream, StreamExt};
use portcullis_shared::{egress, webhook};
use serde_json::Value;
use tokio::sync::watch;

use super::{idle, providers, target, Settings, Wake, LEASE};
use crate::store::webhooks::{self as rows, AttemptRow, DeliveryRow, DestinationRow, Settled};
use crate::store::{now_ms, Store, StoreError};

/// Deliveries claimed per round.
const BATCH: i64 = 64;
/// Attempts in flight at once.
const IN_FLIGHT: usize = 32;
/// Most of an error body kept on the attempt.
const ERROR_BYTES: usize = 300;
/// Most of an error body read.
const ERROR_READ_BYTES: usize = 4096;

pub async fn run(
    store: Store,
    settings: Arc<Settings>,
    owner: String,
    wake: Wake,
    mut stop: watch::Receiver<bool>,
) {
    let client = target::client(settings.allow_private);
    loop {
        let wait = match round(&store, &settings, &client, &owner).await {
            Ok(0) => Duration::from_millis(500),
            Ok(_) => Duration::ZERO,
            Err(e) => {
                tracing::warn!(error = %e, "Sending webhooks failed; retrying.");
                Duration::from_secs(5)
            }
        };
        if idle(wait, &wake.deliveries, &mut stop).await {
            return;
        }
    }
}

/// What one attempt came to.
struct Outcome {
    delivery: DeliveryRow,
    attempt: AttemptRow,
    status_code: Option<u16>,
    retry_after: Option<Duration>,
    /// Whether the destination said it is gone for good.
    gone: bool,
    /// Whether no later attempt could do better (the destination was deleted or disabled,
    /// the body expired).
    terminal: bool,
}

/// Claims a batch, sends it, records the outcomes; returns how many were claimed.
async fn round(
    store: &Store,
    settings: &Settings,
    client: &reqwest::Client,
    owner: &str,
) -> Result<usize, StoreError> {
    let now = now_ms();
    if !rows::has_due(&mut *store.read().await?, now).await? {
        return Ok(0);
    }
    let claimed = {
        let mut tx = store.write_unscoped().await?;
        let claimed = rows::claim_due(
            tx.conn(),
            store.backend(),
            owner,
            now,
            now + LEASE.as_millis() as i64,
            BATCH,
        )
        .await?;
        tx.commit().await?;
        claimed
    };
    if claimed.is_empty() {
        return Ok(0);
    }
    let n = claimed.len();
    let destinations = destinations(store, &claimed).await?;
    let outcomes: Vec<Outcome> = stream::iter(claimed)
        .map(|d| {
            let dest = destinations.get(&d.destination_id);
            attempt(client, settings.allow_private, store, dest, d)
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    record(store, settings, owner, outcomes).await?;
    Ok(n)
}

async fn destinations(
    store: &Store,
    claimed: &[DeliveryRow],
) -> Result<HashMap<String, DestinationRow>, StoreError> {
    let mut conn = store.read().await?;
    let mut out = HashMap::new();
    for d in claimed {
        if !out.contains_key(&d.destination_id) {
            if let Some(row) = rows::destination(&mut conn, &d.destination_id).await? {
                out.insert(d.destination_id.clone(), row);
            }
        }
    }
    Ok(out)
}

/// The secrets that sign now: the current one, then the previous during its grace period.
fn signing_secrets(store: &Store, dest: &DestinationRow, now: i64) -> Result<Vec<String>, String> {
    let open = |key_id: &str, sealed: &str| {
        store
            .cipher()
            .open(&secret_aad(&dest.id, key_id), sealed)
            .map_err(|_| "the destination's signing secret could not be opened".to_string())
            .and_then(|b| String::from_utf8(b).map_err(|_| "bad secret".to_string()))
    };
    let mut out = vec![open(&dest.key_id, &dest.secret)?];
    if let (Some(id), Some(sealed), Some(until)) = (
        &dest.previous_key_id,
        &dest.previous_secret,
        dest.previous_until,
    ) {
        if until > now {
            out.push(open(id, sealed)?);
        }
    }
    Ok(out)
}

/// What a destination's secret is sealed with: bound to the destination and key.
pub fn secret_aad(destination_id: &str, key_id: &str) -> String {
    format!("webhook_destination:{destination_id}:{key_id}")
}

/// What a destination's secret settings are sealed with.
pub fn settings_aad(destination_id: &str) -> String {
    format!("webhook_destination_settings:{destination_id}")
}

/// Where an attempt goes and what it carries.
fn request(store: &Store, dest: &DestinationRow, body: &str) -> Result<(String, Vec<u8>), String> {
    if dest.provider == providers::HTTPS {
        return Ok((dest.endpoint.clone(), body.as_bytes().to_vec()));
    }
    let sealed = dest.sealed_settings.as_deref().unwrap_or_default();
    let opened = store
        .cipher()
        .open(&settings_aad(&dest.id), sealed)
        .map_err(|_| "the destination's settings could not be opened".to_string())?;
    let settings: Value = serde_json::from_slice(&opened).unwrap_or_default();
    let url = settings["webhook_url"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let parsed: Value = serde_json::from_str(body).unwrap_or_default();
    Ok((
        url,
        providers::shape(&dest.provider, &parsed)
            .to_string()
            .into_bytes(),
    ))
}

async fn attempt(
    client: &reqwest::Client,
    allow_private: bool,
    store: &Store,
    dest: Option<&DestinationRow>,
    delivery: DeliveryRow,
) -> Outcome {
    let started_at = now_ms();
    let started = Instant::now();
    // One per delivery, the same on each retry: receivers dedupe attempts on it.
    let webhook_id = format!("msg_{}", delivery.id.replace('-', ""));
    let mut out = Outcome {
        attempt: AttemptRow {
            delivery_id: delivery.id.clone(),
            attempt: delivery.attempts + 1,
            webhook_id: webhook_id.clone(),
            started_at,
            duration_ms: 0,
            status_code: None,
            error: String::new(),
        },
        delivery,
        status_code: None,
        retry_after: None,
        gone: false,
        terminal: false,
    };
    let dest = match deliverable(dest, &out.delivery) {
        Ok(dest) => dest,
        Err(why) => {
            out.attempt.error = why;
            out.terminal = true;
            return out;
        }
    };
    let sent = send(
        client,
        allow_private,
        store,
        dest,
        &out.delivery,
        &webhook_id,
    )
    .await;
    out.attempt.duration_ms = started.elapsed().as_millis() as i64;
    match sent {
        Ok((status, retry_after, detail)) => {
            out.status_code = Some(status);
            out.attempt.status_code = Some(i64::from(status));
            out.retry_after = retry_after;
            out.gone = status == 410;
            if !(200..300).contains(&status) {
                out.attempt.error = detail;
            }
        }
        Err(e) => out.attempt.error = e,
    }
    out
}

/// The destination, unless no attempt can be made.
fn deliverable<'a>(
    dest: Option<&'a DestinationRow>,
    delivery: &DeliveryRow,
) -> Result<&'a DestinationRow, String> {
    let dest = dest.ok_or("the destination was deleted")?;
    if dest.enabled == 0 {
        return Err(format!("the destination is disabled ({})", disabled(dest)));
    }
    if delivery.retained_body(crate::store::now_ms()).is_none() {
        return Err("the body is past its retention period".into());
    }
    Ok(dest)
}

/// Sends one attempt: the status, the receiver's `Retry-After`, and a short detail of a
/// failure.
async fn send(
    client: &reqwest::Client,
    allow_private: bool,
    store: &Store,
    dest: &DestinationRow,
    delivery: &DeliveryRow,
    webhook_id: &str,
) -> Result<(u16, Option<Duration>, String), String> {
    let body = delivery.body.as_deref().unwrap_or_default();
    let (url, payload) = request(store, dest, body)?;
    target::check_at_send(&url, allow_private)?;
    let timestamp = now_ms() / 1000;
    let secrets = signing_secrets(store, dest, now_ms())?;
    let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
    let signature = webhook::signature_header(&secrets, webhook_id, timestamp, &payload);
    let response = client
        .post(&url)
        .header("content-type", "application/json")
        .header("webhook-id", webhook_id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .header("service-event-id", &delivery.event_id)
        .body(payload)
        .send()
        .await
        .map_err(describe)?;
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let detail = if (200..300).contains(&status) {
        String::new()
    } else {
        let text = egress::read_capped(response, ERROR_READ_BYTES)
            .await
            .unwrap_or_default();
        format!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&text)
                .chars()
                .take(ERROR_BYTES)
                .collect::<String>()
        )
    };
    Ok((status, retry_after, detail))
}

fn disabled(dest: &DestinationRow) -> &str {
    if dest.disabled_reason.is_empty() {
        "by an administrator"
    } else {
        &dest.disabled_reason
    }
}

/// A transport error without the URL (a provider's URL is its secret).
fn describe(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text.chars().take(ERROR_BYTES).collect()
}

/// Writes the outcomes in one transaction.
async fn record(
    store: &Store,
    settings: &Settings,
    owner: &str,
    outcomes: Vec<Outcome>,
) -> Result<(), StoreError> {
    let now = now_ms();
    let mut tx = store.write_unscoped().await?;
    let mut gone = Vec::new();
    for o in &outcomes {
        let attempts = o.delivery.attempts as usize + 1;
        let acknowledged = o.status_code.is_some_and(|s| (200..300).contains(&s));
        let next = if acknowledged || o.gone || o.terminal {
            None
        } else {
            settings.next_attempt(attempts, o.retry_after)
        };
        let status = match (acknowledged, next) {
            (true, _) => "succeeded",
            (false, Some(_)) => "pending",
            (false, None) if o.gone || o.terminal => "failed",
            (false, None) => "dlq",
        };
        let settled = Settled {
            id: &o.delivery.id,
            owner,
            status,
            next_attempt_at: next.map(|n| now + n.as_millis() as i64),
            status_code: o.status_code.map(i64::from),
            error: &o.attempt.error,
            attempt: &o.attempt,
        };
        rows::settle(tx.conn(), &settled, now).await?;
        if o.gone {
            gone.push(o.delivery.destination_id.as_str());
        }
    }
    // After the batch's own outcomes, so theirs are recorded first.
    for id in gone {
        let reason = "the endpoint answered 410 Gone";
        rows::disable_destination(tx.conn(), id, reason, now).await?;
        rows::fail_destination(tx.conn(), id, reason, now).await?;
        tracing::warn!(destination_id = %id, "A webhook destination answered 410 Gone; it is disabled.");
    }
    tx.commit().await?;
    Ok(())
}
