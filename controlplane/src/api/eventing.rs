//! Webhooks (`svc.eventing.v1.EventingService`, DESIGN §10): subscriptions and destinations
//! here, deliveries in [`deliveries`]. A subscription is created with a new destination or
//! onto an existing one, atomically; a destination's signing secret is shown once, when it is
//! created or rotated, and sealed at rest. Nothing here is in a gateway snapshot, so writes do
//! not bump the workspace revision.

mod deliveries;

use portcullis_shared::api::eventing::*;
use portcullis_shared::api::workspace::Permission;
use portcullis_shared::api::Empty;
use portcullis_shared::webhook;
use serde_json::{Map, Value};

use super::{unary, views, Access, Ctx, Operation};
use crate::audit::webhook_types;
use crate::error::{exists, invalid, not_found, precondition, ApiResult};
use crate::store::webhooks::{self as rows, DestinationRow, SubscriptionRow};
use crate::store::{now_ms, Conn};
use crate::validate;
use crate::webhooks::send::{secret_aad, settings_aad};
use crate::webhooks::{filter::Filters, providers, target};

pub fn operations() -> Vec<(&'static str, Operation)> {
    let view = Access::Platform(Permission::EventingView);
    let manage = Access::Platform(Permission::EventingManage);
    let mut ops = vec![
        ("CreateSubscription", unary(manage, create_subscription)),
        ("GetSubscription", unary(view, get_subscription)),
        ("ListSubscriptions", unary(view, list_subscriptions)),
        ("UpdateSubscription", unary(manage, update_subscription)),
        ("DeleteSubscription", unary(manage, delete_subscription)),
        (
            "RotateSubscriptionSecret",
            unary(manage, rotate_subscription_secret),
        ),
        ("ListDestinations", unary(view, list_destinations)),
        ("CreateDestination", unary(manage, create_destination)),
        ("UpdateDestination", unary(manage, update_destination)),
        (
            "RotateDestinationSecret",
            unary(manage, rotate_destination_secret),
        ),
        ("DeleteDestination", unary(manage, delete_destination)),
        ("ListProviders", unary(view, list_providers)),
    ];
    ops.extend(deliveries::operations());
    ops
}

/// Most event types one subscription names.
const MAX_EVENT_TYPES: usize = 32;
/// How long a rotated-out secret still signs.
const ROTATION_GRACE_MS: i64 = 24 * 3600 * 1000;

pub async fn load_subscription(
    conn: &mut Conn,
    ws: &str,
    given: &str,
) -> ApiResult<SubscriptionRow> {
    if given.is_empty() {
        return Err(invalid(
            "subscription_id is required (the subscription's id or name)",
        ));
    }
    rows::find_subscription(conn, ws, given)
        .await?
        .ok_or_else(|| not_found("subscription", &validate::clip(given)))
}

pub async fn load_destination(conn: &mut Conn, ws: &str, given: &str) -> ApiResult<DestinationRow> {
    if given.is_empty() {
        return Err(invalid(
            "destination_id is required (the destination's id or name)",
        ));
    }
    rows::find_destination(conn, ws, given)
        .await?
        .ok_or_else(|| not_found("destination", &validate::clip(given)))
}

fn event_types(given: &[String]) -> ApiResult<Vec<String>> {
    let list = validate::string_list("event_types", given, MAX_EVENT_TYPES)?;
    if list.is_empty() {
        return Err(invalid("event_types: name at least one event type"));
    }
    for (i, t) in list.iter().enumerate() {
        if !webhook_types::is_known(t) {
            let known: Vec<&str> = webhook_types::TYPES.iter().map(|(t, _)| *t).collect();
            return Err(invalid(format!(
                "event_types[{i}]: unknown event type {t:?}; the types are {}",
                known.join(", ")
            )));
        }
    }
    Ok(list)
}

fn filters(given: &[String]) -> ApiResult<String> {
    Filters::parse(given).map_err(invalid)?;
    Ok(serde_json::to_string(given).unwrap_or_else(|_| "[]".into()))
}

