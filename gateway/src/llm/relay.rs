//! The relay of an answer the upstream accepted, whole or streamed, as stages: translate (into
//! the caller's shape, reading the upstream's usage as [`Usage`]) → guard (when guards apply
//! to the member) → meter → encode (written with explicit framing). A stream goes event by
//! event, each event released whole once the guards have passed it.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use portcullis_shared::prices::Usage;

use super::api::Inbound;
use super::framing::Framing;
use super::guard::stream::StreamFilter;
use super::plan::Plan;
use super::upstream::is_event_stream;
use super::{guard, translate};
use crate::error::{GatewayError, Shape};
use crate::guard::detect::Detector;
use crate::guard::{Filtered, Tally};
use crate::llm::table::ModelEntry;
use crate::request::RequestCtx;
use crate::session::Session;
use crate::{respond, Gateway};
use portcullis_shared::api::guards::GuardStage;

/// What became of an answer the upstream gave (it accepted the call, so the call is charged
/// whatever happens next): the usage it reported, and the failure that cut the relay short
/// (the answer broke off, or the caller went away), if any.
pub struct Relayed {
    pub usage: Option<Usage>,
    pub failure: Option<GatewayError>,
    /// What the output guards did, when guards applied.
    pub guarded: Option<Guarded>,
}

/// What the output guards did to an answer, and what of it the caller received.
pub struct Guarded {
    pub tally: Tally,
    /// `as_answered`, `redacted`, `partial` (a stream stopped by a `block` guard after some
    /// text went out) or `nothing`.
    pub delivered: &'static str,
}

impl Guarded {
    /// `sent`: whether guarded text went out; `complete`: whether the answer was relayed
    /// to its end.
    fn of(tally: Tally, sent: bool, complete: bool) -> Self {
        let delivered = match (tally.blocked || !complete, sent, tally.matched()) {
            (true, true, _) => "partial",
            (true, false, _) => "nothing",
            (false, _, true) => "redacted",
            (false, _, false) => "as_answered",
        };
        Self { tally, delivered }
    }
}

/// How a stream's relay ended.
enum End {
    Done,
    BrokeOff(String),
    Filtered(Filtered),
}

