//! Guards: `CreateGuard`, `UpdateGuard`, `GetGuard`, `ListGuards`, `DeleteGuard` and
//! `TestGuard` (DESIGN §16). A guard is checked whole before it is stored — its config with
//! the gateway's own compiler, its scope against its stage — and its scope is stored as ids,
//! names resolved at write time. `TestGuard` runs the stored guard alone on a sample.

use portcullis_shared::api::guards::*;
use portcullis_shared::api::workspace::Permission;
use portcullis_shared::api::Empty;
use portcullis_shared::guard::config::Checked;
use portcullis_shared::guard::schema::{SchemaGuard, REDACTED};
use portcullis_shared::guard::{self, config, CompileError, Detector, GuardSpec};
use serde_json::Value;

use super::{unary, views, Access, Ctx, Operation};
use crate::error::{exists, invalid, not_found, precondition, ApiError, ApiResult};
use crate::guard_rows::parse;
use crate::store::guards::{self, GuardRow};
use crate::store::{gateways, models, now_ms, pools, tools, Conn};
use crate::validate;

pub fn operations() -> Vec<(&'static str, Operation)> {
    let view = Access::Platform(Permission::GatewayView);
    let deploy = Access::Platform(Permission::RulesDeploy);
    vec![
        ("CreateGuard", unary(deploy, create)),
        ("UpdateGuard", unary(deploy, update)),
        ("GetGuard", unary(view, get)),
        ("ListGuards", unary(view, list)),
        ("DeleteGuard", unary(deploy, delete)),
        ("TestGuard", unary(view, test)),
    ]
}

/// Most entries in one scope list.
const MAX_SCOPE_ENTRIES: usize = 100;
/// Largest sample `TestGuard` runs on.
pub const MAX_SAMPLE_BYTES: usize = 1024 * 1024;

/// The guard named by id or name.
pub async fn load(conn: &mut Conn, ws: &str, given: &str) -> ApiResult<GuardRow> {
    if given.is_empty() {
        return Err(invalid("guard_id is required (the guard's id or name)"));
    }
    let found = match guards::get(conn, ws, given).await? {
        Some(g) => Some(g),
        None => guards::by_name(conn, ws, given).await?,
    };
    found.ok_or_else(|| not_found("guard", &validate::clip(given)))
}

async fn ensure_name_free(conn: &mut Conn, ws: &str, name: &str) -> ApiResult<()> {
    if guards::by_name(conn, ws, name).await?.is_some() {
        return Err(exists(format!("a guard named '{name}' already exists")));
    }
    Ok(())
}

/// What the compiler says about a config, as an error on the `config` field.
fn config_error(e: CompileError) -> ApiError {
    if e.0.starts_with("config") {
        invalid(e.0)
    } else {
        invalid(format!("config: {}", e.0))
    }
}

/// The guard as gateways run it at its stage; refused with the compiler's reason.
fn compile(
    name: &str,
    stage: GuardStage,
    kind: GuardKind,
    action: GuardAction,
    config: &Value,
) -> ApiResult<Checked> {
    config::check("", name, stage, kind, action, config).map_err(config_error)
}

/// A config left out is an empty one (what `pii` and `secrets` take).
fn normalize(config: Value) -> Value {
    match config {
        Value::Null => Value::Object(Default::default()),
        other => other,
    }
}

/// Model lists are for model stages, tool lists for tool stages.
fn check_scope_stage(stage: GuardStage, scope: &GuardScope) -> ApiResult<()> {
    if !stage.on_models() && !scope.models.is_empty() {
        return Err(invalid(format!(
            "scope.models applies to the llm_output and llm_input stages, not {}; a {} guard \
             is narrowed by scope.tools",
            stage.as_str(),
            stage.as_str()
        )));
    }
    if stage.on_models() && !scope.tools.is_empty() {
        return Err(invalid(format!(
            "scope.tools applies to the tool_result and tool_arguments stages, not {}; a {} \
             guard is narrowed by scope.models",
            stage.as_str(),
            stage.as_str()
        )));
    }
    Ok(())
}

