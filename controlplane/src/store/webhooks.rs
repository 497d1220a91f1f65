//! Webhooks: destinations (with sealed signing secrets), subscriptions, the outbox of stored
//! events waiting to be matched, deliveries (a queue claimed with leases) and their attempts.
//! Nothing here is in a gateway snapshot: writes go through `Store::write_unscoped`.

mod deliveries;
mod destinations;
mod outbox;
mod subscriptions;

pub use deliveries::{
    attempts, cancel, cancel_subscription, claim_due, delivery, fail_destination, has_due,
    insert_delivery, mark_replayed, purge, query_deliveries, settle, AttemptRow, DeliveryQuery,
    DeliveryRow, Settled,
};
pub use destinations::{
    delete_destination, destination, disable_destination, find_destination, insert_destination,
    list_destinations, update_destination, DestinationRow,
};
pub use outbox::{dequeue, enqueue_events, has_queued, take_queued, QueuedRow};
pub use subscriptions::{
    delete_subscription, enabled_subscriptions, find_subscription, insert_subscription,
    list_subscriptions, subscribed_workspaces, subscriptions_of, update_subscription,
    SubscriptionRow,
};
