//! JSON-RPC messages (`portcullis_shared::jsonrpc::parse`), as the gateway's MCP endpoint and
//! the control plane's MCP server read a POST body: never a panic; a request carries the
//! message's own `id`, `method` and `params`, and reads back the same once written again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use portcullis_shared::jsonrpc::{parse, reply, Parsed, INVALID_REQUEST, PARSE_ERROR};
use serde_json::{json, Value};

fuzz_target!(|raw: &[u8]| {
    let parsed = parse(raw);
    let message = serde_json::from_slice::<Value>(raw);
    match &parsed {
        Parsed::Request { method, id, params } => {
            let Ok(Value::Object(m)) = &message else {
                panic!("a request from a body that is not a JSON object");
            };
            assert_eq!(m.get("method"), Some(&Value::String(method.clone())));
            assert_eq!(m.get("id"), Some(id));
            assert_eq!(m.get("params").unwrap_or(&Value::Null), params);
            let again = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            let again = parse(again.to_string().as_bytes());
            assert_eq!(again, parsed, "a request written again reads the same");
            let answer = reply(id.clone(), Ok(params.clone())).to_string();
            assert!(serde_json::from_str::<Value>(&answer).is_ok());
        }
        Parsed::Notification => {
            assert!(matches!(&message, Ok(Value::Object(m)) if !m.contains_key("id")));
        }
        Parsed::Malformed { code, .. } => match &message {
            Err(_) => assert_eq!(*code, PARSE_ERROR),
            Ok(_) => assert_eq!(*code, INVALID_REQUEST),
        },
    }
});
