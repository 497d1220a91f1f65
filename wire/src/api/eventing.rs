//! Webhooks (`svc.eventing.v1.EventingService`, DESIGN §10): subscriptions pick workspace
//! events by type and filter; destinations receive them as signed POSTs (Standard Webhooks);
//! deliveries record every attempt and can be replayed. Signing secrets (`whsec_…`) are shown
//! once, when created or rotated, and never listed.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::scoped;

/// Where events go: an HTTPS endpoint, or a provider with its own settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Destination {
    pub destination_id: String,
    pub workspace_id: String,
    pub name: String,
    /// `https` (a generic endpoint) or a provider from `ListProviders` (`slack`).
    pub provider: String,
    /// The endpoint of an `https` destination; a provider's secret URL is never shown.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub delivery_endpoint: String,
    /// The provider's settings that are not secret.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub settings: Map<String, Value>,
    /// The id of the current signing secret.
    pub key_id: String,
    pub enabled: bool,
    /// Why deliveries stopped (`410 Gone` from the endpoint), when they did.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub disabled_reason: String,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Subscription {
    pub subscription_id: String,
    pub workspace_id: String,
    pub name: String,
    /// The event types it receives.
    pub event_types: Vec<String>,
    /// `key=value` (exact) or `key~=glob` filters: repeated keys OR, distinct keys AND.
    #[serde(default)]
    pub filters: Vec<String>,
    pub destination_id: String,
    pub enabled: bool,
    pub created_at: String,
    pub updated_at: String,
}

/// A new destination: an endpoint, or a provider and its settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateSubscriptionRequest {
    pub workspace_id: String,
    pub name: String,
    pub event_types: Vec<String>,
    #[serde(default)]
    pub filters: Vec<String>,
    /// A new `https` destination at this endpoint (not with `destination_id`).
    #[serde(default)]
    pub delivery_endpoint: String,
    /// An existing destination (not with `delivery_endpoint`).
    #[serde(default)]
    pub destination_id: String,
    /// A new provider destination (with `settings`).
    #[serde(default)]
    pub provider: String,
    #[serde(default)]
    pub settings: Map<String, Value>,
    #[serde(default)]
    pub enabled: Option<bool>,
}

