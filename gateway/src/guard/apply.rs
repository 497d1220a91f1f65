//! Guarding one call at one stage: text and JSON run through the scope's detector, a `block`
//! match stops the call ([`Filtered`]), `redact` matches are replaced, and the [`Tally`] keeps
//! what each guard did — for the call's audit event and the `*.filtered` events, which never
//! hold the matched text.

use std::sync::Arc;

use portcullis_shared::api::guards::GuardStage;
use portcullis_shared::audit::catalog::GuardRecord;
use serde_json::Value;

use super::detect::{redact, Action, Detector, Found};

pub use crate::error::Filtered;

/// What the guards of one stage did to one call.
pub struct Tally {
    pub stage: GuardStage,
    pub detector: Arc<Detector>,
    /// Matches per guard, by its index in the detector.
    hits: Vec<u32>,
    /// Whether a `block` guard stopped the call.
    pub blocked: bool,
}

impl Tally {
    pub fn new(stage: GuardStage, detector: Arc<Detector>) -> Self {
        let hits = vec![0; detector.guards.len()];
        Self {
            stage,
            detector,
            hits,
            blocked: false,
        }
    }

    /// Counts matches found elsewhere (a stream's window), by guard index.
    pub fn add(&mut self, hits: &[u32]) {
        for (sum, n) in self.hits.iter_mut().zip(hits) {
            *sum += n;
        }
    }

    /// Whether any guard matched.
    pub fn matched(&self) -> bool {
        self.hits.iter().any(|&n| n > 0)
    }

    /// The failure a `block` match means.
    pub fn stop(&mut self, found: &Found) -> Filtered {
        self.hits[found.guard] += 1;
        self.block(found.guard, found.label)
    }

    /// Guard `guard` acts on a classified field whole: counted, and the failure when it
    /// blocks.
    pub fn field(&mut self, guard: usize) -> Result<(), Filtered> {
        self.hits[guard] += 1;
        match self.detector.guards[guard].action {
            Action::Block => Err(self.block(guard, "classified_field")),
            Action::Redact => Ok(()),
        }
    }

    fn block(&mut self, guard: usize, label: &'static str) -> Filtered {
        self.blocked = true;
        Filtered {
            stage: self.stage,
            guard: self.detector.guards[guard].name.clone(),
            label,
        }
    }

    /// `text` guarded: `None` when it may go as it is, the redacted text otherwise.
    pub fn text(&mut self, text: &str) -> Result<Option<String>, Filtered> {
        let found = self.detector.find(text);
        if found.is_empty() {
            return Ok(None);
        }
        if let Some(f) = found
            .iter()
            .find(|f| self.detector.action(f) == Action::Block)
        {
            return Err(self.stop(f));
        }
        for f in &found {
            self.hits[f.guard] += 1;
        }
        Ok(Some(redact(text, &found)))
    }

    /// Data an agent or tool supplied (arguments, structured results), guarded in place:
    /// every string, number and object key; whether anything was redacted (a redacted number
    /// becomes a string).
    pub fn json(&mut self, value: &mut Value) -> Result<bool, Filtered> {
        match value {
            Value::String(s) => self.string(s),
            Value::Number(n) => match self.text(&n.to_string())? {
                Some(redacted) => {
                    *value = Value::String(redacted);
                    Ok(true)
                }
                None => Ok(false),
            },
            Value::Array(items) => {
                let mut changed = false;
                for item in items {
                    changed |= self.json(item)?;
                }
                Ok(changed)
            }
            Value::Object(map) => {
                let mut changed = false;
                let keys: Vec<String> = map.keys().cloned().collect();
                for key in keys {
                    if let Some(renamed) = self.text(&key)? {
                        if let Some(item) = map.remove(&key) {
                            map.insert(renamed, item);
                        }
                        changed = true;
                    }
                }
                for item in map.values_mut() {
                    changed |= self.json(item)?;
                }
                Ok(changed)
            }
            _ => Ok(false),
        }
    }

    /// An API message (a reply, a stream event) guarded in place, denying by default: every
    /// string and number but the envelope's bookkeeping ([`ENVELOPE`]); tool-call arguments
    /// and inputs as [`Tally::json`]. Log probabilities are dropped: they spell the text out
    /// token by token.
    pub fn message(&mut self, value: &mut Value) -> Result<bool, Filtered> {
        match value {
            Value::Object(map) => {
                let mut changed = map.remove("logprobs").is_some_and(|l| !l.is_null());
                for (key, item) in map.iter_mut() {
                    if ENVELOPE.contains(&key.as_str()) {
                        continue;
                    }
                    changed |= match (key.as_str(), item) {
                        ("arguments", Value::String(args)) => self.arguments(args)?,
                        ("arguments" | "input", item) => self.json(item)?,
                        (_, item) => self.message(item)?,
                    };
                }
                Ok(changed)
            }
            Value::Array(items) => {
                let mut changed = false;
                for item in items {
                    changed |= self.message(item)?;
                }
                Ok(changed)
            }
            other => self.json(other),
        }
    }

