//! An agent asking a model through its gateway, then finding the call in the audit trail by
//! the activity id the client stamped on it.
//!
//! ```text
//! PORTCULLIS_GATEWAY_URL=http://127.0.0.1:7780/gateways/<id> PORTCULLIS_AGENT_KEY=svc_… \
//! PORTCULLIS_URL=http://127.0.0.1:7700 PORTCULLIS_KEY=svc_pk_… \
//!     cargo run -p portcullis-examples --example agent_chat -- gpt
//! ```

#![allow(clippy::print_stdout)]

use portcullis_client::agent::{wait_for_audit, AgentClient};
use portcullis_client::audit::WaitOptions;
use portcullis_client::{AdminClient, ClientError, GatewayErrorKind};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), ClientError> {
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    let model = std::env::args().nth(1).unwrap_or_else(|| "gpt".into());
    let client = AgentClient::new(&env("PORTCULLIS_GATEWAY_URL"), &env("PORTCULLIS_AGENT_KEY"))?;
    let body = json!({"model": model, "messages": [{"role": "user", "content": "Say hello in five words."}]});
    let answer = match client.chat_completions(&body).await {
        Ok(answer) => answer,
        Err(err) => {
            if let Some(GatewayErrorKind::RateLimited { resets_at, .. }) =
                err.gateway().map(|g| &g.kind)
            {
                println!(
                    "over budget until {}",
                    resets_at.as_deref().unwrap_or("later")
                );
                return Ok(());
            }
            return Err(err);
        }
    };
    println!("{}", answer.body["choices"][0]["message"]["content"]);
    if env("PORTCULLIS_KEY").is_empty() {
        return Ok(());
    }
    let admin = AdminClient::new(&env("PORTCULLIS_URL"), &env("PORTCULLIS_KEY"))?;
    let event = wait_for_audit(
        &admin,
        &answer.activity_id,
        "model.call",
        WaitOptions::default(),
    )
    .await?;
    println!("audited as {} ({})", event.event_id, event.result);
    Ok(())
}