/// A new destination row from an endpoint or a provider's settings, with a new secret.
fn new_destination(
    ctx: &Ctx,
    name: String,
    endpoint: &str,
    provider: &str,
    settings: &Map<String, Value>,
) -> ApiResult<(DestinationRow, String)> {
    let allow_private = ctx.app.webhooks.settings.allow_private;
    let provider = if provider.is_empty() {
        providers::HTTPS
    } else {
        provider
    };
    let id = uuid::Uuid::new_v4().to_string();
    let (endpoint, shown, sealed) = if provider == providers::HTTPS {
        if endpoint.is_empty() {
            return Err(invalid(
                "delivery_endpoint is required: the HTTPS URL events are posted to (or name a \
                 provider with its settings, or an existing destination_id)",
            ));
        }
        if !settings.is_empty() {
            return Err(invalid("settings: the https provider takes none"));
        }
        let url = target::check_url(endpoint, allow_private)
            .map_err(|e| invalid(format!("delivery_endpoint {e}")))?;
        (url.to_string(), Map::new(), None)
    } else {
        if !endpoint.is_empty() {
            return Err(invalid(format!(
                "delivery_endpoint is for https destinations; the {provider} provider takes \
                 its settings"
            )));
        }
        let s = providers::check_settings(provider, settings, allow_private).map_err(invalid)?;
        let sealed = seal_settings(ctx, &id, &s.sealed)?;
        (String::new(), s.shown, sealed)
    };
    let (key_id, secret) = webhook::new_secret();
    let now = now_ms();
    let sealed_secret = seal(ctx, &secret_aad(&id, &key_id), &secret)?;
    let row = DestinationRow {
        sealed_settings: sealed,
        secret: sealed_secret,
        id,
        workspace_id: ctx.workspace_id().to_string(),
        name,
        provider: provider.to_string(),
        endpoint,
        settings: Value::Object(shown).to_string(),
        key_id,
        previous_key_id: None,
        previous_secret: None,
        previous_until: None,
        enabled: 1,
        disabled_reason: String::new(),
        created_at: now,
        updated_at: now,
    };
    Ok((row, secret))
}

fn seal_settings(ctx: &Ctx, id: &str, sealed: &Map<String, Value>) -> ApiResult<Option<String>> {
    if sealed.is_empty() {
        return Ok(None);
    }
    let text = Value::Object(sealed.clone()).to_string();
    Ok(Some(seal(ctx, &settings_aad(id), &text)?))
}

fn seal(ctx: &Ctx, aad: &str, text: &str) -> ApiResult<String> {
    Ok(ctx
        .store()
        .cipher()
        .seal(aad, text.as_bytes())
        .map_err(crate::store::StoreError::from)?)
}

async fn ensure_destination_name_free(conn: &mut Conn, ws: &str, name: &str) -> ApiResult<()> {
    if rows::find_destination(conn, ws, name).await?.is_some() {
        return Err(exists(format!(
            "a destination named '{name}' already exists"
        )));
    }
    Ok(())
}

async fn create_subscription(
    ctx: Ctx,
    req: CreateSubscriptionRequest,
) -> ApiResult<CreateSubscriptionResponse> {
    let name = validate::name("name", &req.name)?;
    let types = event_types(&req.event_types)?;
    let filters = filters(&req.filters)?;
    let new = !req.delivery_endpoint.is_empty() || !req.provider.is_empty();
    if !req.destination_id.is_empty() && new {
        return Err(invalid(
            "give delivery_endpoint (or provider and settings) for a new destination, or \
             destination_id for an existing one, not both",
        ));
    }
    if req.destination_id.is_empty() && !new {
        return Err(invalid(
            "delivery_endpoint is required: the HTTPS URL events are posted to (or name a \
             provider with its settings, or an existing destination_id)",
        ));
    }
    let ws = ctx.workspace_id().to_string();
    let created = if new {
        Some(new_destination(
            &ctx,
            name.clone(),
            &req.delivery_endpoint,
            &req.provider,
            &req.settings,
        )?)
    } else {
        None
    };
    let mut tx = ctx.store().write_unscoped().await?;
    if rows::find_subscription(tx.conn(), &ws, &name)
        .await?
        .is_some()
    {
        return Err(exists(format!(
            "a subscription named '{name}' already exists"
        )));
    }
    let destination = match &created {
        Some((row, _)) => {
            ensure_destination_name_free(tx.conn(), &ws, &row.name).await?;
            rows::insert_destination(tx.conn(), row).await?;
            row.clone()
        }
        None => load_destination(tx.conn(), &ws, &req.destination_id).await?,
    };
    let now = now_ms();
    let row = SubscriptionRow {
        id: uuid::Uuid::new_v4().to_string(),
        workspace_id: ws,
        name,
        destination_id: destination.id.clone(),
        event_types: serde_json::to_string(&types).unwrap_or_default(),
        filters,
        enabled: i64::from(req.enabled.unwrap_or(true)),
        created_at: now,
        updated_at: now,
    };
    rows::insert_subscription(tx.conn(), &row).await?;
    tx.commit().await?;
    tracing::info!(subscription_id = %row.id, destination_id = %destination.id, "Webhook subscription created.");
    Ok(CreateSubscriptionResponse {
        subscription: subscription_view(row),
        destination: destination_view(destination),
        signing_secret: created.map(|(_, secret)| secret),
    })
}

