//! Audit reads: query (cursor pages), get one event, tail the live stream (Connect server
//! streaming), and wait for an event matching a filter. Gateway events land asynchronously, so
//! a test or a tool that just made a call waits rather than queries once.

use std::time::Duration;

use portcullis_wire::api::service::AUDIT;
use portcullis_wire::audit::{
    AuditEventV1, GetEventRequest, GetEventResponse, QueryEventsRequest, QueryEventsResponse,
    StreamEventsResponse,
};
use portcullis_wire::ConnectError;

use crate::defaults::{AUDIT_WAIT_INTERVAL, AUDIT_WAIT_TIMEOUT, PAGE_SIZE};
use crate::error::ClientError;
use crate::AdminClient;

/// How [`AdminClient::wait_for_event`] polls; the defaults are the spec's (30 s, 0.5 s, 50).
#[derive(Debug, Clone, Copy)]
pub struct WaitOptions {
    pub timeout: Duration,
    pub interval: Duration,
    pub page_size: u32,
}

impl Default for WaitOptions {
    fn default() -> Self {
        Self {
            timeout: AUDIT_WAIT_TIMEOUT,
            interval: AUDIT_WAIT_INTERVAL,
            page_size: PAGE_SIZE,
        }
    }
}

const END_STREAM: u8 = 0x02;
/// The largest stream message accepted.
const MAX_MESSAGE: usize = 16 * 1024 * 1024;

/// A live tail of audit events; see [`AdminClient::stream_events`].
pub struct EventStream {
    response: reqwest::Response,
    envelopes: Envelopes,
}

/// The `application/connect+json` envelopes of a server stream (one flag byte, a 4-byte
/// big-endian length, JSON), read as bytes arrive.
#[derive(Default)]
struct Envelopes {
    buf: Vec<u8>,
    ended: bool,
}

impl EventStream {
    /// The next event; `None` when the server ended the stream cleanly.
    pub async fn next(&mut self) -> Option<Result<AuditEventV1, ClientError>> {
        loop {
            if self.envelopes.ended {
                return None;
            }
            if let Some(message) = self.envelopes.take_message() {
                return message;
            }
            match self.response.chunk().await {
                Ok(Some(chunk)) => self.envelopes.buf.extend_from_slice(&chunk),
                Ok(None) => {
                    self.envelopes.ended = true;
                    return (!self.envelopes.buf.is_empty()).then(|| {
                        Err(ClientError::Decode {
                            path: format!("{AUDIT}/StreamEvents"),
                            message: "the stream ended inside a message".into(),
                        })
                    });
                }
                Err(source) => {
                    self.envelopes.ended = true;
                    return Some(Err(ClientError::Transport {
                        url: self.response.url().to_string(),
                        source,
                    }));
                }
            }
        }
    }
}

impl Envelopes {
    /// One complete envelope from the buffer, decoded.
    fn take_message(&mut self) -> Option<Option<Result<AuditEventV1, ClientError>>> {
        if self.buf.len() < 5 {
            return None;
        }
        let flags = self.buf[0];
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        let path = format!("{AUDIT}/StreamEvents");
        if len > MAX_MESSAGE {
            self.ended = true;
            return Some(Some(Err(ClientError::Decode {
                path,
                message: format!("a stream message of {len} bytes is too large"),
            })));
        }
        if self.buf.len() < 5 + len {
            return None;
        }
        let body: Vec<u8> = self.buf.drain(..5 + len).skip(5).collect();
        if flags & END_STREAM != 0 {
            self.ended = true;
            #[derive(serde::Deserialize)]
            struct End {
                error: Option<ConnectError>,
            }
            return Some(match serde_json::from_slice::<End>(&body) {
                Ok(End { error: None }) => None,
                Ok(End { error: Some(e) }) => Some(Err(ClientError::Admin {
                    path,
                    status_code: 200,
                    error: Some(e),
                    body: String::from_utf8_lossy(&body).into_owned(),
                })),
                Err(e) => Some(Err(ClientError::Decode {
                    path,
                    message: e.to_string(),
                })),
            });
        }
        Some(Some(
            serde_json::from_slice::<StreamEventsResponse>(&body)
                .map(|m| m.event)
                .map_err(|e| ClientError::Decode {
                    path,
                    message: e.to_string(),
                }),
        ))
    }
}

impl AdminClient {
    /// One page of events, newest first; pass `next_page_token` back for the next page.
    pub async fn query_events(
        &self,
        request: &QueryEventsRequest,
    ) -> Result<QueryEventsResponse, ClientError> {
        self.call(AUDIT, "QueryEvents", request).await
    }

    pub async fn get_event(
        &self,
        workspace_id: &str,
        event_id: &str,
    ) -> Result<AuditEventV1, ClientError> {
        let request = GetEventRequest {
            workspace_id: workspace_id.to_string(),
            event_id: event_id.to_string(),
        };
        let reply: GetEventResponse = self.call(AUDIT, "GetEvent", &request).await?;
        Ok(reply.event)
    }

