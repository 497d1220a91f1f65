//! Webhooks (`svc.eventing.v1.EventingService`, DESIGN §10): subscriptions pick workspace
//! events, destinations receive them signed, deliveries record each attempt and can be
//! replayed. Subscriptions and destinations are named by id or name. A signing secret is in a
//! reply only when it is new (create, rotate): it is shown once.
//!
//! One method per operation, then the MCP tools' forms (`webhooks_…`), which take `since` as
//! an RFC 3339 time or a duration back from now (`24h`).

use portcullis_wire::api::eventing::*;
use portcullis_wire::api::service::EVENTING;
use portcullis_wire::api::Empty;

use super::AdminClient;
use crate::error::ClientError;

impl AdminClient {
    /// `CreateSubscription`: onto an existing destination, or with a new one whose signing
    /// secret the reply carries, once.
    pub async fn create_subscription(
        &self,
        request: &CreateSubscriptionRequest,
    ) -> Result<CreateSubscriptionResponse, ClientError> {
        self.call(EVENTING, "CreateSubscription", request).await
    }

    /// `GetSubscription`: one subscription by id or name.
    pub async fn get_subscription(
        &self,
        workspace_id: &str,
        subscription: &str,
    ) -> Result<Subscription, ClientError> {
        let request = subscription_ref(workspace_id, subscription);
        let reply: SubscriptionResponse = self.call(EVENTING, "GetSubscription", &request).await?;
        Ok(reply.subscription)
    }

    /// `ListSubscriptions`: the workspace's subscriptions, disabled ones included.
    pub async fn list_subscriptions(
        &self,
        workspace_id: &str,
    ) -> Result<Vec<Subscription>, ClientError> {
        let request = ListSubscriptionsRequest {
            workspace_id: workspace_id.to_string(),
        };
        let reply: ListSubscriptionsResponse =
            self.call(EVENTING, "ListSubscriptions", &request).await?;
        Ok(reply.subscriptions)
    }

    /// `UpdateSubscription`: fields left `None` keep their value; `filters` replace.
    pub async fn update_subscription(
        &self,
        request: &UpdateSubscriptionRequest,
    ) -> Result<Subscription, ClientError> {
        let reply: SubscriptionResponse =
            self.call(EVENTING, "UpdateSubscription", request).await?;
        Ok(reply.subscription)
    }

    /// `DeleteSubscription`: its live deliveries are canceled; its destination stays.
    pub async fn delete_subscription(
        &self,
        workspace_id: &str,
        subscription: &str,
    ) -> Result<(), ClientError> {
        let request = subscription_ref(workspace_id, subscription);
        let _: Empty = self.call(EVENTING, "DeleteSubscription", &request).await?;
        Ok(())
    }

    /// `TestSubscription`: queues an `eventing.test` event to the subscription's destination;
    /// read the outcome with [`AdminClient::get_delivery`].
    pub async fn test_subscription(
        &self,
        workspace_id: &str,
        subscription: &str,
    ) -> Result<TestSubscriptionResponse, ClientError> {
        let request = subscription_ref(workspace_id, subscription);
        self.call(EVENTING, "TestSubscription", &request).await
    }

    /// `RotateSubscriptionSecret`: a new signing secret for the subscription's destination,
    /// shown once; the previous one still signs for 24 hours.
    pub async fn rotate_subscription_secret(
        &self,
        workspace_id: &str,
        subscription: &str,
    ) -> Result<RotateSecretResponse, ClientError> {
        let request = subscription_ref(workspace_id, subscription);
        self.call(EVENTING, "RotateSubscriptionSecret", &request)
            .await
    }

    /// `ListDeliveries`: one page, newest first; pass `next_page_token` back for the next.
    pub async fn list_deliveries(
        &self,
        request: &ListDeliveriesRequest,
    ) -> Result<ListDeliveriesResponse, ClientError> {
        self.call(EVENTING, "ListDeliveries", request).await
    }

