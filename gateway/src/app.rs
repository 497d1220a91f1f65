//! The gateway as pingora's HTTP application: each request of a connection is read, answered
//! by the gateway itself ([`crate::dispatch`]), its failure turned into a response in the
//! route's shape, and the connection handed back for the next one. The gateway never proxies
//! a connection as it is, so it runs on pingora's HTTP server directly, without its proxy
//! layer (whose per-request session holds a cache, modules and upstream state).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use pingora::apps::{HttpPersistentSettings, HttpServerApp, ReusedHttpStream};
use pingora::server::ShutdownWatch;

use crate::dispatch::{activity_id, dispatch};
use crate::error::GatewayError;
use crate::route::{route, Route};
use crate::session::Session;
use crate::{respond, Gateway};

/// The gateway's HTTP application: every request pingora reads is answered here.
pub struct App {
    pub gw: Arc<Gateway>,
}

#[async_trait]
impl HttpServerApp for App {
    /// One request of a connection: read, answered, and the connection handed back for the
    /// next request when it can be reused.
    async fn process_new_http(
        self: &Arc<Self>,
        mut session: Session,
        shutdown: &ShutdownWatch,
    ) -> Option<ReusedHttpStream> {
        // A header that does not arrive in time (a slow or idle client) closes the connection.
        let kept = session.take_connection_user_context().is_some();
        let deadline = crate::session::HEADER_READ
            + if kept {
                crate::session::IDLE_KEEPALIVE
            } else {
                std::time::Duration::ZERO
            };
        match tokio::time::timeout(deadline, session.read_request()).await {
            Err(_) => return None,
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => return None,
            Ok(Err(e)) => {
                if matches!(e.etype, pingora::ErrorType::InvalidHTTPHeader) {
                    tracing::debug!(error = %e, "Unreadable request header.");
                    let _ = session.respond_error(400).await;
                }
                session.shutdown().await;
                return None;
            }
        }
        if *shutdown.borrow() {
            // Going away: this connection takes no further request.
            session.set_keepalive(None);
        } else {
            // Kept for the next request at most this long idle (unless the client closes it).
            session.set_keepalive(Some(crate::session::IDLE_KEEPALIVE.as_secs()));
        }
        if let Err(e) = self.answer(&mut session).await {
            tracing::debug!(error = %e, "Could not write the response.");
            session.shutdown().await;
            return None;
        }
        let mut settings = HttpPersistentSettings::for_session(&session);
        // Marks the connection as kept, for the next request's header deadline.
        settings.set_user_context(Box::new(()));
        session
            .finish()
            .await
            .ok()
            .flatten()
            .map(|stream| ReusedHttpStream::from_reusable_stream(stream, settings))
    }
}

/// A refusal answered before its request's body was read leaves the rest of that body on the
/// connection. pingora closes such a connection; a body this small is read off after the
/// answer instead, so that the client's next request reuses the connection. A larger or
/// chunked body, or one that does not arrive in time, still closes it.
fn keep_after_refusal(session: &mut Session) {
    let declared = session
        .req_header()
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|len| len <= DRAINED_BODY_MAX) {
        session.set_close_on_response_before_downstream_finish(false);
        session.set_total_drain_timeout(Some(DRAIN_TIMEOUT));
    }
}

/// The largest unread request body read off after an early answer to keep its connection.
const DRAINED_BODY_MAX: usize = 64 * 1024;
/// How long the rest of such a body may take to arrive.
const DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

impl App {
    async fn answer(&self, session: &mut Session) -> pingora::Result<()> {
        let started = Instant::now();
        let _in_flight = InFlight::enter(&self.gw.in_flight);
        let request_id = crate::request::random_uuid();
        let method = session.req_header().method.as_str().to_string();
        let path = session.req_header().uri.path().to_string();
        let route = route(&method, &path);
        let result = dispatch(&self.gw, session, route.clone(), &request_id).await;
        if let Err(err) = result {
            if session.response_written().is_none() {
                refuse(session, &route, &err, &request_id).await?;
            } else {
                tracing::warn!(request_id, error = %err, "Request failed after its response began.");
            }
        }
        let status = session.response_written().map_or(0, |r| r.status.as_u16());
        self.gw
            .metrics
            .record(route.kind(), status, started.elapsed());
        Ok(())
    }
}

/// The one place a failure becomes a response, in the shape of the route's API, with the
/// caller's activity id and, for an MCP caller without a valid token, where to sign in.
async fn refuse(
    session: &mut Session,
    route: &Route<'_>,
    err: &GatewayError,
    request_id: &str,
) -> pingora::Result<()> {
    keep_after_refusal(session);
    let activity = activity_id(session).ok().flatten();
    let mut echo: Vec<_> = activity
        .iter()
        .map(|a| ("x-svc-activity-id", a.as_str()))
        .collect();
    let challenge = match (route, err) {
        (Route::Mcp { gateway_id }, GatewayError::Unauthenticated(_)) => {
            let presented = session.req_header().headers.contains_key("authorization");
            Some(crate::interactive::challenge(
                session, gateway_id, presented,
            ))
        }
        _ => None,
    };
    if let Some(c) = &challenge {
        echo.push(("www-authenticate", c.as_str()));
    }
    respond::error(session, route.shape(), err, request_id, &echo).await
}

/// Counts a request as in flight until dropped.
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    fn enter(counter: &'a AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::AcqRel);
        Self(counter)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
