//! Model providers: which ids exist, how each is called, and what locating details it needs.

/// How the gateway talks to a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// First-party vendor or cloud platform; the gateway translates to its wire format.
    Native,
    /// A hosted inference vendor with an OpenAI-shaped API.
    HostedCompatible,
    /// `openai_compatible`: any OpenAI-shaped endpoint.
    Compatible,
    /// `custom`: provider-specific requests forwarded without translation.
    Custom,
}

/// What locates the upstream when the provider has no default base URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Locator {
    /// A default base URL is known; `base_url` may override it.
    DefaultBaseUrl(&'static str),
    /// `base_url` is required.
    BaseUrl,
    /// These `provider_config` keys are required; `base_url` may override the endpoint they
    /// locate (a cloud's regional endpoint).
    Keys(&'static [&'static str]),
}

/// The kind of credential a shared API-key model stores in `secret_values`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretShape {
    /// Keys are upstream header names; values are sent verbatim.
    Headers,
    /// Keys name cloud credential fields.
    Fields(&'static [&'static str]),
}

/// The API a provider's models are called through: it fixes where the gateway sends a call
/// and which translator shapes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI's chat completions, `{base}/chat/completions`.
    OpenAiChat,
    /// Anthropic's Messages, `{base}/v1/messages`.
    AnthropicMessages,
    /// The Gemini API's `generateContent`.
    Gemini,
    /// Vertex AI: Gemini models by `generateContent`, Claude models by `rawPredict`, under a
    /// project and location.
    Vertex,
    /// Bedrock's Converse API in a region.
    Bedrock,
    /// Forwarded untouched: `{base}` plus the caller's path.
    Custom,
}

/// A cloud platform whose identity (the gateway's own, or stored credentials) signs calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cloud {
    /// SigV4 with AWS credentials.
    Aws,
    /// A Google OAuth token.
    Google,
}

/// Everything the product knows about one provider: adding a provider is adding one of these
/// (and, for a new [`Api`], its endpoint and translator in the gateway's `llm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Provider {
    pub id: &'static str,
    pub group: Group,
    pub api: Api,
    /// The cloud platform it is, if any.
    pub cloud: Option<Cloud>,
    pub locator: Locator,
    pub secret_shape: SecretShape,
    /// The header the provider's API key goes in, and its scheme prefix (`Bearer `).
    pub api_key_header: (&'static str, &'static str),
}

const BEARER: (&str, &str) = ("Authorization", "Bearer ");

const fn hosted(id: &'static str, base: &'static str) -> Provider {
    Provider {
        id,
        group: Group::HostedCompatible,
        api: Api::OpenAiChat,
        cloud: None,
        locator: Locator::DefaultBaseUrl(base),
        secret_shape: SecretShape::Headers,
        api_key_header: BEARER,
    }
}

