//! The member loop: order → plan → reserve → send → relay → settle, failing over before any
//! byte reaches the caller. It knows no JSON: plans translate, the relay reads usage.

use super::api::Inbound;
use super::record::Served;
use super::relay::Relay;
use super::upstream::{self, Attempt};
use super::{members, plan, quota};
use crate::error::GatewayError;
use crate::llm::table::{ModelEntry, Target};
use crate::request::RequestCtx;
use crate::session::Session;
use crate::Gateway;

/// Calls the target's members in order until one answers.
pub async fn call_members<'g>(
    gw: &'g Gateway,
    session: &mut Session,
    rc: &RequestCtx<'_>,
    inbound: &Inbound,
    target: &Target,
    served: &mut Served<'g>,
) -> Result<(), GatewayError> {
    let mut last: Option<GatewayError> = None;
    for model in members::order(target) {
        let plan = match plan::plan(inbound, &model, rc.request_id, gw.config.cloud_identity) {
            Ok(plan) => person(gw, rc, &model, plan).await,
            Err(e) => Err(e),
        };
        let plan = match plan {
            Ok(plan) => plan,
            Err(e) => {
                last = Some(e);
                continue;
            }
        };
        // Quotas: hold the worst case before calling (no quotas, nothing to do).
        let reservation = if rc.quotas.is_empty() {
            None
        } else {
            match quota::reserve(gw, rc, target, &model, plan.body.len(), &inbound.limits).await {
                Ok(held) => held,
                Err(quota::Blocked::All(e)) => {
                    quota::refused(gw, rc, &e);
                    return Err(e);
                }
                Err(quota::Blocked::Member(e)) => {
                    quota::refused(gw, rc, &e);
                    last = Some(e);
                    continue;
                }
            }
        };
        served.attempts += 1;
        served.model = Some(model.clone());
        served.translation = Some(plan.translation);
        // The hold rides in `served` while the member is called, so a request dropped midway
        // (the gateway stopping past its grace period) still charges it.
        served.held = reservation;
        match upstream::send(gw, &model, &plan, inbound.stream).await {
            Attempt::Success(response) => {
                model.health.record_success();
                served.upstream_status = response.status().as_u16();
                let (_, target_id, _) = target.describe();
                let relay = Relay {
                    gw,
                    rc,
                    inbound,
                    plan: &plan,
                    model: &model,
                    guard: rc.guards.output(target_id, &model.id).cloned(),
                };
                let mut relayed = relay.relay(session, response).await;
                if let Some(guarded) = relayed.guarded.take() {
                    let resource = crate::audit::resource("model", &model.id, &model.name);
                    crate::audit::guards::record_stage(
                        gw,
                        rc,
                        &mut served.guards,
                        &guarded.tally,
                        &resource,
                    );
                    served.guards.delivered = Some(guarded.delivered);
                }
                settle(gw, rc, &model, served, relayed.usage).await;
                return relayed.failure.map_or(Ok(()), Err);
            }
            Attempt::Final(failed) => {
                // The upstream refused the request itself: another member would too. Nothing
                // was spent: the hold is released.
                served.held = None;
                served.upstream_status = failed.status;
                return Err(failed.error);
            }
            Attempt::Retry(failed) => {
                served.held = None;
                served.upstream_status = failed.status;
                model.health.record_failure();
                tracing::warn!(request_id = rc.request_id, model = %model.name, error = %failed.error, "Upstream member failed; trying the next.");
                last = Some(failed.error);
            }
        }
    }
    Err(last.unwrap_or_else(|| {
        GatewayError::Upstream(format!("pool '{}' has no members to call", inbound.model))
    }))
}

/// For a per-user model, the calling person's credential (or where to provide it).
async fn person(
    gw: &Gateway,
    rc: &RequestCtx<'_>,
    model: &ModelEntry,
    mut plan: plan::Plan,
) -> Result<plan::Plan, GatewayError> {
    if !matches!(model.credential, crate::llm::table::Credential::PerUser) {
        return Ok(plan);
    }
    let subject = crate::peruser::subject(rc, &model.name)?;
    let owner = portcullis_shared::snapshot::CredentialOwner::Model;
    match gw
        .credentials
        .lookup(gw, owner, &model.id, (&subject, &rc.agent.id))
        .await?
    {
        Ok(headers) => {
            plan.user = Some(headers);
            Ok(plan)
        }
        Err(missing) => {
            gw.metrics.credential_required();
            Err(GatewayError::CredentialRequired(Box::new(missing)))
        }
    }
}

/// The upstream answered: the call is charged, even if the answer broke off or the caller
/// went away — its metered cost, or with no usage reported its worst case, never zero.
async fn settle(
    gw: &Gateway,
    rc: &RequestCtx<'_>,
    model: &ModelEntry,
    served: &mut Served<'_>,
    usage: Option<portcullis_shared::prices::Usage>,
) {
    served.usage = usage;
    let Some(held) = served.held.take() else {
        return;
    };
    let actual = match (&model.price, usage) {
        (Some((_, price)), Some(u)) => price.cost_micros(&u),
        _ => held.held_micros(),
    };
    let (charges, crossings) = held.settle(actual).await;
    served.charges = charges;
    for c in crossings {
        gw.audit.emit(quota::threshold_event(rc, &c));
    }
}
