//! Which guards apply where, compiled once per snapshot: for each gateway, the detector of
//! every place a call can go — a model target and the member serving it, a tool connection —
//! at each stage. Places with the same guards share one compiled detector; a place no guard
//! applies to has none, and its calls skip guarding altogether.

use std::collections::HashMap;
use std::sync::Arc;

use portcullis_shared::api::guards::GuardStage;
use portcullis_shared::guard::config::{self, Checked};
use portcullis_shared::guard::schema::SchemaGuard;
use portcullis_shared::snapshot::SnapGuard;

use super::detect::{Detector, GuardSpec};

/// The detectors of one gateway.
#[derive(Default)]
pub struct GatewayGuards {
    /// `llm_input`, by target (pool or model) id.
    pub input: HashMap<String, Arc<Detector>>,
    /// `llm_output`, by target id, then the serving member's id.
    pub output: HashMap<String, HashMap<String, Arc<Detector>>>,
    /// `tool_result`, by tool connection id.
    pub tool_result: HashMap<String, Arc<Detector>>,
    /// `tool_arguments`, by tool connection id.
    pub tool_arguments: HashMap<String, Arc<Detector>>,
    /// `json_schema` guards on tool results, by tool connection id.
    pub tool_schemas: HashMap<String, Vec<Arc<SchemaGuard>>>,
}

impl GatewayGuards {
    pub fn output(&self, target: &str, member: &str) -> Option<&Arc<Detector>> {
        self.output.get(target)?.get(member)
    }

    pub fn tool(&self, stage: GuardStage, connection: &str) -> Option<&Arc<Detector>> {
        match stage {
            GuardStage::ToolResult => self.tool_result.get(connection),
            GuardStage::ToolArguments => self.tool_arguments.get(connection),
            GuardStage::LlmInput | GuardStage::LlmOutput => None,
        }
    }
}

/// Every guard of the snapshot, checked, and the detectors compiled so far by the set of
/// guards they hold.
pub struct Compiler<'s> {
    guards: Vec<(&'s SnapGuard, GuardSpec)>,
    schemas: Vec<(&'s SnapGuard, Arc<SchemaGuard>)>,
    compiled: HashMap<Vec<usize>, Arc<Detector>>,
}

/// A model call's place: its target (pool or model) and the members that may serve it.
pub struct ModelPlace<'a> {
    pub target_id: &'a str,
    pub member_ids: Vec<&'a str>,
}

impl<'s> Compiler<'s> {
    /// Checks each guard's config; a guard that does not compile is an error of the snapshot
    /// (the gateway keeps serving its last good one rather than run without the guard).
    pub fn new(guards: &'s [SnapGuard], errors: &mut Vec<String>) -> Self {
        let mut checked = Vec::new();
        let mut schemas = Vec::new();
        for g in guards {
            match config::check(&g.guard_id, &g.name, g.stage, g.kind, g.action, &g.config) {
                Ok(Checked::Text(spec)) => checked.push((g, spec)),
                Ok(Checked::Schema(schema)) => schemas.push((g, Arc::new(schema))),
                Err(e) => errors.push(format!("guard {}: {e}", g.name)),
            }
        }
        Self {
            guards: checked,
            schemas,
            compiled: HashMap::new(),
        }
    }

    /// The detectors of one gateway with these model places and tool connections.
    pub fn gateway(
        &mut self,
        gateway_id: &str,
        models: &[ModelPlace<'_>],
        tool_ids: &[&str],
        errors: &mut Vec<String>,
    ) -> GatewayGuards {
        let mut out = GatewayGuards::default();
        for id in tool_ids {
            let schemas: Vec<Arc<SchemaGuard>> = self
                .schemas
                .iter()
                .filter(|(g, _)| applies(g, gateway_id, &[id]))
                .map(|(_, s)| s.clone())
                .collect();
            if !schemas.is_empty() {
                out.tool_schemas.insert(id.to_string(), schemas);
            }
        }
        if self.guards.is_empty() {
            return out;
        }
        for place in models {
            let all: Vec<&str> = std::iter::once(place.target_id)
                .chain(place.member_ids.iter().copied())
                .collect();
            if let Some(d) = self.detector(gateway_id, GuardStage::LlmInput, &all, errors) {
                out.input.insert(place.target_id.to_string(), d);
            }
            for member in &place.member_ids {
                let ids = [place.target_id, member];
                if let Some(d) = self.detector(gateway_id, GuardStage::LlmOutput, &ids, errors) {
                    out.output
                        .entry(place.target_id.to_string())
                        .or_default()
                        .insert(member.to_string(), d);
                }
            }
        }
        for id in tool_ids {
            for (stage, map) in [
                (GuardStage::ToolResult, &mut out.tool_result),
                (GuardStage::ToolArguments, &mut out.tool_arguments),
            ] {
                if let Some(d) = self.detector(gateway_id, stage, &[id], errors) {
                    map.insert(id.to_string(), d);
                }
            }
        }
        out
    }

    /// The detector of the guards of `stage` that apply on this gateway to any of `ids`.
    fn detector(
        &mut self,
        gateway_id: &str,
        stage: GuardStage,
        ids: &[&str],
        errors: &mut Vec<String>,
    ) -> Option<Arc<Detector>> {
        let set: Vec<usize> = self
            .guards
            .iter()
            .enumerate()
            .filter(|(_, (g, _))| g.stage == stage && applies(g, gateway_id, ids))
            .map(|(i, _)| i)
            .collect();
        if set.is_empty() {
            return None;
        }
        if let Some(d) = self.compiled.get(&set) {
            return Some(d.clone());
        }
        let specs = set.iter().map(|&i| self.guards[i].1.clone()).collect();
        match Detector::compile(specs) {
            Ok(Some(d)) => {
                let d = Arc::new(d);
                self.compiled.insert(set, d.clone());
                Some(d)
            }
            Ok(None) => None,
            Err(e) => {
                errors.push(format!("guards of stage {}: {e}", stage.as_str()));
                None
            }
        }
    }
}

/// Whether a guard's scope covers this gateway and any of `ids` (the model target and its
/// members, or the tool connection).
fn applies(g: &SnapGuard, gateway_id: &str, ids: &[&str]) -> bool {
    let listed =
        |list: &[String]| list.is_empty() || ids.iter().any(|id| list.iter().any(|l| l == id));
    let gateway = g.gateway_ids.is_empty() || g.gateway_ids.iter().any(|id| id == gateway_id);
    gateway
        && if g.stage.on_models() {
            listed(&g.model_ids)
        } else {
            listed(&g.tool_ids)
        }
}

#[cfg(test)]
mod tests {
    use portcullis_shared::api::guards::{GuardAction, GuardKind};
    use serde_json::json;

