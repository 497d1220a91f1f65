//! Audit reads: query (cursor pages), get one event, tail the live stream (Connect server
//! streaming), and wait for an event matching a filter. Gateway events land asynchronously, so
//! a test or a tool that just made a call waits rather than queries once.

use std::time::Duration;

use portcullis_shared::api::service::AUDIT;
use portcullis_shared::audit::{
    AuditEventV1, GetEventRequest, GetEventResponse, QueryEventsRequest, QueryEventsResponse,
    StreamEventsResponse,
};
use portcullis_shared::ConnectError;

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
    buf: Vec<u8>,
    ended: bool,
}

impl EventStream {
    /// The next event; `None` when the server ended the stream cleanly.
    pub async fn next(&mut self) -> Option<Result<AuditEventV1, ClientError>> {
        loop {
            if self.ended {
                return None;
            }
            if let Some(message) = self.take_message() {
                return message;
            }
            match self.response.chunk().await {
                Ok(Some(chunk)) => self.buf.extend_from_slice(&chunk),
                Ok(None) => {
                    self.ended = true;
                    return (!self.buf.is_empty()).then(|| {
                        Err(ClientError::Decode {
                            path: format!("{AUDIT}/StreamEvents"),
                            message: "the stream ended inside a message".into(),
                        })
                    });
                }
                Err(source) => {
                    self.ended = true;
                    return Some(Err(ClientError::Transport {
                        url: self.response.url().to_string(),
                        source,
                    }));
                }
            }
        }
    }

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
            buf: Vec::new(),
            ended: false,
        };
        // A refused request ends the stream at once; surface that as the open's error.
        if let Ok(Ok(Some(chunk))) =
            tokio::time::timeout(Duration::from_millis(200), stream.response.chunk()).await
        {
            stream.buf.extend_from_slice(&chunk);
            if stream.buf.first().is_some_and(|f| f & END_STREAM != 0) {
                if let Some(Some(Err(e))) = stream.take_message() {
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
