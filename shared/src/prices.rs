//! The shipped price table and metering arithmetic. Prices are USD per million tokens, which is
//! the same number as micro-USD per token; they are held as integer micro-USD per million
//! tokens and costs come out in integer micro-USD, rounded up (a call never costs less than it
//! metered). A model connection's `provider_config.pricing` overrides the table.

use serde_json::Value;

/// The table's version, recorded with every priced call.
pub const TABLE_VERSION: &str = "2026-11-24";

/// No single call costs more than this (1,000,000 USD): an absurd usage an upstream reports
/// cannot overflow a spend counter or the record.
pub const MAX_COST_MICROS: u64 = 1_000_000_000_000;

/// Micro-USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Price {
    pub input: u64,
    pub output: u64,
    /// Prompt tokens served from the provider's cache.
    pub cached_input: u64,
    /// Prompt tokens written to the provider's cache (Anthropic bills 1.25 × input).
    pub cache_write: u64,
}

/// Where a model's price came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PriceSource {
    /// The connection's `provider_config.pricing`.
    Override,
    /// The shipped table, under this key.
    Table(&'static str),
}

/// Tokens a call used, as the upstream reported them, in one shape for every provider.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Every prompt token, those read from or written to the cache included.
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Part of `prompt_tokens` served from cache.
    pub cached_tokens: u64,
    /// Part of `prompt_tokens` written to the cache.
    pub cache_write_tokens: u64,
}

impl Usage {
    /// Reads an OpenAI-shaped `usage` object (`prompt_tokens`, `completion_tokens`,
    /// `prompt_tokens_details.cached_tokens`).
    pub fn from_openai(usage: &Value) -> Option<Self> {
        let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
        let prompt = usage.get("prompt_tokens").and_then(Value::as_u64)?;
        Some(Self {
            prompt_tokens: prompt,
            completion_tokens: n(usage.get("completion_tokens")),
            cached_tokens: n(usage
                .get("prompt_tokens_details")
                .and_then(|d| d.get("cached_tokens")))
            .min(prompt),
            cache_write_tokens: 0,
        })
    }
}

impl Price {
    const fn usd_per_mtok(input: f64, output: f64, cached_input: f64) -> Self {
        // Rounded to the nearest unit: 0.15 × 10⁶ is 149999.99… in binary floating point.
        Self {
            input: (input * 1_000_000.0 + 0.5) as u64,
            output: (output * 1_000_000.0 + 0.5) as u64,
            cached_input: (cached_input * 1_000_000.0 + 0.5) as u64,
            cache_write: (input * 1_250_000.0 + 0.5) as u64,
        }
    }

    /// The cost of `usage` in micro-USD, rounded up.
    pub fn cost_micros(&self, usage: &Usage) -> u64 {
        let uncached = usage
            .prompt_tokens
            .saturating_sub(usage.cached_tokens)
            .saturating_sub(usage.cache_write_tokens);
        let pico = u128::from(uncached) * u128::from(self.input)
            + u128::from(usage.cached_tokens) * u128::from(self.cached_input)
            + u128::from(usage.cache_write_tokens) * u128::from(self.cache_write)
            + u128::from(usage.completion_tokens) * u128::from(self.output);
        u64::try_from(pico.div_ceil(1_000_000)).map_or(MAX_COST_MICROS, |c| c.min(MAX_COST_MICROS))
    }

    /// A `provider_config.pricing` object (`input_usd_per_mtok`, `output_usd_per_mtok`,
    /// `cached_input_usd_per_mtok`, `cache_write_usd_per_mtok`; a missing cached price is the
    /// input price, a missing cache-write price 1.25 × the input price).
    pub fn from_override(pricing: &Value) -> Option<Self> {
        let usd = |k: &str| {
            pricing
                .get(k)
                .and_then(Value::as_f64)
                .filter(|v| v.is_finite() && *v >= 0.0)
        };
        let input = usd("input_usd_per_mtok")?;
        let output = usd("output_usd_per_mtok")?;
        let cached = usd("cached_input_usd_per_mtok").unwrap_or(input);
        let cache_write = usd("cache_write_usd_per_mtok").unwrap_or(input * 1.25);
        let micros = |v: f64| (v * 1_000_000.0).round() as u64;
        Some(Self {
            input: micros(input),
            output: micros(output),
            cached_input: micros(cached),
            cache_write: micros(cache_write),
        })
    }
}

