//! Server-sent events, split as they arrive: the LLM relay forwards them one by one and the
//! MCP client reads JSON-RPC messages out of them.

use bytes::BytesMut;

/// Where the first complete event ends: (end of event, length of the blank-line delimiter).
fn event_end(buf: &[u8]) -> Option<(usize, usize)> {
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    let crlf = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// Buffers a byte stream and yields whole events.
#[derive(Default)]
pub struct Events {
    buf: BytesMut,
}

impl Events {
    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next complete event: its raw bytes (delimiter included) and the length of its
    /// content (without the delimiter).
    pub fn next_event(&mut self) -> Option<(BytesMut, usize)> {
        let (end, delim) = event_end(&self.buf)?;
        Some((self.buf.split_to(end + delim), end))
    }

    /// Whatever is left (an unterminated last event).
    pub fn rest(&mut self) -> BytesMut {
        self.buf.split()
    }
}

/// The `data:` lines of an event, joined with newlines.
pub fn data(event: &[u8]) -> String {
    String::from_utf8_lossy(event)
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| d.strip_prefix(' ').unwrap_or(d))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_lf_and_crlf_events_and_keeps_the_rest() {
        let mut e = Events::default();
        e.push(b"event: message\ndata: {\"a\":1}\n\ndata: 2\r\n\r\ndata: 3");
        let (first, len) = e.next_event().unwrap();
        assert_eq!(data(&first[..len]), "{\"a\":1}");
        let (second, len) = e.next_event().unwrap();
        assert_eq!(data(&second[..len]), "2");
        assert!(e.next_event().is_none());
        assert_eq!(&e.rest()[..], b"data: 3");
    }

    #[test]
    fn joins_multi_line_data() {
        assert_eq!(data(b"data: a\ndata: b"), "a\nb");
    }
}
