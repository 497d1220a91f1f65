//! One member, ready to call: where the request goes, in which dialect, with which headers
//! and body. A member that cannot take the request says why, and the next one is tried.

mod extensions;

use http::{HeaderName, HeaderValue};

use super::api::Inbound;
use super::translate::{Body, Context, Dialect, TranslateError, Translation};
use super::wire::anthropic;
use crate::error::{GatewayError, Shape};
use crate::llm::table::{Credential, ModelEntry};

pub struct Plan {
    pub translation: Translation,
    /// The shape the caller's replies take.
    pub caller: Shape,
    pub url: reqwest::Url,
    /// Headers of the upstream's API (not the credential: [`super::credential`] adds it).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Body,
    /// Unix seconds, for `created` in translated OpenAI replies.
    pub created: i64,
    /// The gateway's request id, for ids an upstream does not give.
    pub request_id: String,
    /// Claude on Vertex.
    pub vertex: bool,
    /// The calling person's own credential, for a per-user model.
    pub user: Option<crate::peruser::Headers>,
}

impl Plan {
    /// What the translators need to know of the member and the call.
    pub fn context<'a>(&'a self, model: &'a ModelEntry) -> Context<'a> {
        Context {
            upstream_model: &model.upstream_model,
            provider: model.provider.id,
            created: self.created,
            id: &self.request_id,
            vertex: self.vertex,
        }
    }
}

/// Plans a call of `model`; `cloud_identity` says whether this gateway may use its own cloud
/// identity.
pub fn plan(
    inbound: &Inbound,
    model: &ModelEntry,
    request_id: &str,
    cloud_identity: bool,
) -> Result<Plan, GatewayError> {
    let to = model
        .endpoint
        .route(inbound.api, inbound.stream)
        .map_err(|why| GatewayError::Unsupported(why.to_string()))?;
    if let Credential::Unavailable(why) = &model.credential {
        return Err(GatewayError::Unsupported(why.clone()));
    }
    if model.credential.uses_gateway_identity() && !cloud_identity {
        return Err(GatewayError::CloudIdentityUnavailable(format!(
            "model '{}' ({}) authenticates with the gateway's own cloud identity, and this \
             gateway was not started with --cloud-identity",
            model.name, model.provider.id
        )));
    }
    let dialect = to.dialect;
    let translation = Translation::of(inbound.api, dialect);
    let mut plan = Plan {
        translation,
        caller: inbound.api.shape(),
        url: to.url.clone(),
        headers: Vec::new(),
        body: Body::default(),
        created: chrono::Utc::now().timestamp(),
        request_id: request_id.to_string(),
        vertex: to.vertex,
        user: None,
    };
    plan.body = translation
        .request(inbound, &plan.context(model))
        .map_err(|e| match e {
            TranslateError::Invalid(message) => GatewayError::BadRequest(message),
            TranslateError::Unsupported(what) => GatewayError::Unsupported(format!(
                "model '{}' ({}) cannot take this request: {what} is not supported by its API",
                model.name, model.provider.id
            )),
        })?;
    if dialect == Dialect::AnthropicMessages && !plan.vertex {
        // The caller's version and beta flags when it spoke Anthropic's API itself.
        let passing = translation == Translation::AnthropicPassThrough;
        let version = inbound
            .anthropic_version
            .clone()
            .filter(|_| passing)
            .unwrap_or(HeaderValue::from_static(anthropic::VERSION));
        plan.headers
            .push((HeaderName::from_static("anthropic-version"), version));
        if let Some(beta) = inbound.anthropic_beta.clone().filter(|_| passing) {
            extensions::check_betas(model, &beta)?;
            plan.headers
                .push((HeaderName::from_static("anthropic-beta"), beta));
        }
        if passing {
            extensions::check_server_tools(model, &inbound.body)?;
        }
    }
    Ok(plan)
}
