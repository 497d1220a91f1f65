//! `portcullis webhook subscription|destination|delivery|providers`. A signing secret is
//! printed once, when a destination is created or its secret rotated.

mod deliveries;

use portcullis_shared::api::eventing::*;
use portcullis_shared::api::service::EVENTING;

use crate::args::{DestinationCmd, SubscriptionCmd, Target, WebhookCmd};
use crate::ctx::{Ctx, Reply};
use crate::output::{self, Lines};
use crate::parse;

pub async fn run(ctx: &Ctx, cmd: WebhookCmd) -> anyhow::Result<()> {
    match cmd {
        WebhookCmd::Subscription(c) => subscription(ctx, c).await,
        WebhookCmd::Destination(c) => destination(ctx, c).await,
        WebhookCmd::Delivery(c) => deliveries::run(ctx, c).await,
        WebhookCmd::Providers => providers(ctx).await,
    }
}

async fn subscription(ctx: &Ctx, cmd: SubscriptionCmd) -> anyhow::Result<()> {
    let workspace_id = ctx.ws().await?;
    let reply: Reply<SubscriptionResponse> = match cmd {
        SubscriptionCmd::Create {
            name,
            name_flag,
            event_types,
            filters,
            target,
            disabled,
        } => {
            let req = create_subscription_request(
                workspace_id,
                name.or(name_flag).unwrap_or_default(),
                event_types,
                filters,
                target,
                disabled,
            )?;
            let reply: Reply<CreateSubscriptionResponse> =
                ctx.send(EVENTING, "CreateSubscription", &req).await?;
            ctx.print(&reply, created_subscription);
            return Ok(());
        }
        SubscriptionCmd::Get { subscription } => {
            let req = subscription_ref(workspace_id, subscription);
            ctx.send(EVENTING, "GetSubscription", &req).await?
        }
        SubscriptionCmd::List => {
            let req = ListSubscriptionsRequest { workspace_id };
            let reply: Reply<ListSubscriptionsResponse> =
                ctx.send(EVENTING, "ListSubscriptions", &req).await?;
            ctx.print(&reply, subscription_table);
            return Ok(());
        }
        SubscriptionCmd::Update {
            subscription,
            name,
            event_types,
            filters,
            clear_filters,
            enable,
            disable,
        } => {
            let req = UpdateSubscriptionRequest {
                workspace_id,
                subscription_id: subscription,
                name,
                event_types: parse::list_change(event_types, false),
                filters: parse::list_change(filters, clear_filters),
                enabled: parse::toggle(enable, disable),
            };
            ctx.send(EVENTING, "UpdateSubscription", &req).await?
        }
        SubscriptionCmd::Delete { subscription } => {
            let message = format!("Deleted subscription {subscription}.");
            let req = subscription_ref(workspace_id, subscription);
            return ctx
                .send_done(EVENTING, "DeleteSubscription", &req, &message)
                .await;
        }
        SubscriptionCmd::Test { subscription } => {
            let req = subscription_ref(workspace_id, subscription);
            let reply: Reply<TestSubscriptionResponse> =
                ctx.send(EVENTING, "TestSubscription", &req).await?;
            ctx.print(&reply, queued_test);
            return Ok(());
        }
        SubscriptionCmd::RotateSecret { subscription } => {
            let req = subscription_ref(workspace_id, subscription);
            let reply: Reply<RotateSecretResponse> =
                ctx.send(EVENTING, "RotateSubscriptionSecret", &req).await?;
            ctx.print(&reply, rotated);
            return Ok(());
        }
    };
    ctx.print(&reply, |r| show_subscription(&r.subscription, None));
    Ok(())
}

/// A created subscription, with its destination and, when one was created for it, the
/// destination's signing secret.
fn created_subscription(r: &CreateSubscriptionResponse) {
    show_subscription(&r.subscription, Some(&r.destination));
    if let Some(secret) = &r.signing_secret {
        signing_secret(&r.destination.key_id, secret);
    }
}

/// The test delivery `subscription test` queued, and how to follow it.
fn queued_test(r: &TestSubscriptionResponse) {
    output::line(&format!(
        "Queued test delivery {id}; see how it went with `portcullis webhook \
         delivery get {id}`.",
        id = r.delivery_id
    ));
}