async fn get_subscription(
    ctx: Ctx,
    req: SubscriptionRefRequest,
) -> ApiResult<SubscriptionResponse> {
    let mut conn = ctx.store().read().await?;
    let row = load_subscription(&mut conn, ctx.workspace_id(), &req.subscription_id).await?;
    Ok(SubscriptionResponse {
        subscription: subscription_view(row),
    })
}

async fn list_subscriptions(
    ctx: Ctx,
    _req: ListSubscriptionsRequest,
) -> ApiResult<ListSubscriptionsResponse> {
    let mut conn = ctx.store().read().await?;
    let list = rows::list_subscriptions(&mut conn, ctx.workspace_id()).await?;
    Ok(ListSubscriptionsResponse {
        subscriptions: list.into_iter().map(subscription_view).collect(),
    })
}

async fn update_subscription(
    ctx: Ctx,
    req: UpdateSubscriptionRequest,
) -> ApiResult<SubscriptionResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write_unscoped().await?;
    let mut row = load_subscription(tx.conn(), &ws, &req.subscription_id).await?;
    if let Some(name) = &req.name {
        let name = validate::name("name", name)?;
        if name != row.name {
            if rows::find_subscription(tx.conn(), &ws, &name)
                .await?
                .is_some()
            {
                return Err(exists(format!(
                    "a subscription named '{name}' already exists"
                )));
            }
            row.name = name;
        }
    }
    if let Some(types) = &req.event_types {
        row.event_types = serde_json::to_string(&event_types(types)?).unwrap_or_default();
    }
    if let Some(list) = &req.filters {
        row.filters = filters(list)?;
    }
    if let Some(enabled) = req.enabled {
        row.enabled = i64::from(enabled);
    }
    row.updated_at = now_ms();
    rows::update_subscription(tx.conn(), &row).await?;
    tx.commit().await?;
    Ok(SubscriptionResponse {
        subscription: subscription_view(row),
    })
}

/// Deletes the subscription and cancels its live deliveries; its destination stays.
async fn delete_subscription(ctx: Ctx, req: SubscriptionRefRequest) -> ApiResult<Empty> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write_unscoped().await?;
    let row = load_subscription(tx.conn(), &ws, &req.subscription_id).await?;
    rows::cancel_subscription(tx.conn(), &row.id, now_ms()).await?;
    rows::delete_subscription(tx.conn(), &row.id).await?;
    tx.commit().await?;
    Ok(Empty {})
}

async fn rotate_subscription_secret(
    ctx: Ctx,
    req: SubscriptionRefRequest,
) -> ApiResult<RotateSecretResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write_unscoped().await?;
    let sub = load_subscription(tx.conn(), &ws, &req.subscription_id).await?;
    let dest = load_destination(tx.conn(), &ws, &sub.destination_id).await?;
    let reply = rotate(&ctx, tx.conn(), dest).await?;
    tx.commit().await?;
    Ok(reply)
}

async fn rotate_destination_secret(
    ctx: Ctx,
    req: DestinationRefRequest,
) -> ApiResult<RotateSecretResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write_unscoped().await?;
    let dest = load_destination(tx.conn(), &ws, &req.destination_id).await?;
    let reply = rotate(&ctx, tx.conn(), dest).await?;
    tx.commit().await?;
    Ok(reply)
}

/// A new current secret; the one it replaces signs too for 24 hours (a still older one
/// stops now).
async fn rotate(
    ctx: &Ctx,
    conn: &mut Conn,
    mut dest: DestinationRow,
) -> ApiResult<RotateSecretResponse> {
    let (key_id, secret) = webhook::new_secret();
    let now = now_ms();
    dest.previous_key_id = Some(std::mem::take(&mut dest.key_id));
    dest.previous_secret = Some(std::mem::take(&mut dest.secret));
    dest.previous_until = Some(now + ROTATION_GRACE_MS);
    dest.secret = seal(ctx, &secret_aad(&dest.id, &key_id), &secret)?;
    dest.key_id = key_id.clone();
    dest.updated_at = now;
    rows::update_destination(conn, &dest).await?;
    tracing::info!(destination_id = %dest.id, key_id, "Webhook signing secret rotated.");
    Ok(RotateSecretResponse {
        destination_id: dest.id,
        key_id,
        signing_secret: secret,
    })
}

async fn list_destinations(
    ctx: Ctx,
    _req: ListDestinationsRequest,
) -> ApiResult<ListDestinationsResponse> {
    let mut conn = ctx.store().read().await?;
    let list = rows::list_destinations(&mut conn, ctx.workspace_id()).await?;
    Ok(ListDestinationsResponse {
        destinations: list.into_iter().map(destination_view).collect(),
    })
}