    /// `GetDelivery`: a delivery and its attempts, and with `include_body` the body as sent,
    /// while it is retained.
    pub async fn get_delivery(
        &self,
        workspace_id: &str,
        delivery_id: &str,
        include_body: bool,
    ) -> Result<GetDeliveryResponse, ClientError> {
        let request = GetDeliveryRequest {
            workspace_id: workspace_id.to_string(),
            delivery_id: delivery_id.to_string(),
            include_body,
        };
        self.call(EVENTING, "GetDelivery", &request).await
    }

    /// `ReplayDelivery`: sends the retained body again as a new delivery (same event id).
    pub async fn replay_delivery(
        &self,
        workspace_id: &str,
        delivery_id: &str,
    ) -> Result<Delivery, ClientError> {
        let request = delivery_ref(workspace_id, delivery_id);
        let reply: DeliveryResponse = self.call(EVENTING, "ReplayDelivery", &request).await?;
        Ok(reply.delivery)
    }

    /// `ReplayFailedDeliveries`: replays, at most `max_deliveries` at a time, the deliveries
    /// since a time that ended in one of `statuses` and have no live or succeeded replay.
    pub async fn replay_failed_deliveries(
        &self,
        request: &ReplayFailedDeliveriesRequest,
    ) -> Result<ReplayFailedDeliveriesResponse, ClientError> {
        self.call(EVENTING, "ReplayFailedDeliveries", request).await
    }

    /// `CancelDeliveryRetry`: no further attempts; the delivery ends `canceled`.
    pub async fn cancel_delivery_retry(
        &self,
        workspace_id: &str,
        delivery_id: &str,
    ) -> Result<Delivery, ClientError> {
        let request = delivery_ref(workspace_id, delivery_id);
        let reply: DeliveryResponse = self.call(EVENTING, "CancelDeliveryRetry", &request).await?;
        Ok(reply.delivery)
    }

    /// `ListDestinations`: the workspace's destinations; secrets are never listed.
    pub async fn list_destinations(
        &self,
        workspace_id: &str,
    ) -> Result<Vec<Destination>, ClientError> {
        let request = ListDestinationsRequest {
            workspace_id: workspace_id.to_string(),
        };
        let reply: ListDestinationsResponse =
            self.call(EVENTING, "ListDestinations", &request).await?;
        Ok(reply.destinations)
    }

    /// `CreateDestination`: a destination subscriptions can share; its signing secret is in the
    /// reply, once.
    pub async fn create_destination(
        &self,
        request: &CreateDestinationRequest,
    ) -> Result<CreateDestinationResponse, ClientError> {
        self.call(EVENTING, "CreateDestination", request).await
    }

    /// `UpdateDestination`: fields left `None` keep their value; `settings` replace.
    pub async fn update_destination(
        &self,
        request: &UpdateDestinationRequest,
    ) -> Result<Destination, ClientError> {
        let reply: DestinationResponse = self.call(EVENTING, "UpdateDestination", request).await?;
        Ok(reply.destination)
    }

    /// `RotateDestinationSecret`: a new signing secret, shown once; the previous one still
    /// signs for 24 hours.
    pub async fn rotate_destination_secret(
        &self,
        workspace_id: &str,
        destination: &str,
    ) -> Result<RotateSecretResponse, ClientError> {
        let request = destination_ref(workspace_id, destination);
        self.call(EVENTING, "RotateDestinationSecret", &request)
            .await
    }

    /// `DeleteDestination`: refused while a subscription uses it.
    pub async fn delete_destination(
        &self,
        workspace_id: &str,
        destination: &str,
    ) -> Result<(), ClientError> {
        let request = destination_ref(workspace_id, destination);
        let _: Empty = self.call(EVENTING, "DeleteDestination", &request).await?;
        Ok(())
    }

    /// `ListProviders`: the destination kinds (`https`, `slack`, …) and the settings each
    /// takes.
    pub async fn list_webhook_providers(
        &self,
        workspace_id: &str,
    ) -> Result<Vec<Provider>, ClientError> {
        let request = ListProvidersRequest {
            workspace_id: workspace_id.to_string(),
        };
        let reply: ListProvidersResponse = self.call(EVENTING, "ListProviders", &request).await?;
        Ok(reply.providers)
    }
}