    use super::*;

    fn guard(
        name: &str,
        stage: GuardStage,
        gateways: &[&str],
        models: &[&str],
        tools: &[&str],
    ) -> SnapGuard {
        let ids = |list: &[&str]| list.iter().map(|s| s.to_string()).collect();
        SnapGuard {
            guard_id: format!("id-{name}"),
            name: name.into(),
            stage,
            kind: GuardKind::Keywords,
            action: GuardAction::Block,
            config: json!({"keywords": [name]}),
            gateway_ids: ids(gateways),
            model_ids: ids(models),
            tool_ids: ids(tools),
        }
    }

    fn names(d: Option<&Arc<Detector>>) -> Vec<String> {
        d.map(|d| d.guards.iter().map(|g| g.name.clone()).collect())
            .unwrap_or_default()
    }

    #[test]
    fn each_place_gets_the_guards_whose_scope_covers_it() {
        let guards = vec![
            guard("everywhere", GuardStage::LlmOutput, &[], &[], &[]),
            guard("on-b", GuardStage::LlmOutput, &["gw-b"], &[], &[]),
            guard("pool", GuardStage::LlmOutput, &[], &["pool-1"], &[]),
            guard("member", GuardStage::LlmInput, &[], &["m2"], &[]),
            guard("tool", GuardStage::ToolResult, &[], &[], &["t1"]),
            guard("gone", GuardStage::ToolArguments, &[], &[], &["deleted"]),
        ];
        let mut errors = Vec::new();
        let mut compiler = Compiler::new(&guards, &mut errors);
        let places = [
            ModelPlace {
                target_id: "pool-1",
                member_ids: vec!["m1", "m2"],
            },
            ModelPlace {
                target_id: "m1",
                member_ids: vec!["m1"],
            },
        ];
        let a = compiler.gateway("gw-a", &places, &["t1", "t2"], &mut errors);
        let b = compiler.gateway("gw-b", &places, &["t1"], &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(names(a.output("pool-1", "m1")), ["everywhere", "pool"]);
        assert_eq!(names(a.output("m1", "m1")), ["everywhere"]);
        assert_eq!(names(b.output("m1", "m1")), ["everywhere", "on-b"]);
        // An input guard on one member covers the pool the call names (the member is not
        // chosen yet), not the member called directly elsewhere.
        assert_eq!(names(a.input.get("pool-1")), ["member"]);
        assert!(!a.input.contains_key("m1"));
        assert_eq!(names(a.tool(GuardStage::ToolResult, "t1")), ["tool"]);
        assert!(a.tool(GuardStage::ToolResult, "t2").is_none());
        assert!(
            a.tool(GuardStage::ToolArguments, "t1").is_none(),
            "a deleted scope matches nothing"
        );
        // The same set of guards is compiled once.
        assert!(Arc::ptr_eq(
            a.output("pool-1", "m1").unwrap(),
            a.output("pool-1", "m2").unwrap()
        ));
    }

    #[test]
    fn a_guard_that_does_not_compile_fails_the_snapshot() {
        let mut bad = guard("x", GuardStage::LlmOutput, &[], &[], &[]);
        bad.config = json!({"keywords": []});
        let mut errors = Vec::new();
        Compiler::new(&[bad], &mut errors);
        assert_eq!(errors.len(), 1, "{errors:?}");
    }
}
