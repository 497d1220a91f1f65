//! What a gateway request carries through its steps once it is authenticated.

use std::sync::OnceLock;

use cedar_policy::Context;
use portcullis_shared::policy::RequestContext;

use crate::audit::Origin;
use crate::snapshot::{AgentEntry, Compiled, GatewayEntry};

/// A UUIDv4 from the thread's seeded generator, for request and event ids: no system call
/// per id, where `Uuid::new_v4` asks the OS each time.
pub fn random_uuid() -> String {
    use rand::Rng;
    let bytes: [u8; 16] = rand::thread_rng().gen();
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string()
}

pub struct RequestCtx<'a> {
    pub request_id: &'a str,
    pub snap: &'a Compiled,
    pub agent: &'a AgentEntry,
    pub gateway: &'a GatewayEntry,
    pub context: LazyContext,
    /// Whether tool decisions may be memoized (no act-as identity on this request).
    pub memoize: bool,
    /// Surface, route, client and correlation ids, for audit (the activity id is echoed back).
    pub origin: Origin,
    /// The verified `X-Svc-Act-As` assertion as sent, for tools that forward it.
    pub act_as_raw: Option<String>,
}

impl<'a> RequestCtx<'a> {
    /// Headers every response of this request carries: the member that served and the
    /// caller's activity id.
    pub fn echo_headers<'b>(&'b self, model: &'b str) -> Vec<(&'static str, &'b str)> {
        let mut out = Vec::with_capacity(2);
        if !model.is_empty() {
            out.push(("x-portcullis-model", model));
        }
        if let Some(a) = &self.origin.activity_id {
            out.push(("x-svc-activity-id", a.as_str()));
        }
        out
    }
}

/// The Cedar context of a request, built only when a decision is not memoized.
pub struct LazyContext {
    typed: RequestContext,
    built: OnceLock<Result<Context, String>>,
}

impl LazyContext {
    pub fn new(typed: RequestContext) -> Self {
        Self {
            typed,
            built: OnceLock::new(),
        }
    }

    /// The typed values the context is built from.
    pub fn typed(&self) -> &RequestContext {
        &self.typed
    }

    pub fn get(&self) -> Result<&Context, String> {
        self.built
            .get_or_init(|| self.typed.to_cedar())
            .as_ref()
            .map_err(Clone::clone)
    }
}