/// The subscription and its destination; the secret only when the destination is new.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreateSubscriptionResponse {
    pub subscription: Subscription,
    pub destination: Destination,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubscriptionResponse {
    pub subscription: Subscription,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubscriptionRefRequest {
    pub workspace_id: String,
    /// The subscription's id or name.
    #[serde(alias = "subscription")]
    pub subscription_id: String,
}

/// Fields left out keep their value; `filters`, when sent, replace the stored ones.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateSubscriptionRequest {
    pub workspace_id: String,
    #[serde(alias = "subscription")]
    pub subscription_id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub event_types: Option<Vec<String>>,
    #[serde(default)]
    pub filters: Option<Vec<String>>,
    #[serde(default)]
    pub enabled: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListSubscriptionsRequest {
    pub workspace_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListSubscriptionsResponse {
    pub subscriptions: Vec<Subscription>,
}

/// A new secret, shown once. The previous one still signs for 24 hours.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RotateSecretResponse {
    pub destination_id: String,
    pub key_id: String,
    pub signing_secret: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateDestinationRequest {
    pub workspace_id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub delivery_endpoint: String,
    #[serde(default)]
    pub provider: String,
    #[serde(default)]
    pub settings: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreateDestinationResponse {
    pub destination: Destination,
    pub signing_secret: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DestinationResponse {
    pub destination: Destination,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DestinationRefRequest {
    pub workspace_id: String,
    /// The destination's id or name.
    #[serde(alias = "destination")]
    pub destination_id: String,
}

/// Fields left out keep their value. Enabling a destination that `410 Gone` disabled clears
/// the reason.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateDestinationRequest {
    pub workspace_id: String,
    #[serde(alias = "destination")]
    pub destination_id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub delivery_endpoint: Option<String>,
    #[serde(default)]
    pub settings: Option<Map<String, Value>>,
    #[serde(default)]
    pub enabled: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListDestinationsRequest {
    pub workspace_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListDestinationsResponse {
    pub destinations: Vec<Destination>,
}

/// A delivery's state: `pending` (waiting for an attempt: the first, or a retry after a failed
/// one), `succeeded` (acknowledged), `failed` (ended unacknowledged before its retries were
/// used up: the endpoint answered `410 Gone`, or the destination was disabled or deleted),
/// `dlq` (every attempt of the retry schedule failed) or `canceled` (`CancelDeliveryRetry`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    Pending,
    Failed,
    Succeeded,
    Dlq,
    Canceled,
}

impl DeliveryStatus {
    pub const ALL: [DeliveryStatus; 5] = [
        DeliveryStatus::Pending,
        DeliveryStatus::Failed,
        DeliveryStatus::Succeeded,
        DeliveryStatus::Dlq,
        DeliveryStatus::Canceled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Failed => "failed",
            DeliveryStatus::Succeeded => "succeeded",
            DeliveryStatus::Dlq => "dlq",
            DeliveryStatus::Canceled => "canceled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.as_str() == s)
    }

    /// Whether another attempt may still be made.
    pub fn is_live(self) -> bool {
        self == DeliveryStatus::Pending
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    pub delivery_id: String,
    pub workspace_id: String,
    pub subscription_id: String,
    pub destination_id: String,
    /// Stable per event (`Service-Event-Id`); a replay keeps it.
    pub event_id: String,
    pub event_type: String,
    pub status: DeliveryStatus,
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status_code: Option<u16>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_error: String,
    /// The delivery this one replays.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub replay_of: String,
    /// The latest replay of this delivery.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub replayed_by: String,
    /// When the retained body is deleted; a delivery without it cannot be replayed.
    pub body_expires_at: String,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    pub attempt: u32,
    /// The `webhook-id` this attempt was sent with.
    pub webhook_id: String,
    pub started_at: String,
    pub duration_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_code: Option<u16>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListDeliveriesRequest {
    pub workspace_id: String,
    /// Only these statuses (all when empty).
    #[serde(default)]
    pub statuses: Vec<DeliveryStatus>,
    /// Only deliveries created at or after this time (RFC 3339).
    #[serde(default)]
    pub start_time: String,
    /// A subscription's id or name.
    #[serde(default)]
    pub subscription_id: String,
    #[serde(default)]
    pub destination_id: String,
    #[serde(default)]
    pub event_type: String,
    #[serde(default)]
    pub page_size: u32,
    #[serde(default)]
    pub page_token: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListDeliveriesResponse {
    pub deliveries: Vec<Delivery>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub next_page_token: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeliveryRefRequest {
    pub workspace_id: String,
    pub delivery_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetDeliveryRequest {
    pub workspace_id: String,
    pub delivery_id: String,
    /// Include the retained body, while it is kept.
    #[serde(default)]
    pub include_body: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GetDeliveryResponse {
    pub delivery: Delivery,
    pub attempts: Vec<Attempt>,
    /// The body as sent (`{type, timestamp, data}`), when asked for and still retained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryResponse {
    pub delivery: Delivery,
}

/// Replays the deliveries since a time that ended in one of `statuses` and have no live or
/// succeeded replay; at most `max_deliveries` (≤ 500) per run, so it is safe to re-run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayFailedDeliveriesRequest {
    pub workspace_id: String,
    /// RFC 3339.
    pub since: String,
    #[serde(default)]
    pub destination_id: String,
    /// A subscription's id or name: only its deliveries.
    #[serde(default)]
    pub subscription_id: String,
    /// `failed` and `dlq` when left out.
    #[serde(default)]
    pub statuses: Vec<DeliveryStatus>,
    /// 500 when left out.
    #[serde(default)]
    pub max_deliveries: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayFailedDeliveriesResponse {
    pub matched: u32,
    pub replayed: u32,
    pub skipped_body_expired: u32,
    /// Matched but not replayed: the destination is gone or disabled.
    pub failed: u32,
    pub replay_delivery_ids: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListProvidersRequest {
    pub workspace_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderSetting {
    pub name: String,
    pub description: String,
    pub required: bool,
    /// Stored sealed and never shown again.
    pub secret: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provider {
    pub provider: String,
    pub display_name: String,
    pub description: String,
    pub settings: Vec<ProviderSetting>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListProvidersResponse {
    pub providers: Vec<Provider>,
}

/// What `TestSubscription` queued: read its outcome with `GetDelivery`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestSubscriptionResponse {
    pub delivery_id: String,
}

scoped!(
    CreateSubscriptionRequest,
    SubscriptionRefRequest,
    UpdateSubscriptionRequest,
    ListSubscriptionsRequest,
    CreateDestinationRequest,
    DestinationRefRequest,
    UpdateDestinationRequest,
    ListDestinationsRequest,
    ListDeliveriesRequest,
    DeliveryRefRequest,
    GetDeliveryRequest,
    ReplayFailedDeliveriesRequest,
    ListProvidersRequest,
);
