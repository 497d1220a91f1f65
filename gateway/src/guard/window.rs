//! Guarding streamed text: what arrives is held back until the guards have seen enough of what
//! follows it, then released (redacted where a guard redacts). The hold is the larger of the
//! filter window and the longest text a pattern can match (plus one character, for a word
//! boundary at the end), so a match that straddles chunks is always seen whole, and a match
//! is only acted on once it can no longer grow. The result equals guarding the whole text at
//! once; a `block` match stops the stream before any of it is released.

use std::sync::Arc;

use super::detect::{redact, Detector, Found, Scan};

/// A `block` guard matched: nothing more may be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked(pub Found);

/// Bytes of already released text kept before the held part, so `\b` at its start sees the
/// character before it.
const CONTEXT: usize = 8;
/// One UTF-8 character after a match, so `\b` at its end sees what follows.
const LOOKAHEAD: usize = 4;

pub struct StreamGuard {
    detector: Arc<Detector>,
    hold: usize,
    /// Released context, then held text from `held`.
    text: String,
    held: usize,
    /// Redacting matches per guard so far.
    hits: Vec<u32>,
}

impl StreamGuard {
    /// Holds back at least `window` bytes.
    pub fn new(detector: Arc<Detector>, window: usize) -> Self {
        Self {
            hold: window.max(detector.longest + LOOKAHEAD),
            text: String::new(),
            held: 0,
            hits: vec![0; detector.guards.len()],
            detector,
        }
    }

    /// Redacting matches per guard (by index in the detector) so far.
    pub fn hits(&self) -> &[u32] {
        &self.hits
    }

    /// Takes the next piece of the stream; returns what may be sent now (often nothing).
    pub fn push(&mut self, chunk: &str) -> Result<String, Blocked> {
        self.text.push_str(chunk);
        let Some(limit) = self.text.len().checked_sub(self.hold) else {
            return Ok(String::new());
        };
        let limit = floor_char(&self.text, limit);
        if limit <= self.held {
            return Ok(String::new());
        }
        self.release(limit)
    }

    /// The end of the stream: everything still held, checked.
    pub fn finish(&mut self) -> Result<String, Blocked> {
        let end = self.text.len();
        self.release(end)
    }

    /// Acts on the matches that start before `limit` (complete by construction) and
    /// releases the text up to where the scan settled: `limit`, or the end of a match or
    /// skipped run that crosses it.
    fn release(&mut self, limit: usize) -> Result<String, Blocked> {
        let (found, upto) = match self.detector.scan(&self.text, self.held, limit) {
            Scan::Blocked(f) => return Err(Blocked(f)),
            Scan::Clean { found, settled } => (found, settled),
        };
        for f in &found {
            self.hits[f.guard] += 1;
        }
        let shifted: Vec<Found> = found
            .into_iter()
            .map(|f| Found {
                start: f.start - self.held,
                end: f.end - self.held,
                ..f
            })
            .collect();
        let out = redact(&self.text[self.held..upto], &shifted);
        self.forget(upto);
        Ok(out)
    }

    /// Drops released text but the context before `upto`.
    fn forget(&mut self, upto: usize) {
        let keep_from = floor_char(&self.text, upto.saturating_sub(CONTEXT));
        self.text.drain(..keep_from);
        self.held = upto - keep_from;
    }
}

/// The largest char boundary at or below `at`.
fn floor_char(text: &str, mut at: usize) -> usize {
    while at > 0 && !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}