/// The MCP tools' forms (`svc_webhooks_…`).
impl AdminClient {
    /// `svc_webhooks_subscription_test`: the id of the queued test delivery.
    pub async fn webhooks_subscription_test(
        &self,
        workspace_id: &str,
        subscription: &str,
    ) -> Result<String, ClientError> {
        let reply = self.test_subscription(workspace_id, subscription).await?;
        Ok(reply.delivery_id)
    }

    /// `svc_webhooks_subscription_rotate_secret`: the new secret, shown once, and its key id.
    pub async fn webhooks_subscription_rotate_secret(
        &self,
        workspace_id: &str,
        subscription: &str,
    ) -> Result<RotateSecretResponse, ClientError> {
        self.rotate_subscription_secret(workspace_id, subscription)
            .await
    }

    /// `svc_webhooks_delivery_list`: the first page of deliveries in any of `statuses` (all
    /// when empty), optionally `since` a time or duration (`24h`) and of one subscription.
    pub async fn webhooks_delivery_list(
        &self,
        workspace_id: &str,
        statuses: &[DeliveryStatus],
        since: Option<&str>,
        subscription: Option<&str>,
    ) -> Result<ListDeliveriesResponse, ClientError> {
        let request = ListDeliveriesRequest {
            workspace_id: workspace_id.to_string(),
            statuses: statuses.to_vec(),
            start_time: since
                .map(crate::time::since)
                .transpose()?
                .unwrap_or_default(),
            subscription_id: subscription.unwrap_or_default().to_string(),
            ..Default::default()
        };
        self.list_deliveries(&request).await
    }

    /// `svc_webhooks_delivery_get`: a delivery, its attempts and, with `include_body`, its body.
    pub async fn webhooks_delivery_get(
        &self,
        workspace_id: &str,
        delivery_id: &str,
        include_body: bool,
    ) -> Result<GetDeliveryResponse, ClientError> {
        self.get_delivery(workspace_id, delivery_id, include_body)
            .await
    }

    /// `svc_webhooks_delivery_replay`: the new delivery.
    pub async fn webhooks_delivery_replay(
        &self,
        workspace_id: &str,
        delivery_id: &str,
    ) -> Result<Delivery, ClientError> {
        self.replay_delivery(workspace_id, delivery_id).await
    }

    /// `svc_webhooks_delivery_replay_failed`: replays the `failed` and `dlq` deliveries since
    /// `since` (an RFC 3339 time, or a duration back from now: `24h`, `30m`, `7d`), of one
    /// subscription (id or name) or of all; at most 500 per call, so it is safe to repeat.
    pub async fn webhooks_delivery_replay_failed(
        &self,
        workspace_id: &str,
        since: &str,
        subscription: Option<&str>,
    ) -> Result<ReplayFailedDeliveriesResponse, ClientError> {
        let request = ReplayFailedDeliveriesRequest {
            workspace_id: workspace_id.to_string(),
            since: crate::time::since(since)?,
            subscription_id: subscription.unwrap_or_default().to_string(),
            ..Default::default()
        };
        self.replay_failed_deliveries(&request).await
    }

    /// `svc_webhooks_delivery_cancel`: the delivery, now `canceled`.
    pub async fn webhooks_delivery_cancel(
        &self,
        workspace_id: &str,
        delivery_id: &str,
    ) -> Result<Delivery, ClientError> {
        self.cancel_delivery_retry(workspace_id, delivery_id).await
    }
}

fn subscription_ref(workspace_id: &str, subscription: &str) -> SubscriptionRefRequest {
    SubscriptionRefRequest {
        workspace_id: workspace_id.to_string(),
        subscription_id: subscription.to_string(),
    }
}

fn destination_ref(workspace_id: &str, destination: &str) -> DestinationRefRequest {
    DestinationRefRequest {
        workspace_id: workspace_id.to_string(),
        destination_id: destination.to_string(),
    }
}

fn delivery_ref(workspace_id: &str, delivery_id: &str) -> DeliveryRefRequest {
    DeliveryRefRequest {
        workspace_id: workspace_id.to_string(),
        delivery_id: delivery_id.to_string(),
    }
}