/// The scope with every entry resolved to an id; `None` when it narrows nothing.
async fn resolve_scope(
    conn: &mut Conn,
    ws: &str,
    scope: &GuardScope,
) -> ApiResult<Option<GuardScope>> {
    if scope.is_all() {
        return Ok(None);
    }
    let mut out = GuardScope::default();
    let list = |field: &str, items: &[String]| {
        validate::string_list(&format!("scope.{field}"), items, MAX_SCOPE_ENTRIES)
    };
    for (i, given) in list("gateways", &scope.gateways)?.iter().enumerate() {
        let found = match gateways::get(conn, ws, given).await? {
            Some(g) => Some(g.id),
            None => gateways::by_name(conn, ws, given).await?.map(|g| g.id),
        };
        push(&mut out.gateways, found, "gateways", i, "gateway", given)?;
    }
    for (i, given) in list("models", &scope.models)?.iter().enumerate() {
        let mut found = match models::get(conn, ws, given).await? {
            Some(m) => Some(m.id),
            None => models::by_name(conn, ws, given).await?.map(|m| m.id),
        };
        if found.is_none() {
            found = match pools::get(conn, ws, given).await? {
                Some(p) => Some(p.id),
                None => pools::by_name(conn, ws, given).await?.map(|p| p.id),
            };
        }
        push(
            &mut out.models,
            found,
            "models",
            i,
            "model connection or pool",
            given,
        )?;
    }
    for (i, given) in list("tools", &scope.tools)?.iter().enumerate() {
        let found = match tools::get(conn, ws, given).await? {
            Some(t) => Some(t.id),
            None => tools::by_name(conn, ws, given).await?.map(|t| t.id),
        };
        push(&mut out.tools, found, "tools", i, "tool connection", given)?;
    }
    Ok(Some(out))
}

/// Adds a resolved id once; a name that names nothing is `not_found`, naming the entry.
fn push(
    ids: &mut Vec<String>,
    found: Option<String>,
    field: &str,
    i: usize,
    what: &str,
    given: &str,
) -> ApiResult<()> {
    let id = found.ok_or_else(|| {
        ApiError::NotFound(format!(
            "scope.{field}[{i}]: no {what} '{}' in this workspace",
            validate::clip(given)
        ))
    })?;
    if !ids.contains(&id) {
        ids.push(id);
    }
    Ok(())
}

fn scope_text(scope: &Option<GuardScope>) -> ApiResult<Option<String>> {
    scope
        .as_ref()
        .map(|s| serde_json::to_string(s).map_err(|e| ApiError::Internal(e.to_string())))
        .transpose()
}

fn config_text(config: &Value) -> ApiResult<String> {
    serde_json::to_string(config).map_err(|e| ApiError::Internal(e.to_string()))
}

fn view(row: GuardRow) -> ApiResult<Guard> {
    let p = parse(&row)?;
    Ok(Guard {
        guard_id: row.id,
        workspace_id: row.workspace_id,
        name: row.name,
        stage: p.stage,
        kind: p.kind,
        action: p.action,
        config: p.config,
        enabled: row.enabled != 0,
        scope: p.scope,
        created_at: views::ts(row.created_at),
        updated_at: views::ts(row.updated_at),
    })
}

