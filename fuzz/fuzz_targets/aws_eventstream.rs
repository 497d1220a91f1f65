//! AWS's binary event stream as Bedrock's ConverseStream sends it
//! (`portcullis_gateway::llm::wire::eventstream`): never a panic; however the bytes are cut,
//! the same events come out and the same corruption is found; and every event read writes
//! back to a frame that reads as the same event.
#![no_main]

use libfuzzer_sys::fuzz_target;
use portcullis_gateway::llm::wire::eventstream::{encode, Decoder, Event};

/// The events of `input` in `chunk`-byte pieces (0: whole); whether a frame was corrupt; and
/// whether an unfinished frame is left.
fn decode(input: &[u8], chunk: usize) -> (Vec<Event>, bool, bool) {
    let mut decoder = Decoder::default();
    let mut events = Vec::new();
    let size = if chunk == 0 {
        input.len().max(1)
    } else {
        chunk
    };
    for piece in input.chunks(size) {
        decoder.push(piece);
        loop {
            match decoder.next_event() {
                Ok(Some(event)) => events.push(event),
                Ok(None) => break,
                Err(_) => {
                    assert!(
                        decoder.next_event().is_err(),
                        "a corrupt stream stays corrupt"
                    );
                    return (events, true, decoder.has_partial_frame());
                }
            }
        }
    }
    (events, false, decoder.has_partial_frame())
}

fuzz_target!(|input: &[u8]| {
    let Some((&cut, input)) = input.split_first() else {
        return;
    };
    let whole = decode(input, 0);
    let chunked = decode(input, usize::from(cut) + 1);
    let cut = usize::from(cut) + 1;
    assert_eq!(whole.0, chunked.0, "the events, cut into {cut}-byte chunks");
    assert_eq!(whole.1, chunked.1, "corruption, cut into {cut}-byte chunks");
    // Past a corrupt frame, what is left depends on how much had arrived.
    if !whole.1 {
        assert_eq!(
            whole.2, chunked.2,
            "an unfinished frame, cut into {cut}-byte chunks"
        );
    }
    for event in &whole.0 {
        let frame = encode(&event.kind, event.exception, &event.payload);
        let (again, corrupt, partial) = decode(&frame, 0);
        assert!(!corrupt && !partial);
        assert_eq!(again.as_slice(), std::slice::from_ref(event));
    }
});
