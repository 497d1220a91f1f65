//! Arbitrary bytes, cut anywhere, fed to every stream translator (and the whole-reply
//! translators): an error at worst, never a panic.

use proptest::prelude::*;

use super::golden::{feed, CONTEXT_ANTHROPIC};
use super::Translation;
use crate::llm::api::InboundApi;

const ROUTES: [(InboundApi, Translation); 5] = [
    (InboundApi::OpenAiChat, Translation::OpenAiPassThrough),
    (InboundApi::OpenAiChat, Translation::AnthropicFromOpenAi),
    (
        InboundApi::AnthropicMessages,
        Translation::AnthropicPassThrough,
    ),
    (
        InboundApi::AnthropicMessages,
        Translation::OpenAiFromAnthropic,
    ),
    (InboundApi::OpenAiChat, Translation::Custom),
];

/// Bytes that look like an event stream often enough to reach the translators' states.
fn streamish() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"data: ".to_vec()),
        Just(b"event: content_block_delta\n".to_vec()),
        Just(b"\n\n".to_vec()),
        Just(b"data: [DONE]\n\n".to_vec()),
        Just(br#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":1}}}"#.to_vec()),
        Just(br#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f"}}"#.to_vec()),
        Just(br#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}"#.to_vec()),
        Just(br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"function":{"arguments":"x"}}]}}]}"#.to_vec()),
        Just(br#"{"choices":[],"usage":{"prompt_tokens":18446744073709551615}}"#.to_vec()),
        Just(br#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":1},"thoughtSignature":"s"},{"text":"t","thought":true}]},"finishReason":"STOP"}],"usageMetadata":{"thoughtsTokenCount":18446744073709551615,"candidatesTokenCount":9}}"#.to_vec()),
        proptest::collection::vec(any::<u8>(), 0..40),
    ];
    proptest::collection::vec(piece, 0..24).prop_map(|p| p.concat())
}

/// AWS event-stream frames, whole, cut, with flipped bytes or garbage lengths.
fn framed() -> impl Strategy<Value = Vec<u8>> {
    let kinds = prop_oneof![
        Just(("messageStart", false, r#"{"role":"assistant"}"#)),
        Just((
            "contentBlockStart",
            false,
            r#"{"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"t","name":"f"}}}"#
        )),
        Just((
            "contentBlockDelta",
            false,
            r#"{"contentBlockIndex":1,"delta":{"toolUse":{"input":"{"}}}"#
        )),
        Just((
            "contentBlockDelta",
            false,
            r#"{"contentBlockIndex":0,"delta":{"reasoningContent":{"redactedContent":"x"}}}"#
        )),
        Just(("messageStop", false, r#"{"stopReason":"tool_use"}"#)),
        Just(("metadata", false, r#"{"usage":{"inputTokens":1}}"#)),
        Just(("throttlingException", true, r#"{"message":"slow down"}"#)),
        Just(("contentBlockDelta", false, "not json")),
    ];
    let frame = (kinds, any::<u16>(), any::<u8>()).prop_map(|((k, e, p), at, flip)| {
        let mut f = crate::llm::wire::eventstream::encode(k, e, p.as_bytes());
        if flip % 4 == 0 && !f.is_empty() {
            let i = usize::from(at) % f.len();
            f[i] ^= flip | 1;
        }
        if flip % 7 == 0 {
            f.truncate(usize::from(at) % (f.len() + 1));
        }
        f
    });
    proptest::collection::vec(frame, 0..12).prop_map(|f| f.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn stream_translators_never_panic(input in streamish(), cut in 1usize..64) {
        for (api, translation) in ROUTES {
            let _ = feed(&input, cut, api, translation, &CONTEXT_ANTHROPIC);
        }
    }

    #[test]
    fn the_event_stream_decoder_and_bedrock_translator_never_panic_or_hang(input in framed(), cut in 1usize..64) {
        for api in [InboundApi::OpenAiChat, InboundApi::AnthropicMessages] {
            let translation = Translation::of(api, super::Dialect::Bedrock);
            let _ = feed(&input, cut, api, translation, &CONTEXT_ANTHROPIC);
        }
    }

    #[test]
    fn whole_reply_translators_never_panic(input in proptest::collection::vec(any::<u8>(), 0..512)) {
        for (_, translation) in ROUTES {
            let _ = translation.response(bytes::Bytes::from(input.clone()), &CONTEXT_ANTHROPIC);
        }
    }
}