/// One member's call, as the relay needs it.
pub struct Relay<'a> {
    pub gw: &'a Gateway,
    pub rc: &'a RequestCtx<'a>,
    pub inbound: &'a Inbound,
    pub plan: &'a Plan,
    pub model: &'a ModelEntry,
    /// The output guards that apply to this member, if any.
    pub guard: Option<Arc<Detector>>,
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
            guarded: None,
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
        let mut tally = self
            .guard
            .clone()
            .map(|d| Tally::new(GuardStage::LlmOutput, d));
        let body = match tally.as_mut().map(|t| guard::whole(body.clone(), t)) {
            None => body,
            Some(Ok(guarded)) => guarded,
            Some(Err(filtered)) => {
                return Relayed {
                    usage,
                    failure: Some(GatewayError::Filtered(filtered)),
                    guarded: tally.map(|t| Guarded::of(t, false, true)),
                }
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
        let guarded = tally.map(|t| Guarded::of(t, false, failure.is_none()));
        Relayed {
            usage,
            failure,
            guarded,
        }
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
            Ok(header) => session.write_response_header(header).await,
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            return Relayed {
                usage: None,
                failure: Some(GatewayError::Internal(e.to_string())),
                guarded: None,
            };
        }
        let mut translator = self
            .plan
            .translation
            .stream(self.inbound, &self.plan.context(self.model));
        let mut guards = self.guard.clone().map(|d| {
            let window = self.model.filter_window.max(self.inbound.filter_window);
            let filter = StreamFilter::new(self.plan.caller, d.clone(), window);
            (filter, Tally::new(GuardStage::LlmOutput, d))
        });
        let mut framing = Framing::of(self.plan.translation);
        let mut out = Vec::new();
        let mut body = response.bytes_stream();
        let mut end = loop {
            let next = match tokio::time::timeout(idle, body.next()).await {
                Ok(next) => next,
                Err(_) => break End::BrokeOff("the upstream stream went idle".to_string()),
            };
            let chunk = match next {
                None => break End::Done,
                Some(Err(_)) => break End::BrokeOff("the upstream stream broke off".to_string()),
                Some(Ok(chunk)) => chunk,
            };
            framing.push(&chunk);
            if let Err(why) = drain(&mut framing, &mut translator, &mut out) {
                break End::BrokeOff(why);
            }
            if let Err(filtered) = guard_events(&mut guards, &mut out) {
                break End::Filtered(filtered);
            }
            if out.is_empty() {
                continue;
            }
            let ready = join(&mut out);
            if session.write_response_body(ready, false).await.is_err() {
                tracing::debug!(request_id, "Caller went away mid-stream.");
                return Relayed {
                    usage: translator.usage(),
                    failure: None,
                    guarded: guards.map(|(f, t)| finished(f, t, false)),
                };
            }
        };
        if let End::Done = end {
            match framing.rest() {
                Ok(Some(rest)) => translator.push(rest, &mut out),
                Ok(None) => {}
                Err(why) => end = End::BrokeOff(why),
            }
        }
        let end = self.end(end, &mut translator, &mut guards, &mut out);
        let complete = matches!(end, End::Done);
        let last = join(&mut out);
        if let Err(e) = session.write_response_body(last, true).await {
            tracing::debug!(request_id, error = %e, "Could not finish the stream.");
        }
        Relayed {
            usage: translator.usage(),
            failure: match end {
                End::Filtered(f) => Some(GatewayError::Filtered(f)),
                _ => None,
            },
            guarded: guards.map(|(f, t)| finished(f, t, complete)),
        }
    }

    /// The last events of a stream: the translator's closing ones, guarded, and what the
    /// guards still held; or an error event when the stream broke off or a guard stopped it.
    fn end(
        &self,
        end: End,
        translator: &mut translate::Stream,
        guards: &mut Option<(StreamFilter, Tally)>,
        out: &mut Vec<Bytes>,
    ) -> End {
        let end = match end {
            End::Done => {
                translator.finish(out);
                let guarded = guard_events(guards, out).and_then(|()| match guards {
                    Some((filter, tally)) => filter.finish(out, tally),
                    None => Ok(()),
                });
                match guarded {
                    Ok(()) => End::Done,
                    Err(filtered) => End::Filtered(filtered),
                }
            }
            other => other,
        };
        match &end {
            End::Done => {}
            End::BrokeOff(why) => {
                tracing::warn!(request_id = self.rc.request_id, model = %self.model.name, why, "Upstream stream ended early.");
                self.broke_off(translator, why, out);
                // Held text is not released after the error event.
                if let Err(filtered) = guard_events(guards, out) {
                    out.push(filtered_event(self.plan.caller, &filtered));
                    return End::Filtered(filtered);
                }
            }
            End::Filtered(filtered) => {
                tracing::info!(request_id = self.rc.request_id, model = %self.model.name, %filtered, "A guard stopped the stream.");
                out.push(filtered_event(self.plan.caller, filtered));
            }
        }
        end
    }

    /// Ends a stream that broke off with an error event in the caller's shape, so the caller
    /// does not take a partial answer for a whole one.
    fn broke_off(&self, translator: &mut translate::Stream, why: &str, out: &mut Vec<Bytes>) {
        let message = format!("model '{}': {why}", self.model.name);
        match (self.plan.translation, self.plan.caller) {
            // A translator knows whether its message was whole, and says so in its way.
            (t, _) if t.translates() => translator.finish(out),
            (_, Shape::OpenAi) => {
                out.push(translate::openai_stream_error("api_error", None, &message))
            }
            (_, Shape::Anthropic) => {
                out.push(translate::anthropic_stream_error("api_error", &message))
            }
            (_, Shape::JsonRpc) => {}
        }
    }
}

/// Runs the events gathered so far through the output guards, when guards apply. On a block,
/// `out` keeps what passed before it.
fn guard_events(
    guards: &mut Option<(StreamFilter, Tally)>,
    out: &mut Vec<Bytes>,
) -> Result<(), Filtered> {
    let Some((filter, tally)) = guards else {
        return Ok(());
    };
    for event in std::mem::take(out) {
        filter.push(event, out, tally)?;
    }
    Ok(())
}

fn finished(filter: StreamFilter, mut tally: Tally, complete: bool) -> Guarded {
    filter.count(&mut tally);
    Guarded::of(tally, filter.sent, complete)
}

/// The error event that ends a stream a guard stopped, in the caller's shape.
fn filtered_event(caller: Shape, filtered: &Filtered) -> Bytes {
    let message = filtered.to_string();
    match caller {
        Shape::Anthropic => translate::anthropic_stream_error("permission_error", &message),
        _ => translate::openai_stream_error("permission_error", Some(filtered.code()), &message),
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
