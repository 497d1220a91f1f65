//! The on-disk spool: JSON lines in numbered segment files (`audit/<seq>.jsonl`) and a cursor
//! (`audit/cursor.json`, the segment and byte offset shipped up to). Each process writes to a
//! fresh segment, and a write that failed partway closes its segment, so a line cut short by a
//! crash or a failed write never has a successor in its file: the lines of this process's
//! segments are whole, as serialized, and only an earlier process's need checking. The spool
//! is bounded: past `max_bytes` the oldest segment is deleted and its unshipped events counted
//! as dropped.
//!
//! While events flow, the cursor file is rewritten at most once every [`SAVE_EVERY`], and
//! whenever the shipper runs out of events or stops: after a crash, up to that much already
//! shipped is shipped again, which the control plane stores once (ingest is idempotent by
//! event id), and its charges count twice in the counters seeded at start (stricter, never
//! looser).

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

/// A segment is closed and a new one started past this size (or a tenth of the bound).
const SEGMENT_BYTES: u64 = 4 * 1024 * 1024;
/// How much of a segment one batch read looks at.
const READ_WINDOW: u64 = 256 * 1024;
/// How often the cursor file is rewritten while batches are acknowledged back to back.
const SAVE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub seq: u64,
    pub offset: u64,
}

struct State {
    /// Segment number → bytes written to it.
    segments: BTreeMap<u64, u64>,
    /// The segment this process appends to.
    current: u64,
    /// The first segment this process wrote: earlier ones are an earlier process's.
    first_own: u64,
    /// A write failed partway: the next one starts a new segment.
    torn: bool,
    file: Option<File>,
    cursor: Cursor,
    /// The cursor in the file, and when it was written there.
    saved: Cursor,
    saved_at: Option<std::time::Instant>,
}

struct Inner {
    dir: PathBuf,
    max_bytes: u64,
    segment_bytes: u64,
    state: Mutex<State>,
}

#[derive(Clone)]
pub struct Spool(Arc<Inner>);

/// Events read for shipping, as raw JSON lines, and where the cursor goes once they are sent.
pub struct Batch {
    /// What was read of the segment; the lines are ranges of it.
    data: Vec<u8>,
    lines: Vec<std::ops::Range<usize>>,
    /// Where the lines start; [`Spool::advance`] takes it back.
    pub from: Cursor,
    pub next: Cursor,
    /// The lines are this process's, each an event as serialized: they need no check.
    pub own: bool,
}

impl Batch {
    fn empty(at: Cursor) -> Self {
        Self {
            data: Vec::new(),
            lines: Vec::new(),
            from: at,
            next: at,
            own: false,
        }
    }

    /// The lines, without their line ends.
    pub fn lines(&self) -> impl Iterator<Item = &[u8]> {
        self.lines.iter().map(|r| &self.data[r.clone()])
    }

    pub fn len(&self) -> usize {
        self.lines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }
}

fn segment_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("{seq:012}.jsonl"))
}

/// The events a segment still holds from `from` on. An `audit.dropped` line stands for the
/// events it reported, so deleting it carries its count over rather than losing it.
fn lost_events(path: &Path, from: u64) -> u64 {
    #[derive(Deserialize)]
    struct Line {
        #[serde(rename = "type")]
        event_type: String,
        #[serde(default)]
        payload: serde_json::Value,
    }
    let mut data = Vec::new();
    let read = File::open(path).and_then(|mut f| {
        f.seek(SeekFrom::Start(from))?;
        f.read_to_end(&mut data)
    });
    if read.is_err() {
        return 0;
    }
    data.split(|b| *b == b'\n')
        .filter(|l| !l.trim_ascii().is_empty())
        .map(|l| match serde_json::from_slice::<Line>(l) {
            Ok(line) if line.event_type == portcullis_shared::audit::types::AUDIT_DROPPED => {
                line.payload["dropped"].as_u64().unwrap_or(0)
            }
            _ => 1,
        })
        .sum()
}

