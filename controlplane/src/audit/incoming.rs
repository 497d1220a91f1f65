//! An event on its way into the audit store. A gateway's event is read once: its envelope into
//! fields (the indexed columns, the checks), its payload only as text, and the event's text as
//! sent is what gets stored. Nothing builds the payload's tree or writes the event out again,
//! unless a live tail listens.

use std::borrow::Cow;

use portcullis_shared::audit::{bound, AuditEvent, AuditEventV1};
use portcullis_shared::snapshot::Charge;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::Value;

pub struct Incoming {
    /// The envelope, with the payload as its JSON text.
    pub event: AuditEvent<Box<RawValue>>,
    /// The whole event's JSON as it arrived; `None` once the envelope was changed here.
    text: Option<Box<RawValue>>,
}

/// What the control plane reads of a payload, leniently: a field of another shape counts as
/// absent, as it did when the payload was read whole.
#[derive(Deserialize)]
struct PayloadFields {
    #[serde(default)]
    operation: Option<Value>,
    #[serde(default)]
    charges: Option<Box<RawValue>>,
}

impl<'de> Deserialize<'de> for Incoming {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = Box::<RawValue>::deserialize(deserializer)?;
        let event = parse_envelope(text.get()).map_err(D::Error::custom)?;
        if bound::depth(event.payload.get().as_bytes()) > bound::MAX_PAYLOAD_DEPTH {
            return Err(D::Error::custom(format!(
                "field payload: nested deeper than {} levels",
                bound::MAX_PAYLOAD_DEPTH
            )));
        }
        Ok(Self {
            event,
            text: Some(text),
        })
    }
}

/// The envelope of an event's text; an error names the field that is wrong, without the
/// position within the event (the request's own parser adds the position in the body).
fn parse_envelope(text: &str) -> Result<AuditEvent<Box<RawValue>>, String> {
    if let Ok(event) = serde_json::from_str(text) {
        return Ok(event);
    }
    let mut de = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut de).map_err(crate::error::field_error)
}

impl Incoming {
    /// An event made in this process (a management operation's, say), whatever its payload's
    /// type.
    pub fn from_event<P: serde::Serialize>(
        event: &AuditEvent<P>,
    ) -> Result<Self, serde_json::Error> {
        let text = serde_json::value::to_raw_value(event)?;
        Ok(Self {
            event: serde_json::from_str(text.get())?,
            text: Some(text),
        })
    }

    /// Files the event under a workspace; the stored text is then written from the fields.
    pub fn set_workspace(&mut self, workspace_id: &str) {
        self.event.scope.workspace_id = workspace_id.to_string();
        self.text = None;
    }

    /// The event's JSON, as stored.
    pub fn body(&self) -> Result<Cow<'_, str>, serde_json::Error> {
        match &self.text {
            Some(text) => Ok(Cow::Borrowed(text.get())),
            None => serde_json::to_string(&self.event).map(Cow::Owned),
        }
    }

    /// The event as every reader sees it.
    pub fn to_event(&self) -> Result<AuditEventV1, serde_json::Error> {
        serde_json::from_str(&self.body()?)
    }

    /// What is stored besides the event: the operation it is about (the RPC method, else the
    /// payload's `operation`), and the charges it carries (none when absent or not charges).
    /// The payload is read once for both.
    pub fn operation_and_charges(&self) -> (String, Vec<Charge>) {
        let fields: Option<PayloadFields> = serde_json::from_str(self.event.payload.get()).ok();
        let (operation, charges) = fields.map_or((None, None), |p| (p.operation, p.charges));
        let operation = super::operation_of(
            &self.event.request.rpc_method,
            operation.as_ref().and_then(Value::as_str),
        );
        let charges = charges
            .and_then(|c| serde_json::from_str(c.get()).ok())
            .unwrap_or_default();
        (operation, charges)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use portcullis_shared::audit::IngestAuditRequest;

    fn batch(events: &str) -> Result<IngestAuditRequest<Incoming>, serde_json::Error> {
        serde_json::from_str(&format!(r#"{{"events":[{events}]}}"#))
    }

    fn event_text(payload: &str) -> String {
        let mut e = AuditEventV1 {
            event_id: "e1".into(),
            time: "2026-11-27T00:00:00.000Z".into(),
            ..Default::default()
        };
        e.scope.workspace_id = "w1".into();
        let text = serde_json::to_string(&e).unwrap();
        text.replace("\"payload\":null", &format!("\"payload\":{payload}"))
    }

    #[test]
    fn an_event_is_stored_as_the_text_it_arrived_in() {
        // Spacing and key order a writer of the envelope would not reproduce.
        let text = event_text(r#"{ "z": 1,  "a": [true, null] }"#);
        let req = batch(&text).unwrap();
        assert_eq!(req.events[0].body().unwrap(), text);
        assert_eq!(req.events[0].event.event_id, "e1");
        let whole = req.events[0].to_event().unwrap();
        assert_eq!(
            whole.payload,
            serde_json::json!({"z": 1, "a": [true, null]})
        );
    }

    #[test]
    fn an_event_filed_under_a_workspace_is_stored_with_it() {
        let mut req = batch(&event_text("{}")).unwrap();
        req.events[0].set_workspace("w2");
        let stored: AuditEventV1 = serde_json::from_str(&req.events[0].body().unwrap()).unwrap();
        assert_eq!(stored.scope.workspace_id, "w2");
        assert_eq!(stored.event_id, "e1");
    }

    #[test]
    fn operation_and_charges_are_read_from_the_payload_and_ignored_when_malformed() {
        let charge = r#"{"quota_id":"q1","day":20000,"caller":"a1","micros":7}"#;
        let good = batch(&event_text(&format!(
            r#"{{"operation":"Op","charges":[{charge}],"other":{{"deep":[1]}}}}"#
        )))
        .unwrap();
        let (operation, charges) = good.events[0].operation_and_charges();
        assert_eq!(operation, "Op");
        assert_eq!(charges.len(), 1);
        assert_eq!((charges[0].quota_id.as_str(), charges[0].micros), ("q1", 7));

        for payload in [
            r#"{"operation":5,"charges":"no"}"#,
            "null",
            "[1,2]",
            "\"text\"",
        ] {
            let odd = batch(&event_text(payload)).unwrap();
            let (operation, charges) = odd.events[0].operation_and_charges();
            assert_eq!(operation, "", "{payload}");
            assert!(charges.is_empty(), "{payload}");
        }
    }

    #[test]
    fn a_malformed_envelope_names_its_field() {
        let text = event_text("{}").replace("\"workspace_id\":\"w1\"", "\"workspace_id\":3");
        let err = batch(&text).err().unwrap().to_string();
        assert!(
            err.contains("field scope.workspace_id: invalid type"),
            "{err}"
        );
        assert!(err.matches(" at line ").count() <= 1, "{err}");
    }

    #[test]
    fn a_payload_nested_too_deeply_is_refused() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(batch(&event_text(&deep(bound::MAX_PAYLOAD_DEPTH))).is_ok());
        let err = batch(&event_text(&deep(bound::MAX_PAYLOAD_DEPTH + 1)))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("nested deeper than"), "{err}");
    }

    #[test]
    fn an_event_made_here_keeps_its_payload() {
        let e = AuditEventV1 {
            event_id: "e2".into(),
            payload: serde_json::json!({"operation": "CreateAgent"}),
            ..Default::default()
        };
        let incoming = Incoming::from_event(&e).unwrap();
        assert_eq!(incoming.operation_and_charges().0, "CreateAgent");
        assert_eq!(incoming.to_event().unwrap(), e);
    }
}
