//! An agent listing the tools its gateway offers it and calling one, with every refusal class
//! handled the way an agent would.
//!
//! With `PORTCULLIS_URL` (the control plane) set, it runs as a long-lived agent would: an
//! [`AgentRuntime`] trades the key for short-lived tokens and renews them.
//!
//! ```text
//! PORTCULLIS_GATEWAY_URL=http://127.0.0.1:7780/gateways/<id> PORTCULLIS_AGENT_KEY=svc_… \
//!     cargo run -p portcullis-examples --example agent_tools -- everything/echo '{"message":"hi"}'
//! ```

#![allow(clippy::print_stdout)]

use portcullis_client::{AgentClient, AgentRuntime, ClientError, GatewayErrorKind};

#[tokio::main]
async fn main() -> Result<(), ClientError> {
    let url = std::env::var("PORTCULLIS_GATEWAY_URL").unwrap_or_default();
    let key = std::env::var("PORTCULLIS_AGENT_KEY").unwrap_or_default();
    let mut args = std::env::args().skip(1);
    let control_plane = std::env::var("PORTCULLIS_URL").unwrap_or_default();
    let runtime = match control_plane.as_str() {
        "" => None,
        cp => Some(AgentRuntime::new(cp, &url, &key)?),
    };
    let client = match &runtime {
        Some(rt) => {
            rt.start().await?;
            rt.client().await?
        }
        None => AgentClient::new(&url, &key)?,
    };
    for tool in client.list_tools().await? {
        println!("{}\t{}", tool.name, tool.description.unwrap_or_default());
    }
    let Some(name) = args.next() else {
        return Ok(());
    };
    let arguments = serde_json::from_str(&args.next().unwrap_or_else(|| "{}".into()))
        .map_err(|e| ClientError::Invalid(format!("arguments: {e}")))?;
    match client.call_tool(&name, arguments).await {
        Ok(result) => println!("{}", serde_json::Value::Array(result.content)),
        Err(err) => match err.gateway().map(|g| &g.kind) {
            Some(GatewayErrorKind::CredentialRequired {
                connection_name,
                provision_url,
                expires_at,
            }) => println!(
                "{connection_name} needs your credential: open {provision_url} (before {expires_at}), then retry"
            ),
            Some(GatewayErrorKind::Denied {
                reason,
                determining_policy,
                ..
            }) => println!("denied: {reason} ({})", determining_policy.as_deref().unwrap_or("-")),
            Some(GatewayErrorKind::ToolExecution { content, .. }) => {
                println!("the tool failed: {}", serde_json::Value::Array(content.clone()))
            }
            _ => return Err(err),
        },
    }
    Ok(())
}
