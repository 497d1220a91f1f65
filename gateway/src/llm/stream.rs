//! Streams an upstream's server-sent events to the caller event by event, as they arrive.
//! The usage event the gateway asked for is passed on only when the caller asked for it too.

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use pingora::proxy::Session;
use serde_json::Value;

use super::upstream::Relayed;
use crate::error::GatewayError;
use crate::snapshot::ModelEntry;
use crate::sse::{self, Events};
use crate::{respond, Gateway};

/// Splits a byte stream into SSE events and drops the usage-only event unless wanted.
pub struct UsageFilter {
    pass_usage: bool,
    events: Events,
    /// The last `usage` object seen, for metering.
    pub usage: Option<Value>,
}

impl UsageFilter {
    pub fn new(pass_usage: bool) -> Self {
        Self {
            pass_usage,
            events: Events::default(),
            usage: None,
        }
    }

    /// Takes a chunk and returns the complete events to forward.
    pub fn push(&mut self, chunk: &[u8]) -> Bytes {
        self.events.push(chunk);
        let mut out = BytesMut::new();
        while let Some((event, end)) = self.events.next_event() {
            if self.keep(&event[..end]) {
                out.extend_from_slice(&event);
            }
        }
        out.freeze()
    }

    /// What is left when the upstream ends (an unterminated last event).
    pub fn finish(&mut self) -> Bytes {
        let rest = self.events.rest();
        if !rest.is_empty() && !self.keep(&rest) {
            return Bytes::new();
        }
        rest.freeze()
    }

    fn keep(&mut self, event: &[u8]) -> bool {
        if !event.windows(7).any(|w| w == b"\"usage\"") {
            return true;
        }
        let Ok(json) = serde_json::from_str::<Value>(&sse::data(event)) else {
            return true;
        };
        let usage = json.get("usage").filter(|u| !u.is_null());
        if let Some(u) = usage {
            self.usage = Some(u.clone());
        }
        let usage_only = usage.is_some()
            && json
                .get("choices")
                .and_then(Value::as_array)
                .is_some_and(Vec::is_empty);
        !usage_only || self.pass_usage
    }
}

/// Relays a streamed response and returns the usage it reported. Once the header is written,
/// failures can only end the stream early; they are logged.
pub async fn relay(
    gw: &Gateway,
    session: &mut Session,
    response: reqwest::Response,
    wants_usage: bool,
    model: &ModelEntry,
    request_id: &str,
    extra: &[(&'static str, &str)],
) -> Relayed {
    let mut headers = extra.to_vec();
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
    let mut filter = UsageFilter::new(wants_usage);
    let mut body = response.bytes_stream();
    let idle = gw.config.upstream_timeout();
    loop {
        let next = match tokio::time::timeout(idle, body.next()).await {
            Ok(next) => next,
            Err(_) => {
                tracing::warn!(request_id, model = %model.name, "Upstream stream went idle; ending it.");
                break;
            }
        };
        match next {
            None => break,
            Some(Err(e)) => {
                tracing::warn!(request_id, model = %model.name, error = %e, "Upstream stream broke off.");
                break;
            }
            Some(Ok(chunk)) => {
                let out = filter.push(&chunk);
                if !out.is_empty() && session.write_response_body(Some(out), false).await.is_err() {
                    tracing::debug!(request_id, "Caller went away mid-stream.");
                    return Relayed {
                        usage: filter.usage,
                        failure: None,
                    };
                }
            }
        }
    }
    let rest = filter.finish();
    let rest = (!rest.is_empty()).then_some(rest);
    if let Err(e) = session.write_response_body(rest, true).await {
        tracing::debug!(request_id, error = %e, "Could not finish the stream.");
    }
    Relayed {
        usage: filter.usage,
        failure: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHUNK: &str = "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n";
    const USAGE: &str =
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n";
    const DONE: &str = "data: [DONE]\n\n";

    #[test]
    fn drops_the_usage_event_unless_asked() {
        let mut f = UsageFilter::new(false);
        let out = f.push(format!("{CHUNK}{USAGE}{DONE}").as_bytes());
        assert_eq!(out, format!("{CHUNK}{DONE}").as_bytes());
        assert_eq!(f.usage.as_ref().unwrap()["prompt_tokens"], 3);
        let mut f = UsageFilter::new(true);
        assert_eq!(
            f.push(format!("{CHUNK}{USAGE}{DONE}").as_bytes()),
            format!("{CHUNK}{USAGE}{DONE}").as_bytes()
        );
    }

    #[test]
    fn holds_partial_events_until_complete() {
        let mut f = UsageFilter::new(false);
        let (a, b) = CHUNK.split_at(10);
        assert!(f.push(a.as_bytes()).is_empty());
        assert_eq!(f.push(b.as_bytes()), CHUNK.as_bytes());
        let (a, b) = USAGE.split_at(30);
        assert!(f.push(a.as_bytes()).is_empty());
        assert!(f.push(b.as_bytes()).is_empty());
        assert!(f.usage.is_some());
    }

    #[test]
    fn handles_crlf_and_an_unterminated_tail() {
        let mut f = UsageFilter::new(false);
        assert_eq!(f.push(b"data: 1\r\n\r\ndata: 2"), &b"data: 1\r\n\r\n"[..]);
        assert_eq!(f.finish(), &b"data: 2"[..]);
    }
}
