//! Entry points for the coverage-guided fuzz targets in `fuzz/` (outside the request path):
//! the narrowest way in to parsers that are private to the gateway. Not an API.

use bytes::Bytes;
use portcullis_shared::api::agents::ActAsMethod;
use portcullis_shared::policy::ActAs;
use portcullis_shared::prices::Usage;

use crate::actas::AgentActAs;
use crate::error::GatewayError;
use crate::llm::api::{Inbound, InboundApi};
use crate::llm::framing::Framing;
use crate::llm::translate::{Context, Translation};

/// The HMAC act-as secret of the agent [`act_as`] reads headers for.
pub const HMAC_SECRET: &str = "0123456789abcdef";

/// The identity an act-as header yields for an agent with this method (the OIDC step, which
/// needs the issuer's keys, is an error here: `oidc_token` covers the token).
pub fn act_as(
    method: Option<ActAsMethod>,
    header: Option<&[u8]>,
    now_secs: i64,
) -> Result<ActAs, GatewayError> {
    match crate::actas::identify(&agent(method), header, None, now_secs)? {
        crate::actas::Step::Done(act_as) => Ok(act_as),
        crate::actas::Step::Oidc(_) => Err(GatewayError::Internal("an OIDC step".into())),
    }
}

/// A snapshot whose one agent, `a`, may hold agent tokens signed by the Ed25519 key `k1`
/// (public half 32 bytes of 7, whose private half nobody has).
pub fn agent_token_snapshot() -> crate::snapshot::Compiled {
    use base64::Engine;
    let x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([7u8; 32]);
    let snap: Result<portcullis_shared::snapshot::Snapshot, _> =
        serde_json::from_value(serde_json::json!({
            "workspace_id": "w", "revision": 1, "deployment_id": "d",
            "public_url": "http://gw", "generated_at": "", "models": [], "pools": [],
            "bundles": [],
            "gateways": [{"gateway_id": "g", "name": "default", "state": "active",
                "is_default": true, "all_agents": true, "agent_ids": [], "model_ids": [],
                "pool_ids": []}],
            "agents": [{"agent_id": "a", "name": "bot", "status": "active",
                "parent_id": null, "key_hashes": [], "token_ttl_secs": 600,
                "actas_method": null, "actas_required": false,
                "actas_provider_id": null, "actas_oidc_url": null,
                "actas_hmac_secret": null}],
            "token_keys": [{"kid": "k1", "x": x}]
        }));
    snap.map_err(|e| e.to_string())
        .and_then(|s| {
            crate::snapshot::compile(&s, &crate::snapshot::Runtime::default())
                .map_err(|e| format!("{e:?}"))
        })
        .unwrap_or_else(|e| unreachable_fixture(&e))
}

#[allow(clippy::panic)] // a constant fixture; the fuzz target and unit tests rely on it
fn unreachable_fixture(e: &str) -> crate::snapshot::Compiled {
    panic!("the agent-token fixture does not compile: {e}")
}

/// The act-as settings of an agent `a` with this method and [`HMAC_SECRET`].
pub fn agent(method: Option<ActAsMethod>) -> AgentActAs {
    AgentActAs {
        id: "a".into(),
        name: "a".into(),
        method,
        required: false,
        hmac_secret: Some(HMAC_SECRET.into()),
        oidc: None,
        oidc_memory: Default::default(),
    }
}

/// What a streamed reply became: the caller's events, the metered usage, and whether the
/// upstream's framing was found corrupt.
pub struct Fed {
    pub events: Vec<Bytes>,
    pub usage: Option<Usage>,
    pub corrupt: bool,
}

/// Feeds an upstream's stream, cut into `chunk`-byte pieces (0: whole), through the framing
/// and the stream translator of `translation`, as the relay does.
pub fn translate_stream(
    input: &[u8],
    chunk: usize,
    api: InboundApi,
    translation: Translation,
    ctx: &Context<'_>,
) -> Result<Fed, GatewayError> {
    let body: &[u8] = match api {
        InboundApi::OpenAiChat => {
            br#"{"model":"m","stream":true,"messages":[],"stream_options":{"include_usage":true}}"#
        }
        InboundApi::AnthropicMessages => {
            br#"{"model":"m","stream":true,"max_tokens":1,"messages":[]}"#
        }
    };
    let inbound = Inbound::parse(api, Bytes::from_static(body), &http::HeaderMap::new())?;
    let mut stream = translation.stream(&inbound, ctx);
    let mut framing = Framing::of(translation);
    let mut events = Vec::new();
    let size = if chunk == 0 {
        input.len().max(1)
    } else {
        chunk
    };
    let mut corrupt = false;
    'pieces: for piece in input.chunks(size) {
        framing.push(piece);
        loop {
            match framing.next_event() {
                Ok(Some(event)) => stream.push(event, &mut events),
                Ok(None) => break,
                Err(_) => {
                    corrupt = true;
                    break 'pieces;
                }
            }
        }
    }
    if !corrupt {
        match framing.rest() {
            Ok(Some(rest)) => stream.push(rest, &mut events),
            Ok(None) => {}
            Err(_) => corrupt = true,
        }
    }
    stream.finish(&mut events);
    Ok(Fed {
        events,
        usage: stream.usage(),
        corrupt,
    })
}
