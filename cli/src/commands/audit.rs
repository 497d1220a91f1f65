//! `portcullis audit query|get|tail`.

use anyhow::{anyhow, bail};
use portcullis_shared::api::service::AUDIT;
use portcullis_shared::audit::{
    self, AuditEventV1, PayloadFilter, QueryEventsRequest, QueryEventsResponse,
};

use crate::args::{AuditCmd, StreamFilters};
use crate::ctx::{Ctx, Reply};
use crate::output::{self, Lines};
use crate::parse::time_arg;

pub async fn run(ctx: &Ctx, cmd: AuditCmd) -> anyhow::Result<()> {
    match cmd {
        AuditCmd::Query {
            filters,
            agents,
            since,
            until,
            trace_id,
            activity_id,
            resource_id,
            resource_kind,
            limit,
            page_token,
        } => {
            let mut req = stream_request(filters)?;
            req.workspace_id = Some(ctx.ws().await?);
            let mut agent_ids = Vec::new();
            for a in agents {
                agent_ids.push(ctx.agent_id(&a).await?);
            }
            req.agent_ids = agent_ids;
            req.start_time = since.as_deref().map(time_arg).transpose()?;
            req.end_time = until.as_deref().map(time_arg).transpose()?;
            req.trace_id = trace_id;
            req.activity_id = activity_id;
            req.primary_resource_id = resource_id;
            req.primary_resource_kind = resource_kind;
            req.page_size = limit;
            req.page_token = page_token;
            let reply: Reply<QueryEventsResponse> = ctx.send(AUDIT, "QueryEvents", &req).await?;
            ctx.print(&reply, |r| {
                table(&r.events);
                if let Some(t) = &r.next_page_token {
                    output::line(&format!("next page: --page-token {t}"));
                }
            });
        }
        AuditCmd::Get { event_id } => {
            let workspace_id = ctx.ws().await?;
            let event = ctx.client.get_event(&workspace_id, &event_id).await?;
            if ctx.json {
                output::json(&serde_json::to_value(&event)?);
            } else {
                show(&event);
            }
        }
        AuditCmd::Tail { filters } => {
            let req = stream_request(filters)?;
            let mut stream = ctx.client.stream_events(&req).await?;
            if !ctx.json {
                eprintln_line("Waiting for events (Ctrl-C to stop)…");
            }
            while let Some(event) = stream.next().await {
                let event = event?;
                if ctx.json {
                    println_compact(&event)?;
                } else {
                    output::line(&row(&event).join("  "));
                }
            }
        }
    }
    Ok(())
}

fn eprintln_line(text: &str) {
    #[allow(clippy::print_stderr)]
    {
        eprintln!("{text}");
    }
}

fn println_compact(event: &AuditEventV1) -> anyhow::Result<()> {
    output::line(&serde_json::to_string(event)?);
    Ok(())
}

/// The filters a tail may use too, with short spellings expanded to proto JSON names.
fn stream_request(f: StreamFilters) -> anyhow::Result<QueryEventsRequest> {
    let mut payload_filters: Vec<PayloadFilter> = Vec::new();
    for p in f.payload {
        let (field, value) = p
            .split_once('=')
            .ok_or_else(|| anyhow!("--payload takes field=value, got {p:?}"))?;
        match payload_filters.iter_mut().find(|x| x.field == field) {
            Some(existing) => existing.values.push(value.to_string()),
            None => payload_filters.push(PayloadFilter {
                field: field.to_string(),
                values: vec![value.to_string()],
            }),
        }
    }
    Ok(QueryEventsRequest {
        event_types: f.event_types,
        results: f
            .results
            .iter()
            .map(|r| result_name(r))
            .collect::<anyhow::Result<_>>()?,
        actor: f.actor,
        producer_service: f.producer,
        request_surface: f.surface.as_deref().map(surface_name).transpose()?,
        operation: f.operation,
        resource: f.resource,
        payload_filters,
        ..Default::default()
    })
}

fn result_name(r: &str) -> anyhow::Result<String> {
    Ok(match r.to_ascii_lowercase().trim_start_matches("result_") {
        "allowed" => audit::results::ALLOWED,
        "denied" => audit::results::DENIED,
        "error" => audit::results::ERROR,
        _ => bail!("--result is one of allowed, denied, error (got {r:?})"),
    }
    .to_string())
}

fn surface_name(s: &str) -> anyhow::Result<String> {
    Ok(match s
        .to_ascii_lowercase()
        .trim_start_matches("initiator_surface_")
    {
        "llm" | "gateway_llm" => audit::surfaces::GATEWAY_LLM,
        "mcp" | "gateway_mcp" => audit::surfaces::GATEWAY_MCP,
        "management" | "management_api" | "mgmt" => audit::surfaces::MANAGEMENT_API,
        "internal" | "gateway_internal" => audit::surfaces::GATEWAY_INTERNAL,
        _ => bail!("--surface is one of llm, mcp, management, internal (got {s:?})"),
    }
    .to_string())
}

fn short_result(r: &str) -> String {
    r.trim_start_matches("RESULT_").to_ascii_lowercase()
}

fn row(e: &AuditEventV1) -> Vec<String> {
    let resource = if e.resource.name.is_empty() {
        e.resource.id.clone()
    } else {
        e.resource.name.clone()
    };
    let actor = if e.actor.display.is_empty() {
        e.actor.id.clone()
    } else {
        e.actor.display.clone()
    };
    vec![
        e.time.clone(),
        e.event_type.clone(),
        short_result(&e.result),
        actor,
        format!("{}:{resource}", e.resource.kind),
        e.event_id.clone(),
    ]
}

fn table(events: &[AuditEventV1]) {
    if events.is_empty() {
        output::line("No events.");
        return;
    }
    output::table(
        &["time", "type", "result", "actor", "resource", "event id"],
        events.iter().map(row).collect(),
    );
}

fn show(e: &AuditEventV1) {
    Lines::new()
        .add("event_id", &e.event_id)
        .add("type", &e.event_type)
        .add("time", &e.time)
        .add("result", short_result(&e.result))
        .add(
            "actor",
            format!("{} {} {}", e.actor.kind, e.actor.id, e.actor.display).trim(),
        )
        .opt(
            "on behalf of",
            e.on_behalf_of
                .as_ref()
                .map(|a| format!("{} {}", a.id, a.email)),
        )
        .add(
            "resource",
            format!("{} {} {}", e.resource.kind, e.resource.id, e.resource.name).trim(),
        )
        .add("surface", &e.request.surface)
        .add(
            "producer",
            format!("{} {}", e.producer.service, e.producer.instance_id),
        )
        .add("request_id", &e.correlation.request_id)
        .opt(
            "activity_id",
            (!e.correlation.activity_id.is_empty()).then(|| e.correlation.activity_id.clone()),
        )
        .opt(
            "trace_id",
            (!e.correlation.trace_id.is_empty()).then(|| e.correlation.trace_id.clone()),
        )
        .add("payload", e.payload.to_string())
        .print();
}