impl Spool {
    /// Opens (or creates) the spool in `dir` and starts this process's segment.
    pub fn open(dir: &Path, max_bytes: u64) -> std::io::Result<Self> {
        fs::create_dir_all(dir)?;
        let mut segments = BTreeMap::new();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(seq) = name
                .to_str()
                .and_then(|n| n.strip_suffix(".jsonl"))
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            segments.insert(seq, entry.metadata()?.len());
        }
        let saved: Option<Cursor> = fs::read(dir.join("cursor.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let current = segments.keys().next_back().map_or(1, |s| s + 1);
        let cursor = match saved {
            Some(c) if segments.contains_key(&c.seq) => c,
            // The cursor's segment is gone (fully shipped or dropped): start at the next one.
            Some(c) => Cursor {
                seq: segments.range(c.seq..).next().map_or(current, |(s, _)| *s),
                offset: 0,
            },
            None => Cursor {
                seq: segments.keys().next().copied().unwrap_or(current),
                offset: 0,
            },
        };
        segments.insert(current, 0);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(segment_path(dir, current))?;
        let segment_bytes = SEGMENT_BYTES.min((max_bytes / 10).max(4096));
        Ok(Spool(Arc::new(Inner {
            dir: dir.to_path_buf(),
            max_bytes,
            segment_bytes,
            state: Mutex::new(State {
                segments,
                current,
                first_own: current,
                torn: false,
                file: Some(file),
                cursor,
                saved: cursor,
                saved_at: None,
            }),
        })))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends whole lines; returns how many unshipped events the bound pushed out.
    pub fn append(&self, lines: &[u8]) -> std::io::Result<u64> {
        let inner = &self.0;
        let mut st = self.state();
        let size = st.segments.get(&st.current).copied().unwrap_or(0);
        if st.torn || (size > 0 && size + lines.len() as u64 > inner.segment_bytes) {
            self.start_segment(&mut st)?;
        }
        let current = st.current;
        let Some(file) = st.file.as_mut() else {
            return Err(std::io::Error::other("the spool is closed"));
        };
        if let Err(e) = file.write_all(lines) {
            // Part of `lines` may be in the file, past the size recorded for it: nothing is
            // appended after it, and reads stop at the recorded size.
            st.torn = true;
            return Err(e);
        }
        *st.segments.entry(current).or_insert(0) += lines.len() as u64;
        Ok(self.enforce_bound(&mut st))
    }

    /// Closes the current segment (its data made durable) and appends to the next from now on.
    fn start_segment(&self, st: &mut State) -> std::io::Result<()> {
        let next = st.current + 1;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(segment_path(&self.0.dir, next))?;
        if let Some(closed) = st.file.replace(file) {
            let _ = closed.sync_data();
        }
        st.current = next;
        st.segments.insert(next, 0);
        st.torn = false;
        Ok(())
    }

    /// Deletes the oldest segments while the spool is over its bound.
    fn enforce_bound(&self, st: &mut State) -> u64 {
        let mut dropped = 0;
        while st.segments.values().sum::<u64>() > self.0.max_bytes && st.segments.len() > 1 {
            let Some((&oldest, _)) = st.segments.iter().next() else {
                break;
            };
            if oldest == st.current {
                break;
            }
            let path = segment_path(&self.0.dir, oldest);
            if oldest >= st.cursor.seq {
                let from = if oldest == st.cursor.seq {
                    st.cursor.offset
                } else {
                    0
                };
                dropped += lost_events(&path, from);
            }
            let _ = fs::remove_file(&path);
            st.segments.remove(&oldest);
            if st.cursor.seq <= oldest {
                st.cursor = Cursor {
                    seq: st.segments.keys().next().copied().unwrap_or(st.current),
                    offset: 0,
                };
            }
        }
        dropped
    }

    /// Makes written events durable (on rotation they already are).
    pub fn sync(&self) {
        if let Some(f) = self.state().file.as_ref() {
            let _ = f.sync_data();
        }
    }

    /// Up to `max` complete lines from the cursor on, skipping segments that are used up.
    pub fn read_batch(&self, max: usize) -> std::io::Result<Batch> {
        loop {
            let (cursor, current, first_own, size) = {
                let st = self.state();
                let size = st.segments.get(&st.cursor.seq).copied();
                (st.cursor, st.current, st.first_own, size)
            };
            let Some(size) = size else {
                // Its segment was dropped under us; the bound moved the cursor already.
                return Ok(Batch::empty(cursor));
            };
            let path = segment_path(&self.0.dir, cursor.seq);
            let mut batch = Batch::empty(cursor);
            let mut consumed = 0u64;
            let mut window = READ_WINDOW.min(size.saturating_sub(cursor.offset));
            while batch.is_empty() && cursor.offset + consumed < size {
                batch.data = Vec::with_capacity(usize::try_from(window).unwrap_or(usize::MAX));
                let mut f = File::open(&path)?;
                f.seek(SeekFrom::Start(cursor.offset))?;
                f.take(window).read_to_end(&mut batch.data)?;
                let mut start = 0;
                for end in memchr::memchr_iter(b'\n', &batch.data) {
                    // A batch is bounded by bytes too: a line longer than a window (which
                    // only an older version wrote) ships alone.
                    if batch.lines.len() == max || start as u64 >= READ_WINDOW {
                        break;
                    }
                    let body = trimmed(start, &batch.data[start..end]);
                    if !body.is_empty() {
                        batch.lines.push(body);
                    }
                    start = end + 1;
                }
                consumed = start as u64;
                if batch.is_empty() && (batch.data.len() as u64) < window {
                    break; // only an incomplete line is left
                }
                if batch.is_empty() {
                    window = window.saturating_mul(4);
                }
            }
            batch.next = Cursor {
                seq: cursor.seq,
                offset: cursor.offset + consumed,
            };
            batch.own = cursor.seq >= first_own;
            if !batch.is_empty() || cursor.seq == current {
                return Ok(batch);
            }
            // A closed segment with nothing complete left: move on to the next one.
            let mut st = self.state();
            if st.cursor == cursor {
                let after = st
                    .segments
                    .range(cursor.seq + 1..)
                    .next()
                    .map_or(current, |(s, _)| *s);
                st.cursor = Cursor {
                    seq: after,
                    offset: 0,
                };
                st.segments.remove(&cursor.seq);
                let _ = fs::remove_file(&path);
                self.save(&mut st);
            }
        }
    }

    /// Records that everything before `next` was acknowledged.
    pub fn advance(&self, from: Cursor, next: Cursor) {
        let mut st = self.state();
        // The bound may have moved the cursor past this batch meanwhile.
        if st.cursor != from {
            return;
        }
        st.cursor = next;
        if st.saved_at.is_none_or(|at| at.elapsed() >= SAVE_EVERY) {
            self.save(&mut st);
        }
    }

    /// Writes the cursor to its file, unless the file holds it already.
    pub fn save_cursor(&self) {
        let mut st = self.state();
        if st.cursor != st.saved {
            self.save(&mut st);
        }
    }

    fn save(&self, st: &mut State) {
        persist(&self.0.dir, st.cursor);
        st.saved = st.cursor;
        st.saved_at = Some(std::time::Instant::now());
    }

    /// Bytes of events not yet shipped (approximately: whole segments after the cursor's).
    pub fn pending_bytes(&self) -> u64 {
        let st = self.state();
        st.segments
            .range(st.cursor.seq..)
            .map(|(_, b)| *b)
            .sum::<u64>()
            .saturating_sub(st.cursor.offset)
    }

    /// Every complete line not shipped yet (for reading what they hold at start-up).
    pub fn unshipped(&self) -> Vec<Vec<u8>> {
        let (cursor, segments): (Cursor, Vec<u64>) = {
            let st = self.state();
            (
                st.cursor,
                st.segments
                    .range(st.cursor.seq..)
                    .map(|(s, _)| *s)
                    .collect(),
            )
        };
        let mut out = Vec::new();
        for seq in segments {
            let mut data = Vec::new();
            let from = if seq == cursor.seq { cursor.offset } else { 0 };
            let read = File::open(segment_path(&self.0.dir, seq)).and_then(|mut f| {
                f.seek(SeekFrom::Start(from))?;
                f.read_to_end(&mut data)
            });
            if read.is_err() {
                continue;
            }
            for line in data.split_inclusive(|b| *b == b'\n') {
                if line.last() == Some(&b'\n') {
                    out.push(line.trim_ascii().to_vec());
                }
            }
        }
        out
    }

    pub fn cursor(&self) -> Cursor {
        self.state().cursor
    }

    /// Leaves `partial` in the current segment past its recorded size, as a write that failed
    /// partway does, and makes the next write fail.
    #[cfg(test)]
    fn fail_next_write_after(&self, partial: &[u8]) {
        let mut st = self.state();
        let path = segment_path(&self.0.dir, st.current);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(partial).unwrap();
        st.file = Some(File::open(&path).unwrap());
    }
}

/// Where `line`, found at `start`, lies once trimmed of white space.
fn trimmed(start: usize, line: &[u8]) -> std::ops::Range<usize> {
    let rest = line.trim_ascii_start();
    let from = start + line.len() - rest.len();
    from..from + rest.trim_ascii_end().len()
}

fn persist(dir: &Path, cursor: Cursor) {
    let tmp = dir.join("cursor.json.tmp");
    let write = serde_json::to_vec(&cursor)
        .map_err(std::io::Error::other)
        .and_then(|b| fs::write(&tmp, b))
        .and_then(|()| fs::rename(&tmp, dir.join("cursor.json")));
    if let Err(e) = write {
        tracing::warn!(error = %e, "Could not save the audit spool cursor; events may be re-sent (harmlessly).");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(i: usize) -> Vec<u8> {
        format!("{{\"n\":{i}}}\n").into_bytes()
    }

    /// A spool in `dir` holding the events `range`.
    fn spool_with(dir: &Path, range: std::ops::Range<usize>) -> Spool {
        let spool = Spool::open(dir, 1 << 30).unwrap();
        for i in range {
            spool.append(&line(i)).unwrap();
        }
        spool
    }

    fn drain(spool: &Spool) -> Vec<Vec<u8>> {
        let mut all = Vec::new();
        loop {
            let b = spool.read_batch(7).unwrap();
            if b.is_empty() {
                return all;
            }
            all.extend(b.lines().map(<[u8]>::to_vec));
            spool.advance(b.from, b.next);
        }
    }

    #[test]
    fn ships_everything_once_across_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let spool = spool_with(dir.path(), 0..10);
        let first = spool.read_batch(4).unwrap();
        assert_eq!(first.len(), 4);
        spool.advance(first.from, first.next);
        drop(spool);
        // A partial line left by a crash is skipped, not shipped.
        let mut old = OpenOptions::new()
            .append(true)
            .open(segment_path(dir.path(), 1))
            .unwrap();
        old.write_all(b"{\"n\":").unwrap();
        let spool = spool_with(dir.path(), 10..15);
        let rest = drain(&spool);
        let expected: Vec<Vec<u8>> = (4..15)
            .map(|i| line(i)[..line(i).len() - 1].to_vec())
            .collect();
        assert_eq!(rest, expected);
        assert_eq!(spool.pending_bytes(), 0);
    }

    #[test]
    fn the_cursor_file_is_written_at_most_once_a_second_until_saved() {
        let dir = tempfile::tempdir().unwrap();
        let spool = spool_with(dir.path(), 0..6);
        let first = spool.read_batch(2).unwrap();
        spool.advance(first.from, first.next);
        let second = spool.read_batch(2).unwrap();
        spool.advance(second.from, second.next);
        let saved = || -> Cursor {
            serde_json::from_slice(&fs::read(dir.path().join("cursor.json")).unwrap()).unwrap()
        };
        assert_eq!(
            saved(),
            first.next,
            "the second batch came within the second"
        );
        // A crash now ships the second batch again.
        let reopened = Spool::open(dir.path(), 1 << 30).unwrap();
        assert_eq!(reopened.read_batch(10).unwrap().len(), 4);
        drop(reopened);
        spool.save_cursor();
        assert_eq!(saved(), second.next);
    }

    #[test]
    fn a_write_that_failed_partway_is_never_followed_in_its_segment() {
        let dir = tempfile::tempdir().unwrap();
        let spool = spool_with(dir.path(), 0..3);
        spool.fail_next_write_after(b"{\"n\":3}\n{\"n\":");
        assert!(spool.append(&line(3)).is_err());
        for i in 4..6 {
            spool.append(&line(i)).unwrap();
        }
        assert!(
            segment_path(dir.path(), 2).exists(),
            "the next write starts a new segment"
        );
        let shipped = drain(&spool);
        let expected: Vec<Vec<u8>> = [0, 1, 2, 4, 5]
            .iter()
            .map(|&i| line(i)[..line(i).len() - 1].to_vec())
            .collect();
        assert_eq!(shipped, expected, "what the failed write left is not read");
        assert_eq!(spool.pending_bytes(), 0);
    }

    #[test]
    fn an_incomplete_tail_waits_and_a_full_spool_drops_the_oldest() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::open(dir.path(), 1 << 30).unwrap();
        spool.append(b"{\"n\":1}\n{\"n\":").unwrap();
        assert_eq!(spool.read_batch(10).unwrap().len(), 1);
        let dir = tempfile::tempdir().unwrap();
        // Segments of 4 KiB, bound 40 KiB: writing 100 KiB drops roughly 60 KiB of events.
        let spool = Spool::open(dir.path(), 40 * 1024).unwrap();
        let mut dropped = 0;
        let big = format!("{{\"pad\":\"{}\"}}\n", "x".repeat(1000));
        for _ in 0..100 {
            dropped += spool.append(big.as_bytes()).unwrap();
        }
        let kept = drain(&spool).len() as u64;
        assert_eq!(kept + dropped, 100);
        assert!(dropped > 50, "dropped {dropped}");
    }
}