async fn create(ctx: Ctx, req: CreateGuardRequest) -> ApiResult<GuardResponse> {
    let name = validate::name("name", &req.name)?;
    let stage = req.stage.ok_or_else(|| {
        invalid("stage is required: llm_output, llm_input, tool_result or tool_arguments")
    })?;
    let kind = req
        .kind
        .ok_or_else(|| invalid("kind is required: regex, keywords, pii, secrets or json_schema"))?;
    let action = req
        .action
        .ok_or_else(|| invalid("action is required: block or redact"))?;
    let config = normalize(req.config);
    compile(&name, stage, kind, action, &config)?;
    let scope = req.scope.unwrap_or_default();
    check_scope_stage(stage, &scope)?;
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    ensure_name_free(tx.conn(), &ws, &name).await?;
    let scope = resolve_scope(tx.conn(), &ws, &scope).await?;
    let now = now_ms();
    let row = GuardRow {
        id: uuid::Uuid::new_v4().to_string(),
        workspace_id: ws,
        name,
        stage: stage.as_str().to_string(),
        kind: kind.as_str().to_string(),
        action: action.as_str().to_string(),
        config: config_text(&config)?,
        enabled: i64::from(req.enabled.unwrap_or(true)),
        scope: scope_text(&scope)?,
        created_at: now,
        updated_at: now,
    };
    guards::insert(tx.conn(), &row).await?;
    tx.commit().await?;
    tracing::info!(guard_id = %row.id, stage = %row.stage, kind = %row.kind, "Guard created.");
    Ok(GuardResponse { guard: view(row)? })
}

/// Fields sent replace the stored ones; the result is checked as a whole, as on create.
async fn update(ctx: Ctx, req: UpdateGuardRequest) -> ApiResult<GuardResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let mut row = load(tx.conn(), &ws, &req.guard_id).await?;
    let stored = parse(&row)?;
    if let Some(name) = &req.name {
        let name = validate::name("name", name)?;
        if name != row.name {
            ensure_name_free(tx.conn(), &ws, &name).await?;
        }
        row.name = name;
    }
    let stage = req.stage.unwrap_or(stored.stage);
    let kind = req.kind.unwrap_or(stored.kind);
    let action = req.action.unwrap_or(stored.action);
    let config_sent = req.config.is_some();
    let config = req.config.map(normalize).unwrap_or(stored.config);
    if let Err(e) = compile(&row.name, stage, kind, action, &config) {
        return Err(match req.kind {
            Some(k) if k != stored.kind && !config_sent => invalid(format!(
                "{e}; the stored config is for a {} guard: send a config for {} with the new kind",
                stored.kind.as_str(),
                k.as_str()
            )),
            _ => e,
        });
    }
    let scope = match &req.scope {
        Some(scope) => {
            check_scope_stage(stage, scope)?;
            resolve_scope(tx.conn(), &ws, scope).await?
        }
        None => {
            let everywhere = GuardScope::default();
            let kept = stored.scope.as_ref().unwrap_or(&everywhere);
            check_scope_stage(stage, kept).map_err(|e| {
                invalid(format!(
                    "{e} (the stored scope; send a scope for the new stage)"
                ))
            })?;
            stored.scope
        }
    };
    row.stage = stage.as_str().to_string();
    row.kind = kind.as_str().to_string();
    row.action = action.as_str().to_string();
    row.config = config_text(&config)?;
    row.scope = scope_text(&scope)?;
    if let Some(enabled) = req.enabled {
        row.enabled = i64::from(enabled);
    }
    row.updated_at = now_ms();
    guards::update(tx.conn(), &row).await?;
    tx.commit().await?;
    tracing::info!(guard_id = %row.id, "Guard updated.");
    Ok(GuardResponse { guard: view(row)? })
}

async fn get(ctx: Ctx, req: GuardRefRequest) -> ApiResult<GuardResponse> {
    let mut conn = ctx.store().read().await?;
    let row = load(&mut conn, ctx.workspace_id(), &req.guard_id).await?;
    Ok(GuardResponse { guard: view(row)? })
}

async fn list(ctx: Ctx, req: ListGuardsRequest) -> ApiResult<ListGuardsResponse> {
    let mut conn = ctx.store().read().await?;
    let stage = req.stage.map(GuardStage::as_str);
    let guards = guards::list(&mut conn, ctx.workspace_id(), stage)
        .await?
        .into_iter()
        .map(view)
        .collect::<ApiResult<_>>()?;
    Ok(ListGuardsResponse { guards })
}