async fn create_destination(
    ctx: Ctx,
    req: CreateDestinationRequest,
) -> ApiResult<CreateDestinationResponse> {
    let name = if req.name.is_empty() {
        return Err(invalid("name is required"));
    } else {
        validate::name("name", &req.name)?
    };
    let (row, secret) = new_destination(
        &ctx,
        name,
        &req.delivery_endpoint,
        &req.provider,
        &req.settings,
    )?;
    let mut tx = ctx.store().write_unscoped().await?;
    ensure_destination_name_free(tx.conn(), ctx.workspace_id(), &row.name).await?;
    rows::insert_destination(tx.conn(), &row).await?;
    tx.commit().await?;
    Ok(CreateDestinationResponse {
        destination: destination_view(row),
        signing_secret: secret,
    })
}

async fn update_destination(
    ctx: Ctx,
    req: UpdateDestinationRequest,
) -> ApiResult<DestinationResponse> {
    let ws = ctx.workspace_id().to_string();
    let allow_private = ctx.app.webhooks.settings.allow_private;
    let mut tx = ctx.store().write_unscoped().await?;
    let mut row = load_destination(tx.conn(), &ws, &req.destination_id).await?;
    if let Some(name) = &req.name {
        let name = validate::name("name", name)?;
        if name != row.name {
            ensure_destination_name_free(tx.conn(), &ws, &name).await?;
            row.name = name;
        }
    }
    if let Some(endpoint) = &req.delivery_endpoint {
        if row.provider != providers::HTTPS {
            return Err(invalid(format!(
                "delivery_endpoint is for https destinations; this one is {}: update its settings",
                row.provider
            )));
        }
        let url = target::check_url(endpoint, allow_private)
            .map_err(|e| invalid(format!("delivery_endpoint {e}")))?;
        row.endpoint = url.to_string();
    }
    if let Some(settings) = &req.settings {
        if row.provider == providers::HTTPS {
            return Err(invalid("settings: the https provider takes none"));
        }
        let s =
            providers::check_settings(&row.provider, settings, allow_private).map_err(invalid)?;
        row.settings = Value::Object(s.shown).to_string();
        row.sealed_settings = seal_settings(&ctx, &row.id, &s.sealed)?;
    }
    if let Some(enabled) = req.enabled {
        row.enabled = i64::from(enabled);
        if enabled {
            row.disabled_reason.clear();
        }
    }
    row.updated_at = now_ms();
    rows::update_destination(tx.conn(), &row).await?;
    tx.commit().await?;
    Ok(DestinationResponse {
        destination: destination_view(row),
    })
}

/// Refused while a subscription sends to it; its live deliveries are canceled.
async fn delete_destination(ctx: Ctx, req: DestinationRefRequest) -> ApiResult<Empty> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write_unscoped().await?;
    let row = load_destination(tx.conn(), &ws, &req.destination_id).await?;
    let users = rows::subscriptions_of(tx.conn(), &row.id).await?;
    if users > 0 {
        return Err(precondition(format!(
            "destination '{}' is used by {users} subscription(s); delete them or move them first",
            row.name
        )));
    }
    rows::fail_destination(tx.conn(), &row.id, "the destination was deleted", now_ms()).await?;
    rows::delete_destination(tx.conn(), &row.id).await?;
    tx.commit().await?;
    Ok(Empty {})
}

async fn list_providers(_ctx: Ctx, _req: ListProvidersRequest) -> ApiResult<ListProvidersResponse> {
    Ok(ListProvidersResponse {
        providers: providers::list(),
    })
}

pub fn subscription_view(row: SubscriptionRow) -> Subscription {
    Subscription {
        subscription_id: row.id,
        workspace_id: row.workspace_id,
        name: row.name,
        event_types: serde_json::from_str(&row.event_types).unwrap_or_default(),
        filters: serde_json::from_str(&row.filters).unwrap_or_default(),
        destination_id: row.destination_id,
        enabled: row.enabled != 0,
        created_at: views::ts(row.created_at),
        updated_at: views::ts(row.updated_at),
    }
}

pub fn destination_view(row: DestinationRow) -> Destination {
    Destination {
        destination_id: row.id,
        workspace_id: row.workspace_id,
        name: row.name,
        provider: row.provider,
        delivery_endpoint: row.endpoint,
        settings: serde_json::from_str(&row.settings).unwrap_or_default(),
        key_id: row.key_id,
        enabled: row.enabled != 0,
        disabled_reason: row.disabled_reason,
        created_at: views::ts(row.created_at),
        updated_at: views::ts(row.updated_at),
    }
}
