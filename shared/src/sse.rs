//! Server-sent events, split as they arrive: the LLM relay forwards them one by one and the
//! MCP client reads JSON-RPC messages out of them. Each byte is searched for a delimiter once,
//! however the stream is cut into chunks, and an event may be at most [`MAX_EVENT_BYTES`]:
//! an upstream that sends more without ending its event is an error, not a growing buffer.

use bytes::BytesMut;

/// The largest event buffered (the gateway's largest request body; no model delta or MCP
/// message comes near it).
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// An event longer than the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the upstream sent an event of more than {0} bytes")]
pub struct EventTooLarge(pub usize);

/// Buffers a byte stream and yields whole events.
pub struct Events {
    buf: BytesMut,
    /// How much of `buf` holds no delimiter start that could still complete.
    searched: usize,
    max: usize,
}

impl Default for Events {
    fn default() -> Self {
        Self::with_max(MAX_EVENT_BYTES)
    }
}

impl Events {
    /// Events of at most `max` bytes.
    pub fn with_max(max: usize) -> Self {
        Self {
            buf: BytesMut::new(),
            searched: 0,
            max,
        }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next complete event: its raw bytes (delimiter included) and the length of its
    /// content (without the delimiter); `None` until one is complete.
    pub fn next_event(&mut self) -> Result<Option<(BytesMut, usize)>, EventTooLarge> {
        match self.event_end() {
            Some((end, _)) if end > self.max => Err(EventTooLarge(self.max)),
            Some((end, delim)) => {
                self.searched = 0;
                Ok(Some((self.buf.split_to(end + delim), end)))
            }
            // Up to three bytes of an unfinished delimiter may follow an event of `max`.
            None if self.buf.len() > self.max.saturating_add(3) => Err(EventTooLarge(self.max)),
            None => Ok(None),
        }
    }

    /// Whatever is left (an unterminated last event).
    pub fn rest(&mut self) -> BytesMut {
        self.searched = 0;
        self.buf.split()
    }

    /// Where the first complete event ends: (end of event, length of its blank-line
    /// delimiter, `\n\n` or `\r\n\r\n`), searching only what was not searched before.
    fn event_end(&mut self) -> Option<(usize, usize)> {
        let buf = &self.buf[..];
        // A delimiter may have begun up to three bytes before the end of the last search.
        let from = self.searched.saturating_sub(3);
        for at in memchr::memchr_iter(b'\n', &buf[from..]).map(|i| from + i) {
            match (buf.get(at + 1), buf.get(at + 2)) {
                (Some(b'\n'), _) => return Some((at, 2)),
                (Some(b'\r'), Some(b'\n')) if at > 0 && buf[at - 1] == b'\r' => {
                    return Some((at - 1, 4))
                }
                _ => {}
            }
        }
        self.searched = buf.len();
        None
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
    use proptest::prelude::*;

    #[test]
    fn splits_lf_and_crlf_events_and_keeps_the_rest() {
        let mut e = Events::default();
        e.push(b"event: message\ndata: {\"a\":1}\n\ndata: 2\r\n\r\ndata: 3");
        let (first, len) = e.next_event().unwrap().unwrap();
        assert_eq!(data(&first[..len]), "{\"a\":1}");
        let (second, len) = e.next_event().unwrap().unwrap();
        assert_eq!(data(&second[..len]), "2");
        assert!(e.next_event().unwrap().is_none());
        assert_eq!(&e.rest()[..], b"data: 3");
    }

    #[test]
    fn joins_multi_line_data() {
        assert_eq!(data(b"data: a\ndata: b"), "a\nb");
    }

    #[test]
    fn an_event_past_the_bound_is_an_error_whether_or_not_it_ended() {
        let mut open = Events::with_max(64);
        open.push(&[b'x'; 60]);
        assert_eq!(open.next_event(), Ok(None));
        open.push(&[b'x'; 10]);
        assert_eq!(open.next_event(), Err(EventTooLarge(64)));
        let mut whole = Events::with_max(64);
        whole.push(&[b'x'; 100]);
        whole.push(b"\n\n");
        assert_eq!(whole.next_event(), Err(EventTooLarge(64)));
        // An event of exactly the bound passes however its delimiter is cut.
        let mut exact = Events::with_max(64);
        exact.push(&[b'x'; 64]);
        exact.push(b"\r\n\r");
        assert_eq!(exact.next_event(), Ok(None));
        exact.push(b"\n");
        assert_eq!(exact.next_event().unwrap().unwrap().1, 64);
    }

    /// What the events of `input` are when it arrives whole: the delimiter that starts first.
    fn whole(input: &[u8]) -> (Vec<Vec<u8>>, Vec<u8>) {
        let mut out = Vec::new();
        let mut rest = input;
        loop {
            let lf = rest.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
            let crlf = rest
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .map(|i| (i, 4));
            let found = match (lf, crlf) {
                (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
                (a, b) => a.or(b),
            };
            let Some((end, delim)) = found else {
                return (out, rest.to_vec());
            };
            out.push(rest[..end + delim].to_vec());
            rest = &rest[end + delim..];
        }
    }

    proptest! {
        /// However a stream is cut, it splits as it would whole.
        #[test]
        fn chunking_never_changes_the_events(
            parts in proptest::collection::vec(
                prop_oneof![Just(b"\n".to_vec()), Just(b"\r".to_vec()), Just(b"\r\n".to_vec()),
                    Just(b"data: x".to_vec()), Just(b"\n\n".to_vec()), Just(b"\r\n\r\n".to_vec())],
                0..40),
            cuts in proptest::collection::vec(1usize..7, 1..20),
        ) {
            let input: Vec<u8> = parts.concat();
            let mut events = Events::default();
            let mut got = Vec::new();
            let (mut at, mut i) = (0, 0);
            while at < input.len() {
                let n = cuts[i % cuts.len()].min(input.len() - at);
                events.push(&input[at..at + n]);
                at += n;
                i += 1;
                while let Some((e, _)) = events.next_event().unwrap() {
                    got.push(e.to_vec());
                }
            }
            let (expected, rest) = whole(&input);
            prop_assert_eq!(got, expected);
            prop_assert_eq!(events.rest().to_vec(), rest);
        }
    }
}
