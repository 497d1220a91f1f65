//! JSON-RPC 2.0 as MCP's Streamable HTTP carries it, stateless: one message per POST,
//! answered with one JSON object (or 202 for a notification). Both the gateway's MCP endpoint
//! and the control plane's MCP admin server read and answer messages with this module.

use serde_json::{json, Value};

/// MCP protocol versions both servers speak, newest first.
pub const SUPPORTED_VERSIONS: [&str; 3] = ["2025-06-18", "2025-03-26", "2024-11-05"];

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;

/// What a request body holds.
#[derive(Debug, PartialEq)]
pub enum Parsed {
    Request {
        method: String,
        id: Value,
        params: Value,
    },
    /// A notification or a client's response: accepted, nothing to answer.
    Notification,
    /// Not a JSON-RPC request: answered with this error (and the id, when it has one).
    Malformed {
        id: Value,
        code: i64,
        message: String,
    },
}

/// Reads one JSON-RPC message.
pub fn parse(raw: &[u8]) -> Parsed {
    let malformed = |id: Value, code: i64, message: &str| Parsed::Malformed {
        id,
        code,
        message: message.to_string(),
    };
    let Ok(message) = serde_json::from_slice::<Value>(raw) else {
        return malformed(
            Value::Null,
            PARSE_ERROR,
            "parse error: the body is not JSON",
        );
    };
    let Value::Object(request) = message else {
        return malformed(
            Value::Null,
            INVALID_REQUEST,
            "invalid request: send one JSON-RPC object (batches are not supported)",
        );
    };
    let id = request.get("id").cloned();
    let method = request.get("method").and_then(Value::as_str);
    match (method, id) {
        (Some(method), Some(id)) => Parsed::Request {
            method: method.to_string(),
            id,
            params: request.get("params").cloned().unwrap_or(Value::Null),
        },
        (None, Some(id)) => malformed(id, INVALID_REQUEST, "invalid request: method is missing"),
        // A notification, or a response from the client (to a request we never send).
        (_, None) => Parsed::Notification,
    }
}

/// The reply to `initialize`: the client's protocol version when supported, else the newest.
pub fn initialize_result(params: &Value, server_name: &str, instructions: Option<&str>) -> Value {
    let asked = params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let version = SUPPORTED_VERSIONS
        .iter()
        .find(|v| **v == asked)
        .copied()
        .unwrap_or(SUPPORTED_VERSIONS[0]);
    let mut result = json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": server_name, "version": env!("CARGO_PKG_VERSION")}
    });
    if let Some(text) = instructions {
        result["instructions"] = text.into();
    }
    result
}

/// A JSON-RPC response object.
pub fn reply(id: Value, outcome: Result<Value, (i64, String, Option<Value>)>) -> Value {
    match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, message, data)) => {
            let mut error = json!({"code": code, "message": message});
            if let Some(data) = data {
                error["data"] = data;
            }
            json!({"jsonrpc": "2.0", "id": id, "error": error})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_notifications_and_malformed_bodies() {
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#),
            Parsed::Request {
                method: "ping".into(),
                id: json!(7),
                params: Value::Null
            }
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Parsed::Notification
        );
        let code = |raw: &[u8]| match parse(raw) {
            Parsed::Malformed { code, .. } => code,
            other => panic!("{other:?}"),
        };
        assert_eq!(code(b"{"), PARSE_ERROR);
        assert_eq!(code(b"[]"), INVALID_REQUEST);
        assert_eq!(code(br#"{"id":1}"#), INVALID_REQUEST);
    }

    #[test]
    fn initialize_answers_the_asked_version_when_known() {
        let r = initialize_result(&json!({"protocolVersion": "2025-03-26"}), "x", None);
        assert_eq!(r["protocolVersion"], "2025-03-26");
        let r = initialize_result(&json!({"protocolVersion": "1999-01-01"}), "x", Some("hi"));
        assert_eq!(r["protocolVersion"], SUPPORTED_VERSIONS[0]);
        assert_eq!(r["instructions"], "hi");
    }
}

/// Arbitrary bytes and JSON-RPC-shaped messages with any id, method and params: never a
/// panic; a message with an id and a string method is a request carrying them unchanged.
#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;
    use serde_json::json;

    use super::{parse, Parsed};
    use crate::fuzz::json_value;

    proptest! {
        #[test]
        fn any_bytes_are_read_without_panicking(raw in prop::collection::vec(any::<u8>(), 0..256)) {
            let _ = parse(&raw);
        }

        #[test]
        fn requests_keep_their_id_method_and_params(
            id in json_value(), method in ".{0,24}", params in json_value(), extra in json_value()
        ) {
            let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params, "x": extra});
            let parsed = parse(message.to_string().as_bytes());
            prop_assert_eq!(parsed, Parsed::Request { method, id, params });
        }
    }
}