async fn delete(ctx: Ctx, req: GuardRefRequest) -> ApiResult<Empty> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let row = load(tx.conn(), &ws, &req.guard_id).await?;
    guards::delete(tx.conn(), &ws, &row.id).await?;
    tx.commit().await?;
    tracing::info!(guard_id = %row.id, "Guard deleted.");
    Ok(Empty {})
}

/// Runs the stored guard, enabled or not, on the sample alone.
async fn test(ctx: Ctx, req: TestGuardRequest) -> ApiResult<TestGuardResponse> {
    if req.sample.len() > MAX_SAMPLE_BYTES {
        return Err(invalid(format!(
            "sample is larger than {MAX_SAMPLE_BYTES} bytes (1 MiB)"
        )));
    }
    let row = {
        let mut conn = ctx.store().read().await?;
        load(&mut conn, ctx.workspace_id(), &req.guard_id).await?
    };
    let p = parse(&row)?;
    let checked =
        config::check(&row.id, &row.name, p.stage, p.kind, p.action, &p.config).map_err(|e| {
            precondition(format!(
                "guard '{}' no longer compiles ({e}); update its config",
                row.name
            ))
        })?;
    match checked {
        Checked::Text(spec) => run(spec, &req.sample),
        Checked::Schema(schema) => Ok(run_schema(&schema, &req.sample)),
    }
}

/// A `json_schema` guard on a sample result: a match per part that does not conform (the
/// whole sample when it is not JSON), and the sample as it would be delivered.
fn run_schema(schema: &SchemaGuard, sample: &str) -> TestGuardResponse {
    let blocked_or = |output: String, parts: usize| {
        let blocked = parts > 0 && schema.action == GuardAction::Block;
        TestGuardResponse {
            matches: (0..parts)
                .map(|_| GuardMatch {
                    kind: "json_schema".into(),
                    start: 0,
                    end: sample.len() as u64,
                })
                .collect(),
            blocked,
            output: if blocked { String::new() } else { output },
        }
    };
    match serde_json::from_str::<Value>(sample) {
        Ok(mut value) => {
            let parts = schema.violations(&value).len();
            schema.redact(&mut value);
            let output = if parts > 0 {
                value.to_string()
            } else {
                sample.to_string()
            };
            blocked_or(output, parts)
        }
        Err(_) => blocked_or(REDACTED.to_string(), 1),
    }
}