fn subscription_table(r: &ListSubscriptionsResponse) {
    let rows = r
        .subscriptions
        .iter()
        .map(|s| {
            vec![
                s.name.clone(),
                s.subscription_id.clone(),
                output::join(&s.event_types),
                output::join(&s.filters),
                s.destination_id.clone(),
                output::yes(s.enabled).to_string(),
            ]
        })
        .collect();
    output::table(
        &[
            "name",
            "id",
            "event types",
            "filters",
            "destination",
            "enabled",
        ],
        rows,
    );
}

fn create_subscription_request(
    workspace_id: String,
    name: String,
    event_types: Vec<String>,
    filters: Vec<String>,
    target: Target,
    disabled: bool,
) -> anyhow::Result<CreateSubscriptionRequest> {
    Ok(CreateSubscriptionRequest {
        workspace_id,
        name,
        event_types,
        filters,
        delivery_endpoint: target.endpoint.unwrap_or_default(),
        destination_id: target.destination.unwrap_or_default(),
        provider: target.provider.unwrap_or_default(),
        settings: parse::pairs("setting", &target.settings)?,
        enabled: disabled.then_some(false),
    })
}

async fn destination(ctx: &Ctx, cmd: DestinationCmd) -> anyhow::Result<()> {
    let workspace_id = ctx.ws().await?;
    let reply: Reply<DestinationResponse> = match cmd {
        DestinationCmd::Create {
            name,
            name_flag,
            endpoint,
            provider,
            settings,
        } => {
            let req = CreateDestinationRequest {
                workspace_id,
                name: name.or(name_flag).unwrap_or_default(),
                delivery_endpoint: endpoint.unwrap_or_default(),
                provider: provider.unwrap_or_default(),
                settings: parse::pairs("setting", &settings)?,
            };
            let reply: Reply<CreateDestinationResponse> =
                ctx.send(EVENTING, "CreateDestination", &req).await?;
            ctx.print(&reply, created_destination);
            return Ok(());
        }
        DestinationCmd::List => {
            let req = ListDestinationsRequest { workspace_id };
            let reply: Reply<ListDestinationsResponse> =
                ctx.send(EVENTING, "ListDestinations", &req).await?;
            ctx.print(&reply, destination_table);
            return Ok(());
        }
        DestinationCmd::Update {
            destination,
            name,
            endpoint,
            settings,
            enable,
            disable,
        } => {
            let settings = (!settings.is_empty())
                .then(|| parse::pairs("setting", &settings))
                .transpose()?;
            let req = UpdateDestinationRequest {
                workspace_id,
                destination_id: destination,
                name,
                delivery_endpoint: endpoint,
                settings,
                enabled: parse::toggle(enable, disable),
            };
            ctx.send(EVENTING, "UpdateDestination", &req).await?
        }
        DestinationCmd::Delete { destination } => {
            let message = format!("Deleted destination {destination}.");
            let req = destination_ref(workspace_id, destination);
            return ctx
                .send_done(EVENTING, "DeleteDestination", &req, &message)
                .await;
        }
        DestinationCmd::RotateSecret { destination } => {
            let req = destination_ref(workspace_id, destination);
            let reply: Reply<RotateSecretResponse> =
                ctx.send(EVENTING, "RotateDestinationSecret", &req).await?;
            ctx.print(&reply, rotated);
            return Ok(());
        }
    };
    ctx.print(&reply, |r| show_destination(&r.destination));
    Ok(())
}

/// A created destination and its signing secret, shown this once.
fn created_destination(r: &CreateDestinationResponse) {
    show_destination(&r.destination);
    signing_secret(&r.destination.key_id, &r.signing_secret);
}

fn destination_table(r: &ListDestinationsResponse) {
    let rows = r
        .destinations
        .iter()
        .map(|d| {
            vec![
                d.name.clone(),
                d.destination_id.clone(),
                d.provider.clone(),
                or_dash(&d.delivery_endpoint),
                enabled(d),
            ]
        })
        .collect();
    output::table(&["name", "id", "provider", "endpoint", "enabled"], rows);
}

