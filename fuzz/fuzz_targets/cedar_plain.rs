//! The Cedar plain reader (`portcullis_shared::policy::plain`), which reads the control plane's
//! managed allow-list bundles without Cedar's parser: never a panic, and whatever it accepts,
//! Cedar reads as the same permits (ids, principal, actions, resource), and it validates them
//! exactly when Cedar's validator does. (The property test in `plain_tests.rs` holds the same
//! contract on generated bundles; this target explores from real ones.)
#![no_main]

use libfuzzer_sys::fuzz_target;
use portcullis_shared::policy::plain::oracle::{cedar_view, valid_in_cedar};
use portcullis_shared::policy::plain::{read, read_valid, Permit};

fuzz_target!(|text: &str| {
    let Some(ours) = read("p", text) else {
        return;
    };
    let cedar = cedar_view("p", text);
    let expected: Vec<Option<Permit>> = ours.into_iter().map(Some).collect();
    assert_eq!(cedar.ok(), Some(expected), "{text:?}");
    assert_eq!(
        read_valid("p", text).is_some(),
        valid_in_cedar("p", text),
        "{text:?}"
    );
});
