//! The relay of an answer the upstream accepted, whole or streamed, as stages: translate (into
//! the caller's shape, reading the upstream's usage as [`Usage`]) → meter → encode (written
//! with explicit framing). A stream goes event by event, each event released whole. Output
//! guards will be one more stage between translate and encode.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use pingora::proxy::Session;
use portcullis_shared::prices::Usage;

use super::api::Inbound;
use super::framing::Framing;
use super::plan::Plan;
use super::translate;
use super::upstream::is_event_stream;
use crate::error::{GatewayError, Shape};
use crate::request::RequestCtx;
use crate::snapshot::ModelEntry;
use crate::{respond, Gateway};

/// What became of an answer the upstream gave (it accepted the call, so the call is charged
/// whatever happens next): the usage it reported, and the failure that cut the relay short
/// (the answer broke off, or the caller went away), if any.
pub struct Relayed {
    pub usage: Option<Usage>,
    pub failure: Option<GatewayError>,
}

/// One member's call, as the relay needs it.
pub struct Relay<'a> {
    pub gw: &'a Gateway,
    pub rc: &'a RequestCtx<'a>,
    pub inbound: &'a Inbound,
    pub plan: &'a Plan,
    pub model: &'a ModelEntry,
}

impl Relay<'_> {
    pub async fn relay(&self, session: &mut Session, response: reqwest::Response) -> Relayed {
        let timeout = self.gw.config.upstream_timeout();
        if self.inbound.stream && is_event_stream(&response) {
            self.stream(session, response, timeout).await
        } else {
            self.whole(session, response, timeout).await
        }
    }

    /// A whole (non-streamed) reply; an upstream that stops sending its body for `timeout`
    /// has failed.
    async fn whole(
        &self,
        session: &mut Session,
        response: reqwest::Response,
        timeout: Duration,
    ) -> Relayed {
        let name = &self.model.name;
        let failed = |e: GatewayError| Relayed {
            usage: None,
            failure: Some(e),
        };
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .filter(|_| !self.plan.translation.translates())
            .unwrap_or("application/json")
            .to_string();
        let body = match tokio::time::timeout(timeout, response.bytes()).await {
            Ok(Ok(body)) => body,
            Ok(Err(_)) => {
                return failed(GatewayError::Upstream(format!(
                    "model '{name}': the response body broke off"
                )))
            }
            Err(_) => {
                return failed(GatewayError::UpstreamTimeout(format!(
                    "model '{name}': the response body stalled"
                )))
            }
        };
        let ctx = self.plan.context(self.model);
        let (body, usage) = match self.plan.translation.response(body, &ctx) {
            Ok(translated) => translated,
            Err(e) => {
                return failed(GatewayError::Upstream(format!(
                    "model '{name}' answered with a reply the gateway could not translate: {e}"
                )))
            }
        };
        let extra = self.rc.echo_headers(name);
        let failure = respond::bytes(
            session,
            200,
            &content_type,
            body,
            self.rc.request_id,
            &extra,
        )
        .await
        .err()
        .map(|e| GatewayError::Internal(format!("writing the response: {e}")));
        Relayed { usage, failure }
    }

    /// A streamed reply, event by event as it arrives. Once the header is written, failures
    /// can only end the stream early: with an error event in the caller's shape.
    async fn stream(
        &self,
        session: &mut Session,
        response: reqwest::Response,
        idle: Duration,
    ) -> Relayed {
        let request_id = self.rc.request_id;
        let mut headers = self.rc.echo_headers(&self.model.name);
        headers.push(("cache-control", "no-cache"));
        let written = match respond::header(200, "text/event-stream", None, request_id, &headers) {
            Ok(header) => session.write_response_header(header, false).await,
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            return Relayed {
                usage: None,
                failure: Some(GatewayError::Internal(e.to_string())),
            };
        }
        let mut translator = self
            .plan
            .translation
            .stream(self.inbound, &self.plan.context(self.model));
        let mut framing = Framing::of(self.plan.translation);
        let mut out = Vec::new();
        let mut body = response.bytes_stream();
        let mut broke_off = loop {
            let next = match tokio::time::timeout(idle, body.next()).await {
                Ok(next) => next,
                Err(_) => break Some("the upstream stream went idle".to_string()),
            };
            let chunk = match next {
                None => break None,
                Some(Err(_)) => break Some("the upstream stream broke off".to_string()),
                Some(Ok(chunk)) => chunk,
            };
            framing.push(&chunk);
            if let Err(why) = drain(&mut framing, &mut translator, &mut out) {
                break Some(why);
            }
            if out.is_empty() {
                continue;
            }
            let ready = join(&mut out);
            if session
                .write_response_body(Some(ready), false)
                .await
                .is_err()
            {
                tracing::debug!(request_id, "Caller went away mid-stream.");
                return Relayed {
                    usage: translator.usage(),
                    failure: None,
                };
            }
        };
        if broke_off.is_none() {
            match framing.rest() {
                Ok(Some(rest)) => translator.push(rest, &mut out),
                Ok(None) => {}
                Err(why) => broke_off = Some(why),
            }
        }
        match broke_off {
            Some(why) => {
                tracing::warn!(request_id, model = %self.model.name, why, "Upstream stream ended early.");
                self.broke_off(&mut translator, &why, &mut out);
            }
            None => translator.finish(&mut out),
        }
        let last = (!out.is_empty()).then(|| join(&mut out));
        if let Err(e) = session.write_response_body(last, true).await {
            tracing::debug!(request_id, error = %e, "Could not finish the stream.");
        }
        Relayed {
            usage: translator.usage(),
            failure: None,
        }
    }

    /// Ends a stream that broke off with an error event in the caller's shape, so the caller
    /// does not take a partial answer for a whole one.
    fn broke_off(&self, translator: &mut translate::Stream, why: &str, out: &mut Vec<Bytes>) {
        let message = format!("model '{}': {why}", self.model.name);
        match (self.plan.translation, self.plan.caller) {
            // A translator knows whether its message was whole, and says so in its way.
            (t, _) if t.translates() => translator.finish(out),
            (_, Shape::OpenAi) => out.push(translate::openai_stream_error("api_error", &message)),
            (_, Shape::Anthropic) => out.push(translate::anthropic_stream_error(&message)),
            (_, Shape::JsonRpc) => {}
        }
    }
}

/// Translates every whole event the framing holds.
fn drain(
    framing: &mut Framing,
    translator: &mut translate::Stream,
    out: &mut Vec<Bytes>,
) -> Result<(), String> {
    while let Some(event) = framing.next_event()? {
        translator.push(event, out);
    }
    Ok(())
}

/// Takes the events gathered so far as one write.
fn join(events: &mut Vec<Bytes>) -> Bytes {
    if events.len() == 1 {
        return events.pop().unwrap_or_default();
    }
    let mut out = BytesMut::with_capacity(events.iter().map(Bytes::len).sum());
    for e in events.drain(..) {
        out.extend_from_slice(&e);
    }
    out.freeze()
}