/// USD per million tokens: input, output, cached input. Keys match model ids by prefix after
/// any vendor prefix (`openai/`, `anthropic.`, `us.anthropic.`, `models/`) is removed, the
/// longest key winning, so dated variants (`gpt-4o-mini-2024-07-18`) take their family's price.
const TABLE: &[(&str, Price)] = &[
    // OpenAI
    ("gpt-5", Price::usd_per_mtok(1.25, 10.0, 0.125)),
    ("gpt-5-mini", Price::usd_per_mtok(0.25, 2.0, 0.025)),
    ("gpt-5-nano", Price::usd_per_mtok(0.05, 0.40, 0.005)),
    ("gpt-4.1", Price::usd_per_mtok(2.0, 8.0, 0.50)),
    ("gpt-4.1-mini", Price::usd_per_mtok(0.40, 1.60, 0.10)),
    ("gpt-4.1-nano", Price::usd_per_mtok(0.10, 0.40, 0.025)),
    ("gpt-4o", Price::usd_per_mtok(2.50, 10.0, 1.25)),
    ("gpt-4o-mini", Price::usd_per_mtok(0.15, 0.60, 0.075)),
    ("gpt-4-turbo", Price::usd_per_mtok(10.0, 30.0, 10.0)),
    ("gpt-4", Price::usd_per_mtok(30.0, 60.0, 30.0)),
    ("gpt-3.5-turbo", Price::usd_per_mtok(0.50, 1.50, 0.50)),
    ("o1", Price::usd_per_mtok(15.0, 60.0, 7.50)),
    ("o1-mini", Price::usd_per_mtok(1.10, 4.40, 0.55)),
    ("o3", Price::usd_per_mtok(2.0, 8.0, 0.50)),
    ("o3-mini", Price::usd_per_mtok(1.10, 4.40, 0.55)),
    ("o4-mini", Price::usd_per_mtok(1.10, 4.40, 0.275)),
    // Anthropic (also as Bedrock ids)
    ("claude-opus-4", Price::usd_per_mtok(15.0, 75.0, 1.50)),
    ("claude-sonnet-4", Price::usd_per_mtok(3.0, 15.0, 0.30)),
    ("claude-haiku-4", Price::usd_per_mtok(1.0, 5.0, 0.10)),
    ("claude-3-7-sonnet", Price::usd_per_mtok(3.0, 15.0, 0.30)),
    ("claude-3-5-sonnet", Price::usd_per_mtok(3.0, 15.0, 0.30)),
    ("claude-3-5-haiku", Price::usd_per_mtok(0.80, 4.0, 0.08)),
    ("claude-3-opus", Price::usd_per_mtok(15.0, 75.0, 1.50)),
    ("claude-3-haiku", Price::usd_per_mtok(0.25, 1.25, 0.03)),
    // Google
    ("gemini-2.5-pro", Price::usd_per_mtok(1.25, 10.0, 0.31)),
    ("gemini-2.5-flash", Price::usd_per_mtok(0.30, 2.50, 0.075)),
    (
        "gemini-2.5-flash-lite",
        Price::usd_per_mtok(0.10, 0.40, 0.025),
    ),
    ("gemini-2.0-flash", Price::usd_per_mtok(0.10, 0.40, 0.025)),
    (
        "gemini-2.0-flash-lite",
        Price::usd_per_mtok(0.075, 0.30, 0.075),
    ),
    ("gemini-1.5-pro", Price::usd_per_mtok(1.25, 5.0, 0.3125)),
    (
        "gemini-1.5-flash",
        Price::usd_per_mtok(0.075, 0.30, 0.01875),
    ),
    // Amazon (Bedrock)
    ("amazon.nova-pro", Price::usd_per_mtok(0.80, 3.20, 0.20)),
    ("amazon.nova-lite", Price::usd_per_mtok(0.06, 0.24, 0.015)),
    (
        "amazon.nova-micro",
        Price::usd_per_mtok(0.035, 0.14, 0.00875),
    ),
    (
        "amazon.nova-premier",
        Price::usd_per_mtok(2.50, 12.50, 0.625),
    ),
    ("meta.llama3-1-70b", Price::usd_per_mtok(0.72, 0.72, 0.72)),
    ("meta.llama3-1-8b", Price::usd_per_mtok(0.22, 0.22, 0.22)),
    ("meta.llama3-3-70b", Price::usd_per_mtok(0.72, 0.72, 0.72)),
    ("meta.llama3-2-90b", Price::usd_per_mtok(0.72, 0.72, 0.72)),
    ("meta.llama3-2-11b", Price::usd_per_mtok(0.16, 0.16, 0.16)),
    (
        "meta.llama4-maverick-17b",
        Price::usd_per_mtok(0.24, 0.97, 0.24),
    ),
    (
        "meta.llama4-scout-17b",
        Price::usd_per_mtok(0.17, 0.66, 0.17),
    ),
    (
        "cohere.command-r-plus",
        Price::usd_per_mtok(2.50, 10.0, 2.50),
    ),
    ("cohere.command-r", Price::usd_per_mtok(0.15, 0.60, 0.15)),
    ("deepseek.r1", Price::usd_per_mtok(1.35, 5.40, 1.35)),
    // Mistral
    ("mistral-large", Price::usd_per_mtok(2.0, 6.0, 2.0)),
    ("mistral-medium", Price::usd_per_mtok(0.40, 2.0, 0.40)),
    ("mistral-small", Price::usd_per_mtok(0.10, 0.30, 0.10)),
    ("codestral", Price::usd_per_mtok(0.30, 0.90, 0.30)),
    ("open-mistral-nemo", Price::usd_per_mtok(0.15, 0.15, 0.15)),
    // DeepSeek
    ("deepseek-chat", Price::usd_per_mtok(0.27, 1.10, 0.07)),
    ("deepseek-reasoner", Price::usd_per_mtok(0.55, 2.19, 0.14)),
    // xAI
    ("grok-4", Price::usd_per_mtok(3.0, 15.0, 0.75)),
    ("grok-3", Price::usd_per_mtok(3.0, 15.0, 0.75)),
    ("grok-3-mini", Price::usd_per_mtok(0.30, 0.50, 0.075)),
    // Perplexity
    ("sonar", Price::usd_per_mtok(1.0, 1.0, 1.0)),
    ("sonar-pro", Price::usd_per_mtok(3.0, 15.0, 3.0)),
    // Open-weight models as the hosted providers (Groq, Together, Fireworks, Cerebras,
    // OpenRouter) list them; hosts differ by a few cents, so set `pricing` on the connection
    // where the bill must match exactly.
    ("llama-3.3-70b", Price::usd_per_mtok(0.88, 0.88, 0.88)),
    ("llama-3.1-70b", Price::usd_per_mtok(0.88, 0.88, 0.88)),
    ("llama-3.1-8b", Price::usd_per_mtok(0.18, 0.18, 0.18)),
    ("llama3.1-8b", Price::usd_per_mtok(0.10, 0.10, 0.10)),
    ("mixtral-8x7b", Price::usd_per_mtok(0.60, 0.60, 0.60)),
    ("qwen-2.5-72b", Price::usd_per_mtok(1.20, 1.20, 1.20)),
];