async fn providers(ctx: &Ctx) -> anyhow::Result<()> {
    let req = ListProvidersRequest {
        workspace_id: ctx.ws().await?,
    };
    let reply: Reply<ListProvidersResponse> = ctx.send(EVENTING, "ListProviders", &req).await?;
    ctx.print(&reply, |r| {
        for p in &r.providers {
            output::line(&format!("{}: {}", p.provider, p.display_name));
            output::line(&format!("  {}", p.description));
            for s in &p.settings {
                let mut traits = Vec::new();
                if s.required {
                    traits.push("required");
                }
                if s.secret {
                    traits.push("secret, never shown");
                }
                let traits = if traits.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", traits.join(", "))
                };
                output::line(&format!(
                    "  --setting {}=…{traits}: {}",
                    s.name, s.description
                ));
            }
        }
    });
    Ok(())
}

fn show_subscription(s: &Subscription, destination: Option<&Destination>) {
    let destination = match destination {
        Some(d) => format!("{} ({})", d.name, d.destination_id),
        None => s.destination_id.clone(),
    };
    Lines::new()
        .add("name", &s.name)
        .add("subscription_id", &s.subscription_id)
        .add("event_types", output::join(&s.event_types))
        .add("filters", output::join(&s.filters))
        .add("destination", destination)
        .add("enabled", output::yes(s.enabled))
        .print();
}

fn show_destination(d: &Destination) {
    Lines::new()
        .add("name", &d.name)
        .add("destination_id", &d.destination_id)
        .add("provider", &d.provider)
        .add("endpoint", &d.delivery_endpoint)
        .opt(
            "settings",
            (!d.settings.is_empty()).then(|| serde_json::Value::from(d.settings.clone())),
        )
        .add("key_id", &d.key_id)
        .add("enabled", enabled(d))
        .print();
}

/// `yes`, or `no` with the reason deliveries stopped when there is one.
fn enabled(d: &Destination) -> String {
    match (d.enabled, d.disabled_reason.as_str()) {
        (true, _) => "yes".into(),
        (false, "") => "no".into(),
        (false, reason) => format!("no ({reason})"),
    }
}

fn signing_secret(key_id: &str, secret: &str) {
    output::secret(&format!("signing secret {key_id}"), secret);
}

fn rotated(r: &RotateSecretResponse) {
    Lines::new()
        .add("destination_id", &r.destination_id)
        .add("key_id", &r.key_id)
        .print();
    signing_secret(&r.key_id, &r.signing_secret);
    output::line("The previous secret still signs for 24 hours.");
}

fn or_dash(s: &str) -> String {
    if s.is_empty() {
        "-".into()
    } else {
        s.to_string()
    }
}

fn subscription_ref(workspace_id: String, subscription: String) -> SubscriptionRefRequest {
    SubscriptionRefRequest {
        workspace_id,
        subscription_id: subscription,
    }
}

fn destination_ref(workspace_id: String, destination: String) -> DestinationRefRequest {
    DestinationRefRequest {
        workspace_id,
        destination_id: destination,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_provider_target_sends_its_settings_and_disabled_sends_enabled_false() {
        let target = Target {
            provider: Some("slack".into()),
            settings: vec!["webhook_url=https://hooks.slack.com/services/T0/B0/x".into()],
            ..Default::default()
        };
        let req = create_subscription_request(
            "w".into(),
            "spend".into(),
            vec!["quota.exceeded".into()],
            vec![],
            target,
            true,
        )
        .unwrap();
        assert_eq!(
            serde_json::to_value(&req).unwrap(),
            json!({
                "workspace_id": "w", "name": "spend", "event_types": ["quota.exceeded"],
                "filters": [], "delivery_endpoint": "", "destination_id": "",
                "provider": "slack",
                "settings": {"webhook_url": "https://hooks.slack.com/services/T0/B0/x"},
                "enabled": false
            })
        );
        let target = Target {
            provider: Some("slack".into()),
            settings: vec!["webhook_url".into()],
            ..Default::default()
        };
        assert!(
            create_subscription_request("w".into(), "n".into(), vec![], vec![], target, false)
                .is_err()
        );
    }
}