    /// Opens a live tail of new events that pass `filter` (the stream's filters only: the
    /// query-only ones are refused by the server). The stream has no request timeout.
    pub async fn stream_events(
        &self,
        filter: &QueryEventsRequest,
    ) -> Result<EventStream, ClientError> {
        let path = format!("{AUDIT}/StreamEvents");
        let json = serde_json::to_vec(filter).map_err(|e| ClientError::Decode {
            path: path.clone(),
            message: e.to_string(),
        })?;
        let mut body = Vec::with_capacity(json.len() + 5);
        body.push(0);
        body.extend_from_slice(&(json.len() as u32).to_be_bytes());
        body.extend_from_slice(&json);
        let http = reqwest::Client::builder()
            .connect_timeout(crate::defaults::REQUEST_TIMEOUT)
            .build()
            .map_err(|e| ClientError::Configuration(e.to_string()))?;
        let response = http
            .post(format!("{}/{path}", self.base_url))
            .bearer_auth(&self.key)
            .header("content-type", "application/connect+json")
            .header("connect-protocol-version", "1")
            .body(body)
            .send()
            .await
            .map_err(|source| ClientError::Transport {
                url: self.base_url.clone(),
                source,
            })?;
        if !response.status().is_success() {
            let status_code = response.status().as_u16();
            let body = response.text().await.unwrap_or_default();
            return Err(ClientError::Admin {
                path,
                status_code,
                error: serde_json::from_str(&body).ok(),
                body,
            });
        }
        let mut stream = EventStream {
            response,
            envelopes: Envelopes::default(),
        };
        // A refused request ends the stream at once; surface that as the open's error.
        if let Ok(Ok(Some(chunk))) =
            tokio::time::timeout(Duration::from_millis(200), stream.response.chunk()).await
        {
            let envelopes = &mut stream.envelopes;
            envelopes.buf.extend_from_slice(&chunk);
            if envelopes.buf.first().is_some_and(|f| f & END_STREAM != 0) {
                if let Some(Some(Err(e))) = envelopes.take_message() {
                    return Err(e);
                }
            }
        }
        Ok(stream)
    }

    /// Polls `QueryEvents` until an event passes `filter`, or fails with
    /// [`ClientError::Timeout`].
    pub async fn wait_for_event(
        &self,
        filter: &QueryEventsRequest,
        options: WaitOptions,
    ) -> Result<AuditEventV1, ClientError> {
        self.wait_for_event_where(filter, options, |_| true).await
    }

    /// Like [`AdminClient::wait_for_event`], also requiring `check` of the event (looked for in
    /// the first page of each poll).
    pub async fn wait_for_event_where(
        &self,
        filter: &QueryEventsRequest,
        options: WaitOptions,
        check: impl Fn(&AuditEventV1) -> bool,
    ) -> Result<AuditEventV1, ClientError> {
        let started = std::time::Instant::now();
        let mut request = filter.clone();
        request.page_size = Some(options.page_size);
        request.page_token = None;
        loop {
            let page = self.query_events(&request).await?;
            if let Some(e) = page.events.into_iter().find(|e| check(e)) {
                return Ok(e);
            }
            if started.elapsed() + options.interval > options.timeout {
                return Err(ClientError::Timeout(format!(
                    "no audit event matched within {:.1} s",
                    options.timeout.as_secs_f64()
                )));
            }
            tokio::time::sleep(options.interval).await;
        }
    }
}

/// The entry point of the `connect_envelope` fuzz target in `fuzz/`. Not an API.
#[doc(hidden)]
pub mod fuzzing {
    use super::{AuditEventV1, ClientError, Envelopes};

    /// The messages of a `StreamEvents` reply arriving in `chunk`-byte pieces (0: whole), as
    /// [`super::EventStream::next`] yields them, until the stream ends or the bytes run out;
    /// and whether bytes of an unfinished envelope are left.
    pub fn read_stream(
        bytes: &[u8],
        chunk: usize,
    ) -> (Vec<Result<AuditEventV1, ClientError>>, bool) {
        let mut envelopes = Envelopes::default();
        let mut out = Vec::new();
        for piece in bytes.chunks(if chunk == 0 {
            bytes.len().max(1)
        } else {
            chunk
        }) {
            envelopes.buf.extend_from_slice(piece);
            while !envelopes.ended {
                match envelopes.take_message() {
                    Some(Some(message)) => out.push(message),
                    Some(None) => envelopes.ended = true,
                    None => break,
                }
            }
            if envelopes.ended {
                break;
            }
        }
        (out, !envelopes.ended && !envelopes.buf.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::fuzzing::read_stream;

    fn envelope(flag: u8, body: &str) -> Vec<u8> {
        let mut out = vec![flag];
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(body.as_bytes());
        out
    }

    #[test]
    fn a_stream_ends_at_its_end_envelope_however_it_is_cut() {
        let mut bytes = envelope(0, "not an event");
        bytes.extend(envelope(
            2,
            r#"{"error":{"code":"permission_denied","message":"no"}}"#,
        ));
        bytes.extend(envelope(0, "{}"));
        for chunk in [0, 1, 3] {
            let (messages, left) = read_stream(&bytes, chunk);
            assert_eq!(messages.len(), 2, "{chunk}");
            assert!(messages.iter().all(Result::is_err));
            assert!(!left, "nothing is read past the end envelope");
        }
    }

    #[test]
    fn an_oversized_or_unfinished_envelope_is_noticed() {
        let (messages, _) = read_stream(&[0, 0xff, 0xff, 0xff, 0xff], 0);
        assert!(matches!(messages.as_slice(), [Err(_)]));
        let (messages, left) = read_stream(&envelope(0, "{}")[..6], 0);
        assert!(messages.is_empty() && left);
    }
}