/// What the gateway would find in `sample` and deliver.
fn run(spec: GuardSpec, sample: &str) -> ApiResult<TestGuardResponse> {
    let detector = Detector::compile(vec![spec]).map_err(config_error)?;
    let Some(detector) = detector else {
        return Ok(TestGuardResponse {
            matches: Vec::new(),
            blocked: false,
            output: sample.to_string(),
        });
    };
    let found = detector.find(sample);
    let blocked = found
        .iter()
        .any(|f| detector.action(f) == GuardAction::Block);
    let output = if blocked {
        String::new()
    } else {
        guard::redact(sample, &found)
    };
    Ok(TestGuardResponse {
        matches: found
            .iter()
            .map(|f| GuardMatch {
                kind: f.label.to_string(),
                start: f.start as u64,
                end: f.end as u64,
            })
            .collect(),
        blocked,
        output,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn spec(kind: GuardKind, action: GuardAction, config: Value) -> GuardSpec {
        match compile("g", GuardStage::LlmOutput, kind, action, &config).unwrap() {
            Checked::Text(spec) => spec,
            Checked::Schema(_) => panic!("not a text guard"),
        }
    }

    #[test]
    fn a_json_schema_guard_tries_a_sample_result() {
        let config = json!({"schema": {"type": "object", "required": ["id"],
            "properties": {"id": {"type": "integer"}}}});
        let Checked::Schema(schema) = compile(
            "g",
            GuardStage::ToolResult,
            GuardKind::JsonSchema,
            GuardAction::Redact,
            &config,
        )
        .unwrap() else {
            panic!("a schema guard");
        };
        let r = run_schema(&schema, r#"{"id": "x"}"#);
        assert_eq!((r.matches.len(), r.blocked), (1, false));
        assert_eq!(r.output, format!(r#"{{"id":"{REDACTED}"}}"#));
        let r = run_schema(&schema, r#"{"id": 7}"#);
        assert!(r.matches.is_empty());
        assert_eq!(r.output, r#"{"id": 7}"#);
        assert_eq!(run_schema(&schema, "not json").matches.len(), 1);
        let e = compile(
            "g",
            GuardStage::LlmOutput,
            GuardKind::JsonSchema,
            GuardAction::Block,
            &config,
        )
        .map(|_| ())
        .unwrap_err()
        .to_string();
        assert!(e.contains("tool_result"), "{e}");
    }

    #[test]
    fn a_redact_guard_returns_the_redacted_sample() {
        let s = spec(
            GuardKind::Pii,
            GuardAction::Redact,
            json!({"types": ["email"]}),
        );
        let r = run(s, "mail bob@example.com now").unwrap();
        assert!(!r.blocked);
        assert_eq!(r.output, "mail [REDACTED:email] now");
        assert_eq!(
            r.matches,
            vec![GuardMatch {
                kind: "email".into(),
                start: 5,
                end: 20
            }]
        );
    }

    #[test]
    fn a_block_guard_that_matches_delivers_nothing() {
        let s = spec(
            GuardKind::Keywords,
            GuardAction::Block,
            json!({"keywords": ["falcon"]}),
        );
        let r = run(s.clone(), "Project FALCON ships").unwrap();
        assert!(r.blocked);
        assert_eq!(r.output, "");
        assert_eq!(r.matches[0].kind, "keyword");
        let r = run(s, "nothing here").unwrap();
        assert!(!r.blocked && r.matches.is_empty());
        assert_eq!(r.output, "nothing here");
    }

    #[test]
    fn config_errors_name_the_field() {
        let err = |kind, config: Value| {
            compile(
                "g",
                GuardStage::LlmOutput,
                kind,
                GuardAction::Block,
                &config,
            )
            .map(|_| ())
            .unwrap_err()
            .to_string()
        };
        let e = err(GuardKind::Regex, json!({"patterns": [r"\d+"]}));
        assert!(e.starts_with("config: ") && e.contains("any length"), "{e}");
        let e = err(GuardKind::Regex, json!({"patterns": ["("]}));
        assert!(
            e.starts_with("config: ") && e.contains("does not compile"),
            "{e}"
        );
        let e = err(GuardKind::Pii, json!({"types": ["passport"]}));
        assert!(e.starts_with("config.types"), "{e}");
        let e = err(GuardKind::Secrets, json!({"x": 1}));
        assert!(e.starts_with("config.x"), "{e}");
        assert!(compile(
            "g",
            GuardStage::LlmOutput,
            GuardKind::Secrets,
            GuardAction::Block,
            &normalize(Value::Null)
        )
        .is_ok());
    }

    #[test]
    fn scope_lists_follow_the_stage() {
        let models = GuardScope {
            models: vec!["gpt".into()],
            ..Default::default()
        };
        let tools = GuardScope {
            tools: vec!["docs".into()],
            ..Default::default()
        };
        let gateways = GuardScope {
            gateways: vec!["edge".into()],
            ..Default::default()
        };
        for stage in GuardStage::ALL {
            assert!(check_scope_stage(stage, &gateways).is_ok());
            assert_eq!(check_scope_stage(stage, &models).is_ok(), stage.on_models());
            assert_eq!(check_scope_stage(stage, &tools).is_ok(), !stage.on_models());
        }
        let e = check_scope_stage(GuardStage::LlmOutput, &tools)
            .unwrap_err()
            .to_string();
        assert!(e.contains("scope.tools") && e.contains("llm_output"), "{e}");
    }
}