    /// Tool-call arguments as OpenAI sends them, a JSON text: guarded as JSON so they stay
    /// valid JSON; text that is not JSON is guarded as it is.
    pub fn arguments(&mut self, args: &mut String) -> Result<bool, Filtered> {
        match serde_json::from_str::<Value>(args) {
            Ok(mut parsed) => {
                let changed = self.json(&mut parsed)?;
                if changed {
                    *args = parsed.to_string();
                }
                Ok(changed)
            }
            Err(_) => self.string(args),
        }
    }

    fn string(&mut self, s: &mut String) -> Result<bool, Filtered> {
        match self.text(s)? {
            Some(redacted) => {
                *s = redacted;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// What each guard that matched did, for the call's audit event.
    pub fn record(&self) -> Vec<GuardRecord> {
        self.matches()
            .map(|(g, n)| self.outcome(g, n).record())
            .collect()
    }

    fn outcome<'a>(&self, g: &'a portcullis_shared::guard::GuardSpec, matches: u32) -> Outcome<'a> {
        Outcome {
            stage: self.stage,
            guard_id: &g.id,
            guard: &g.name,
            kind: g.finds.kind(),
            action: g.action,
            matches,
        }
    }

    fn matches(&self) -> impl Iterator<Item = (&portcullis_shared::guard::GuardSpec, u32)> {
        self.detector
            .guards
            .iter()
            .zip(&self.hits)
            .filter(|(_, &n)| n > 0)
            .map(|(g, &n)| (g, n))
    }

    /// What each guard that matched did.
    pub fn outcomes(&self) -> impl Iterator<Item = Outcome<'_>> {
        self.matches().map(|(g, n)| self.outcome(g, n))
    }
}

/// What one guard did to one call at one stage.
pub struct Outcome<'a> {
    pub stage: GuardStage,
    pub guard_id: &'a str,
    pub guard: &'a str,
    pub kind: portcullis_shared::api::guards::GuardKind,
    pub action: Action,
    pub matches: u32,
}

impl Outcome<'_> {
    /// As the call's audit event lists it (and its `*.filtered` event holds it).
    pub fn record(&self) -> GuardRecord {
        GuardRecord {
            guard_id: self.guard_id.to_string(),
            guard: self.guard.to_string(),
            stage: self.stage,
            kind: self.kind,
            action: self.action,
            matches: self.matches,
        }
    }
}

/// Fields of API messages that are bookkeeping, not content: ids, names, types, roles,
/// reasons, counts, signatures and encoded media.
const ENVELOPE: &[&str] = &[
    "id",
    "object",
    "model",
    "created",
    "system_fingerprint",
    "service_tier",
    "usage",
    "type",
    "role",
    "index",
    "name",
    "finish_reason",
    "stop_reason",
    "stop_sequence",
    "signature",
    "tool_call_id",
    "tool_use_id",
    "media_type",
    "data",
];

/// What the guards did to one call, at every stage, for its `model.call` or `tool.call` event
/// (the payload's `guards` and `delivered`).
#[derive(Default)]
pub struct Log {
    /// One entry per guard that matched, per stage.
    pub records: Vec<GuardRecord>,
    /// What of the answer the caller received, when output guards applied: `as_answered`,
    /// `redacted`, `partial` or `nothing`.
    pub delivered: Option<&'static str>,
}

impl Log {
    /// Adds what a stage's guards did; what each that matched did, for its own event.
    pub fn add<'t>(&mut self, tally: &'t Tally) -> Vec<Outcome<'t>> {
        let outcomes: Vec<Outcome<'t>> = tally.outcomes().collect();
        self.records.extend(outcomes.iter().map(Outcome::record));
        outcomes
    }

    /// Adds what one guard outside a tally (a `json_schema` guard) did.
    pub fn add_one(&mut self, outcome: &Outcome<'_>) {
        self.records.push(outcome.record());
    }

    /// The payload's `guards` and `delivered`.
    pub fn into_fields(self) -> (Vec<GuardRecord>, Option<String>) {
        (self.records, self.delivered.map(str::to_string))
    }
}
