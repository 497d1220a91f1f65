//! Server-sent events (`portcullis_shared::sse`), as the LLM relay and the MCP client read an
//! upstream's stream: never a panic; the events and what is left are exactly the input, each
//! event ending at its blank-line delimiter; and however the stream is cut into chunks, it
//! splits into the same events.
#![no_main]

use libfuzzer_sys::fuzz_target;
use portcullis_shared::sse::{data, Events};

/// The events of `input` fed in `chunk`-byte pieces (0: whole), and what is left at the end.
fn split(input: &[u8], chunk: usize) -> (Vec<(Vec<u8>, usize)>, Vec<u8>) {
    let mut events = Events::default();
    let mut out = Vec::new();
    let size = if chunk == 0 {
        input.len().max(1)
    } else {
        chunk
    };
    for piece in input.chunks(size) {
        events.push(piece);
        while let Ok(Some((event, len))) = events.next_event() {
            out.push((event.to_vec(), len));
        }
    }
    (out, events.rest().to_vec())
}

fuzz_target!(|input: &[u8]| {
    let Some((&cut, input)) = input.split_first() else {
        return;
    };
    let (whole, rest) = split(input, 0);
    let mut joined = Vec::new();
    for (event, len) in &whole {
        let delimiter = &event[*len..];
        assert!(
            delimiter == b"\n\n" || delimiter == b"\r\n\r\n",
            "{event:?}"
        );
        let _ = data(&event[..*len]);
        joined.extend_from_slice(event);
    }
    joined.extend_from_slice(&rest);
    assert_eq!(joined, input, "the events and the rest are the input");
    let chunked = split(input, usize::from(cut % 16) + 1);
    assert_eq!(
        chunked,
        (whole, rest),
        "cut into {}-byte chunks",
        cut % 16 + 1
    );
});