/// Every provider id the product accepts.
pub const PROVIDERS: &[Provider] = &[
    Provider {
        id: "openai",
        group: Group::Native,
        api: Api::OpenAiChat,
        cloud: None,
        locator: Locator::DefaultBaseUrl("https://api.openai.com/v1"),
        secret_shape: SecretShape::Headers,
        api_key_header: BEARER,
    },
    Provider {
        id: "anthropic",
        group: Group::Native,
        api: Api::AnthropicMessages,
        cloud: None,
        locator: Locator::DefaultBaseUrl("https://api.anthropic.com"),
        secret_shape: SecretShape::Headers,
        api_key_header: ("x-api-key", ""),
    },
    Provider {
        id: "google",
        group: Group::Native,
        api: Api::Gemini,
        cloud: None,
        locator: Locator::DefaultBaseUrl("https://generativelanguage.googleapis.com"),
        secret_shape: SecretShape::Headers,
        api_key_header: ("x-goog-api-key", ""),
    },
    Provider {
        id: "vertex",
        group: Group::Native,
        api: Api::Vertex,
        cloud: Some(Cloud::Google),
        locator: Locator::Keys(&["project", "location"]),
        secret_shape: SecretShape::Fields(&["service_account_json"]),
        api_key_header: BEARER,
    },
    Provider {
        id: "bedrock",
        group: Group::Native,
        api: Api::Bedrock,
        cloud: Some(Cloud::Aws),
        locator: Locator::Keys(&["region"]),
        secret_shape: SecretShape::Fields(&[
            "aws_access_key_id",
            "aws_secret_access_key",
            "aws_session_token",
        ]),
        api_key_header: BEARER,
    },
    Provider {
        id: "databricks",
        group: Group::HostedCompatible,
        api: Api::OpenAiChat,
        cloud: None,
        locator: Locator::BaseUrl,
        secret_shape: SecretShape::Headers,
        api_key_header: BEARER,
    },
    hosted("groq", "https://api.groq.com/openai/v1"),
    hosted("together", "https://api.together.xyz/v1"),
    hosted("fireworks", "https://api.fireworks.ai/inference/v1"),
    hosted("mistral", "https://api.mistral.ai/v1"),
    hosted("deepseek", "https://api.deepseek.com/v1"),
    hosted("openrouter", "https://openrouter.ai/api/v1"),
    hosted("xai", "https://api.x.ai/v1"),
    hosted("cerebras", "https://api.cerebras.ai/v1"),
    hosted("perplexity", "https://api.perplexity.ai"),
    Provider {
        id: "azure_openai",
        group: Group::HostedCompatible,
        api: Api::OpenAiChat,
        cloud: None,
        locator: Locator::BaseUrl,
        secret_shape: SecretShape::Headers,
        api_key_header: ("api-key", ""),
    },
    Provider {
        id: "openai_compatible",
        group: Group::Compatible,
        api: Api::OpenAiChat,
        cloud: None,
        locator: Locator::BaseUrl,
        secret_shape: SecretShape::Headers,
        api_key_header: BEARER,
    },
    Provider {
        id: "custom",
        group: Group::Custom,
        api: Api::Custom,
        cloud: None,
        locator: Locator::BaseUrl,
        secret_shape: SecretShape::Headers,
        api_key_header: BEARER,
    },
];

/// Looks a provider up by id.
pub fn find(id: &str) -> Option<&'static Provider> {
    PROVIDERS.iter().find(|p| p.id == id)
}

/// The ids, comma-separated, for error messages.
pub fn known_ids() -> String {
    PROVIDERS
        .iter()
        .map(|p| p.id)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Provider {
    /// Whether a model with auth method `none` authenticates with the gateway's own cloud
    /// identity (the cloud platforms), rather than sending nothing.
    pub fn uses_cloud_identity(&self) -> bool {
        self.cloud.is_some()
    }

    /// Whether requests go out in the OpenAI chat-completions shape without translation.
    pub fn speaks_openai(&self) -> bool {
        self.api == Api::OpenAiChat
    }

    /// The base URL requests go to: `provider_config.base_url`, else the default.
    pub fn base_url<'a>(&self, configured: Option<&'a str>) -> Option<&'a str>
    where
        'static: 'a,
    {
        match (configured, self.locator) {
            (Some(url), _) => Some(url),
            (None, Locator::DefaultBaseUrl(url)) => Some(url),
            (None, _) => None,
        }
    }
}

/// The stored secret (header name and value) an API key becomes for a provider: its API-key
/// header with the scheme prefix, or a bearer token for Bedrock. Providers that take cloud
/// credentials instead are refused with what to send.
pub fn api_key_secret(provider_id: &str, key: &str) -> Result<(String, String), String> {
    let p = find(provider_id)
        .ok_or_else(|| format!("unknown provider '{provider_id}'; known: {}", known_ids()))?;
    match p.secret_shape {
        // A Bedrock API key is a bearer token.
        SecretShape::Fields(_) if p.cloud == Some(Cloud::Aws) => {
            return Ok(("Authorization".into(), format!("Bearer {key}")));
        }
        SecretShape::Fields(_) if p.cloud == Some(Cloud::Google) => {
            return Err(
                "vertex takes a service account, not an API key: send its JSON as the \
                 service_account_json secret, or use auth method none for the gateway's own \
                 Google identity"
                    .into(),
            )
        }
        SecretShape::Fields(fields) => {
            return Err(format!(
                "provider {provider_id} takes cloud credentials, not an API key; send the \
                 secrets {}",
                fields.join(", ")
            ))
        }
        SecretShape::Headers => {}
    }
    let (header, scheme) = p.api_key_header;
    Ok((header.to_string(), format!("{scheme}{key}")))
}
