//! AWS's binary event stream (`application/vnd.amazon.eventstream`), as Bedrock's
//! ConverseStream sends it: bytes are buffered until a whole frame is in (its length is the
//! frame's first four bytes), which `aws-smithy-eventstream` then reads, checking both CRCs. A
//! frame that claims to be larger than any Bedrock sends, or smaller than a frame can be, is an
//! error at once rather than a wait for bytes that never come.

use aws_smithy_eventstream::frame::read_message_from;
use bytes::{Buf, Bytes, BytesMut};

/// No Bedrock event comes near this (the format allows 16 MiB).
pub const MAX_FRAME: usize = 16 * 1024 * 1024;
/// The prelude (two lengths and a CRC) and the message CRC.
const MIN_FRAME: usize = 16;

/// One decoded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// `:event-type` (`messageStart`, `contentBlockDelta`, …), or for an exception its
    /// `:exception-type` (`throttlingException`, …).
    pub kind: String,
    pub exception: bool,
    pub payload: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the upstream's event stream is corrupt: {0}")]
pub struct FrameError(pub String);

/// Buffers bytes and yields whole events.
#[derive(Default)]
pub struct Decoder {
    buf: BytesMut,
    /// Set once a frame fails: the stream cannot be read past it.
    failed: bool,
}

impl Decoder {
    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next whole event, `None` until more bytes arrive, or why the stream is unreadable.
    pub fn next_event(&mut self) -> Result<Option<Event>, FrameError> {
        if self.failed {
            return Err(FrameError("an earlier frame was corrupt".into()));
        }
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let total = (&self.buf[..4]).get_u32() as usize;
        if !(MIN_FRAME..=MAX_FRAME).contains(&total) {
            return self.fail(format!("a frame of {total} bytes"));
        }
        if self.buf.len() < total {
            return Ok(None);
        }
        let frame = self.buf.split_to(total).freeze();
        match read_message_from(frame) {
            Ok(message) => Ok(Some(event(&message))),
            Err(e) => self.fail(e.to_string()),
        }
    }

    fn fail(&mut self, why: String) -> Result<Option<Event>, FrameError> {
        self.failed = true;
        Err(FrameError(why))
    }

    /// Whether bytes of an unfinished frame are left (a stream that ends here was cut short).
    pub fn has_partial_frame(&self) -> bool {
        !self.buf.is_empty()
    }
}

fn event(message: &aws_smithy_types::event_stream::Message) -> Event {
    let header = |name: &str| {
        message
            .headers()
            .iter()
            .find(|h| h.name().as_str() == name)
            .and_then(|h| h.value().as_string().ok())
            .map(|s| s.as_str().to_string())
    };
    let exception = header(":message-type").as_deref() == Some("exception");
    let kind = if exception {
        header(":exception-type")
    } else {
        header(":event-type")
    };
    Event {
        kind: kind.unwrap_or_default(),
        exception,
        payload: message.payload().clone(),
    }
}

/// Writes one event as a frame (for tests and fakes).
pub fn encode(kind: &str, exception: bool, payload: &[u8]) -> Vec<u8> {
    use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
    let string = |v: &str| HeaderValue::String(v.to_string().into());
    let (message_type, name) = if exception {
        ("exception", ":exception-type")
    } else {
        ("event", ":event-type")
    };
    let message = Message::new(Bytes::copy_from_slice(payload))
        .add_header(Header::new(":message-type", string(message_type)))
        .add_header(Header::new(name, string(kind)))
        .add_header(Header::new(":content-type", string("application/json")));
    let mut out = Vec::new();
    let _ = aws_smithy_eventstream::frame::write_message_to(&message, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames() -> Vec<u8> {
        let mut bytes = encode("messageStart", false, br#"{"role":"assistant"}"#);
        bytes.extend(encode(
            "contentBlockDelta",
            false,
            br#"{"delta":{"text":"Hi"},"contentBlockIndex":0}"#,
        ));
        bytes.extend(encode(
            "throttlingException",
            true,
            br#"{"message":"Too many requests"}"#,
        ));
        bytes
    }

    #[test]
    fn decodes_whole_and_byte_by_byte() {
        let bytes = frames();
        for size in [bytes.len(), 1, 7] {
            let mut d = Decoder::default();
            let mut got = Vec::new();
            for piece in bytes.chunks(size) {
                d.push(piece);
                while let Some(e) = d.next_event().unwrap() {
                    got.push(e);
                }
            }
            assert!(!d.has_partial_frame());
            assert_eq!(got.len(), 3, "{size}");
            assert_eq!(
                (got[0].kind.as_str(), got[0].exception),
                ("messageStart", false)
            );
            assert_eq!(
                (got[2].kind.as_str(), got[2].exception),
                ("throttlingException", true)
            );
            assert_eq!(
                &got[1].payload[..],
                br#"{"delta":{"text":"Hi"},"contentBlockIndex":0}"#
            );
        }
    }

    #[test]
    fn a_bad_crc_or_an_impossible_length_is_an_error() {
        let mut bytes = frames();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        let mut d = Decoder::default();
        d.push(&bytes);
        let mut result = Ok(None);
        for _ in 0..3 {
            result = d.next_event();
            if result.is_err() {
                break;
            }
        }
        assert!(result.is_err(), "a flipped CRC byte is caught");
        let mut d = Decoder::default();
        d.push(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        assert!(d.next_event().is_err(), "a 4 GiB frame is refused at once");
        let mut d = Decoder::default();
        d.push(&frames()[..20]);
        assert_eq!(d.next_event(), Ok(None));
        assert!(
            d.has_partial_frame(),
            "a cut frame is noticed when the stream ends"
        );
    }
}
