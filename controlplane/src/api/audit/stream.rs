//! `StreamEvents`: a Connect server stream (`application/connect+json` envelopes: one flag
//! byte, a 4-byte big-endian length, JSON). Each new event of the caller's workspace that
//! passes the filters is sent as `{"event": …}`; failures end the stream with an end-of-stream
//! envelope (flag 0x02) carrying the Connect error. The workspace comes from the key; the
//! query-only filters are refused. One platform key holds at most
//! [`MAX_PER_KEY`](crate::audit::tails::MAX_PER_KEY) streams open (`resource_exhausted`
//! past it); a stream's place is given back as soon as its client goes away.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use portcullis_shared::api::workspace::Permission;
use portcullis_shared::audit::{QueryEventsRequest, StreamEventsResponse};
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;

use crate::api::{auth, Access};
use crate::audit::stream_matches;
use crate::audit::tails::{Tail, MAX_PER_KEY};
use crate::error::{invalid, ApiError, ApiResult};
use crate::App;

const END_STREAM: u8 = 0x02;

fn envelope(flag: u8, json: &serde_json::Value) -> Bytes {
    let body = json.to_string().into_bytes();
    let mut out = Vec::with_capacity(body.len() + 5);
    out.push(flag);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    Bytes::from(out)
}

fn end_with(err: Option<&ApiError>) -> Bytes {
    match err {
        None => envelope(END_STREAM, &json!({})),
        Some(e) => {
            let c = e.to_connect("");
            envelope(
                END_STREAM,
                &json!({"error": {"code": c.code.as_str(), "message": c.message}}),
            )
        }
    }
}

fn streaming(body: Body) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/connect+json")],
        body,
    )
        .into_response()
}

/// The request message: an enveloped JSON object, or a bare one.
fn request(bytes: &[u8]) -> ApiResult<QueryEventsRequest> {
    let json = if bytes.len() >= 5 && bytes[0] <= 1 {
        let len = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
        bytes
            .get(5..5 + len)
            .ok_or_else(|| invalid("the request envelope is truncated"))?
    } else {
        bytes
    };
    if json.iter().all(u8::is_ascii_whitespace) {
        return Ok(QueryEventsRequest::default());
    }
    serde_json::from_slice(json).map_err(|e| invalid(format!("invalid request message: {e}")))
}

/// The filters only a query may use.
fn refuse_query_only(q: &QueryEventsRequest) -> ApiResult<()> {
    let mut used = Vec::new();
    if !q.agent_ids.is_empty() {
        used.push("agent_ids");
    }
    for (name, v) in [
        ("primary_resource_id", &q.primary_resource_id),
        ("primary_resource_kind", &q.primary_resource_kind),
        ("trace_id", &q.trace_id),
        ("activity_id", &q.activity_id),
        ("workspace_id", &q.workspace_id),
        ("start_time", &q.start_time),
        ("end_time", &q.end_time),
        ("page_token", &q.page_token),
    ] {
        if v.is_some() {
            used.push(name);
        }
    }
    if q.page_size.is_some() {
        used.push("page_size");
    }
    if used.is_empty() {
        Ok(())
    } else {
        Err(invalid(format!(
            "StreamEvents does not take the query-only filters: {}",
            used.join(", ")
        )))
    }
}

async fn open(
    app: &Arc<App>,
    headers: &HeaderMap,
    body: Body,
) -> ApiResult<(String, QueryEventsRequest, Tail)> {
    let principal = auth::authenticate(
        &app.store,
        headers,
        Access::Platform(Permission::GatewayView),
    )
    .await?;
    principal.require(Permission::GatewayView)?;
    let key = &principal.as_platform()?.key_id;
    let tail = app.audit.tails.open(key).ok_or_else(|| {
        ApiError::ResourceExhausted(format!(
            "this platform key has {MAX_PER_KEY} event streams open already; close one first"
        ))
    })?;
    let bytes = axum::body::to_bytes(body, 64 * 1024)
        .await
        .map_err(|_| invalid("the request message is too large"))?;
    let q = request(&bytes)?;
    refuse_query_only(&q)?;
    Ok((principal.workspace_id().to_string(), q, tail))
}

pub async fn stream_events(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let (workspace_id, filter, tail) = match open(&app, &headers, body).await {
        Ok(opened) => opened,
        Err(e) => return streaming(Body::from(end_with(Some(&e)))),
    };
    let mut events = app.audit.subscribe();
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::convert::Infallible>>(256);
    tokio::spawn(async move {
        let _tail = tail;
        loop {
            let received = tokio::select! {
                r = events.recv() => r,
                () = tx.closed() => return, // the client went away
            };
            let event = match received {
                Ok(e) => e,
                Err(RecvError::Lagged(missed)) => {
                    tracing::warn!(
                        missed,
                        "An audit stream fell behind; events were skipped for it."
                    );
                    continue;
                }
                Err(RecvError::Closed) => {
                    let _ = tx.send(Ok(end_with(None))).await;
                    return;
                }
            };
            if event.scope.workspace_id != workspace_id || !stream_matches(&filter, &event) {
                continue;
            }
            let message = serde_json::to_value(StreamEventsResponse {
                event: (*event).clone(),
            })
            .unwrap_or_default();
            if tx.send(Ok(envelope(0, &message))).await.is_err() {
                return; // the client went away
            }
        }
    });
    let mut rx = rx;
    streaming(Body::from_stream(futures_util::stream::poll_fn(
        move |cx| rx.poll_recv(cx),
    )))
}
