//! The Cedar context of a request, built only when a decision is not memoized.

use std::sync::OnceLock;

use cedar_policy::Context;
use portcullis_shared::policy::RequestContext;

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