/// The shipped price of an upstream model id, if the table knows it.
pub fn lookup(model: &str) -> Option<(&'static str, Price)> {
    let id = model.trim().to_ascii_lowercase();
    let mut candidates = vec![id.as_str()];
    // Vendor prefixes: `openai/gpt-4o`, `models/gemini-…`, `us.anthropic.claude-…`.
    if let Some((_, rest)) = id.rsplit_once('/') {
        candidates.push(rest);
    }
    for vendor in ["anthropic.", "mistral.", "deepseek."] {
        if let Some(at) = id.find(vendor) {
            candidates.push(&id[at + vendor.len()..]);
        }
    }
    // Bedrock ids, with or without a cross-region prefix (`us.`, `eu.`, `apac.`, `global.`).
    for vendor in ["amazon.", "meta.", "cohere.", "deepseek.r1"] {
        if let Some(at) = id.find(vendor) {
            candidates.push(&id[at..]);
        }
    }
    TABLE
        .iter()
        .filter(|(key, _)| {
            candidates.iter().any(|c| {
                c.strip_prefix(key)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', ':', '@', '.']))
            })
        })
        .max_by_key(|(key, _)| key.len())
        .map(|(key, price)| (*key, *price))
}

/// A model's price: the connection's override, else the table's.
pub fn resolve(
    pricing_override: Option<&Value>,
    upstream_model: &str,
) -> Option<(PriceSource, Price)> {
    if let Some(p) = pricing_override.and_then(Price::from_override) {
        return Some((PriceSource::Override, p));
    }
    lookup(upstream_model).map(|(key, p)| (PriceSource::Table(key), p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dated_and_prefixed_ids_take_their_family_price() {
        assert_eq!(lookup("gpt-4o-mini-2024-07-18").unwrap().0, "gpt-4o-mini");
        assert_eq!(lookup("gpt-4o-2024-08-06").unwrap().0, "gpt-4o");
        assert_eq!(lookup("openai/gpt-4.1-mini").unwrap().0, "gpt-4.1-mini");
        assert_eq!(
            lookup("us.anthropic.claude-3-5-sonnet-20240620-v1:0")
                .unwrap()
                .0,
            "claude-3-5-sonnet"
        );
        assert_eq!(
            lookup("claude-sonnet-4-5-20250929").unwrap().0,
            "claude-sonnet-4"
        );
        assert_eq!(
            lookup("models/gemini-2.5-flash").unwrap().0,
            "gemini-2.5-flash"
        );
        assert_eq!(
            lookup("amazon.nova-lite-v1:0").unwrap().0,
            "amazon.nova-lite"
        );
        assert_eq!(lookup("o3-mini").unwrap().0, "o3-mini");
        assert_eq!(
            lookup("meta-llama/Llama-3.3-70B-Instruct-Turbo").unwrap().0,
            "llama-3.3-70b"
        );
        assert_eq!(lookup("grok-3-mini-beta").unwrap().0, "grok-3-mini");
        // Bedrock ids as Bedrock spells them, cross-region prefixes included; Vertex's `@`.
        for (id, key) in [
            ("eu.amazon.nova-lite-v1:0", "amazon.nova-lite"),
            (
                "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
                "claude-sonnet-4",
            ),
            (
                "apac.anthropic.claude-3-5-sonnet-20241022-v2:0",
                "claude-3-5-sonnet",
            ),
            ("us.meta.llama3-3-70b-instruct-v1:0", "meta.llama3-3-70b"),
            (
                "us.meta.llama4-scout-17b-instruct-v1:0",
                "meta.llama4-scout-17b",
            ),
            ("cohere.command-r-plus-v1:0", "cohere.command-r-plus"),
            ("us.deepseek.r1-v1:0", "deepseek.r1"),
            ("mistral.mistral-large-2402-v1:0", "mistral-large"),
            ("claude-sonnet-4-5@20250929", "claude-sonnet-4"),
            ("gemini-2.5-flash-001", "gemini-2.5-flash"),
        ] {
            assert_eq!(lookup(id).map(|(k, _)| k), Some(key), "{id}");
        }
        assert!(
            lookup("gpt-4omega").is_none(),
            "a prefix must end at a separator"
        );
        assert!(lookup("my-finetune").is_none());
    }

    #[test]
    fn costs_are_integer_micro_usd_rounded_up() {
        let (_, p) = lookup("gpt-4o-mini").unwrap();
        // 1,000 in at $0.15/M = 150 µUSD; 500 out at $0.60/M = 300 µUSD.
        let u = Usage {
            prompt_tokens: 1000,
            completion_tokens: 500,
            ..Usage::default()
        };
        assert_eq!(p.cost_micros(&u), 450);
        // Cached prompt tokens at the cached price: 600 × 0.15 + 400 × 0.075 + 500 × 0.6.
        let u = Usage {
            cached_tokens: 400,
            ..u
        };
        assert_eq!(p.cost_micros(&u), 90 + 30 + 300);
        // One token still costs something.
        let one = Usage {
            prompt_tokens: 1,
            ..Usage::default()
        };
        assert_eq!(p.cost_micros(&one), 1);
        assert_eq!(p.cost_micros(&Usage::default()), 0);
        // Cache writes at 1.25 × input: claude-sonnet-4 at $3/M in, $3.75/M to write, $0.30/M
        // to read, $15/M out.
        let (_, p) = lookup("claude-sonnet-4-5").unwrap();
        let u = Usage {
            prompt_tokens: 1000 + 2000 + 4000,
            completion_tokens: 100,
            cached_tokens: 2000,
            cache_write_tokens: 4000,
        };
        assert_eq!(p.cost_micros(&u), 3000 + 600 + 15_000 + 1500);
    }

    #[test]
    fn overrides_win_and_usage_reads_openai_shapes() {
        let o = json!({"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 2.0});
        let (source, p) = resolve(Some(&o), "gpt-4o").unwrap();
        assert_eq!(source, PriceSource::Override);
        assert_eq!(
            (p.input, p.output, p.cached_input, p.cache_write),
            (1_000_000, 2_000_000, 1_000_000, 1_250_000)
        );
        assert_eq!(
            resolve(None, "gpt-4o").unwrap().0,
            PriceSource::Table("gpt-4o")
        );
        assert!(resolve(None, "unknown-model").is_none());
        let u = Usage::from_openai(&json!({"prompt_tokens": 10, "completion_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": 4}}))
        .unwrap();
        assert_eq!(
            u,
            Usage {
                prompt_tokens: 10,
                completion_tokens: 3,
                cached_tokens: 4,
                cache_write_tokens: 0,
            }
        );
        assert!(Usage::from_openai(&json!({})).is_none());
    }
}
