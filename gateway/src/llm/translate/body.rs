//! A request body as it is sent upstream: one buffer, or — for a pass-through — the caller's
//! own bytes in shared slices around the few values changed ([`super::pass::splice`]), so a
//! large prompt is held once while it is answered, not copied or written out again.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Frame, SizeHint};

/// Below this, a body's parts are joined into one buffer: copying a few kilobytes costs less
/// than sending many small pieces.
const JOIN_BELOW: usize = 64 * 1024;

/// The parts of a body, in order.
#[derive(Debug, Clone, Default)]
pub struct Body {
    parts: Vec<Bytes>,
    len: usize,
}

impl Body {
    /// A body of `parts`, joined into one buffer when it is small.
    pub fn of(parts: Vec<Bytes>) -> Self {
        let len = parts.iter().map(Bytes::len).sum();
        if len >= JOIN_BELOW || parts.len() <= 1 {
            return Self { parts, len };
        }
        let mut joined = BytesMut::with_capacity(len);
        for part in &parts {
            joined.extend_from_slice(part);
        }
        Self::from(joined.freeze())
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The parts, in order (shared with the caller's body where it was passed through).
    pub fn parts(&self) -> &[Bytes] {
        &self.parts
    }

    /// The body in one piece: borrowed when it is one part (what a signature covers).
    pub fn contiguous(&self) -> Cow<'_, [u8]> {
        match self.parts.as_slice() {
            [] => Cow::Borrowed(&[]),
            [one] => Cow::Borrowed(one),
            parts => Cow::Owned(parts.concat()),
        }
    }

    /// The body for the HTTP client: its exact length is known, so it goes with
    /// `Content-Length`, never chunked.
    pub fn to_request(&self) -> reqwest::Body {
        match self.parts.as_slice() {
            [] => reqwest::Body::from(Bytes::new()),
            [one] => reqwest::Body::from(one.clone()),
            parts => reqwest::Body::wrap(Parts {
                queue: parts.iter().cloned().collect(),
                remaining: self.len as u64,
            }),
        }
    }
}

impl From<Bytes> for Body {
    fn from(bytes: Bytes) -> Self {
        let len = bytes.len();
        Self {
            parts: vec![bytes],
            len,
        }
    }
}

/// The parts being sent.
struct Parts {
    queue: VecDeque<Bytes>,
    remaining: u64,
}

impl http_body::Body for Parts {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let Some(part) = self.queue.pop_front() else {
            return Poll::Ready(None);
        };
        self.remaining -= part.len() as u64;
        Poll::Ready(Some(Ok(Frame::data(part))))
    }

    fn is_end_stream(&self) -> bool {
        self.queue.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_bodies_are_joined_and_large_ones_shared() {
        let small = Body::of(vec![
            Bytes::from_static(b"{\"a\":"),
            Bytes::from_static(b"1}"),
        ]);
        assert_eq!(small.parts().len(), 1);
        assert_eq!(&*small.contiguous(), b"{\"a\":1}");
        let big = Bytes::from(vec![b'x'; JOIN_BELOW]);
        let body = Body::of(vec![Bytes::from_static(b"["), big.clone()]);
        assert_eq!(body.parts().len(), 2);
        assert_eq!(body.len(), JOIN_BELOW + 1);
        assert_eq!(body.parts()[1].as_ptr(), big.as_ptr(), "shared, not copied");
        assert_eq!(body.contiguous().len(), JOIN_BELOW + 1);
    }
}
