//! Connect server-stream envelopes (`application/connect+json`: a flag byte, a 4-byte
//! big-endian length, JSON), as the client SDK reads `StreamEvents` from the control plane
//! (`portcullis_client::audit`): never a panic; however the bytes are cut, the same messages
//! come out; and every event read, enveloped again, reads as the same event.
#![no_main]

use libfuzzer_sys::fuzz_target;
use portcullis_client::audit::fuzzing::read_stream;

/// One envelope, as the control plane writes it.
fn envelope(flag: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![flag];
    out.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(body);
    out
}

fuzz_target!(|input: &[u8]| {
    let Some((&cut, input)) = input.split_first() else {
        return;
    };
    let (whole, whole_left) = read_stream(input, 0);
    let (chunked, chunked_left) = read_stream(input, usize::from(cut % 32) + 1);
    let shown = |m: &[Result<_, portcullis_client::ClientError>]| {
        m.iter()
            .map(|r| r.as_ref().map_err(ToString::to_string).cloned())
            .collect::<Vec<Result<portcullis_shared::audit::AuditEventV1, String>>>()
    };
    assert_eq!(shown(&whole), shown(&chunked), "cut at {}", cut % 32 + 1);
    assert_eq!(whole_left, chunked_left);
    for event in whole.iter().flatten() {
        let body = serde_json::to_vec(&serde_json::json!({ "event": event })).unwrap_or_default();
        let mut stream = envelope(0, &body);
        stream.extend(envelope(2, b"{}"));
        let (again, left) = read_stream(&stream, 0);
        assert!(!left);
        assert_eq!(shown(&again), vec![Ok(event.clone())]);
    }
});
