//! How replies and errors are printed: raw JSON with `--json`, otherwise `label: value` lines
//! or a table. [`fail`] is the one place a failure becomes the message on standard error and
//! the exit code.

use std::process::ExitCode;

use portcullis_client::ClientError;
use portcullis_shared::api::Ref;
use serde_json::Value;

/// The exit code of a failed command (clap's usage errors exit with 2).
const FAILURE: u8 = 1;

/// Prints `error: …` for a failed command and returns its exit code.
pub fn fail(err: &anyhow::Error) -> ExitCode {
    eprintln!("error: {}", describe(err));
    ExitCode::from(FAILURE)
}

/// The message for a failed command: the server's message with its code and HTTP status,
/// after any context the command added.
pub fn describe(err: &anyhow::Error) -> String {
    let mut parts = Vec::new();
    for cause in err.chain() {
        if let Some(client) = cause.downcast_ref::<ClientError>() {
            parts.push(client_message(client));
            break;
        }
        parts.push(cause.to_string());
    }
    parts.join(": ")
}

fn client_message(err: &ClientError) -> String {
    match err {
        ClientError::Admin {
            error: Some(e),
            status_code,
            ..
        } => format!("{} ({}, HTTP {status_code})", e.message, e.code),
        ClientError::Admin {
            path,
            status_code,
            body,
            ..
        } => {
            let body: String = body.trim().chars().take(500).collect();
            format!("{path}: HTTP {status_code}: {body}")
        }
        ClientError::Transport { url, source } => {
            let mut root: &dyn std::error::Error = source;
            while let Some(next) = root.source() {
                root = next;
            }
            format!(
                "could not reach the control plane at {url} ({root}); is it running? Set \
                 PORTCULLIS_URL or --control-url"
            )
        }
        other => other.to_string(),
    }
}

/// Prints a JSON value, pretty.
pub fn json(value: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
    );
}

/// Prints one line.
pub fn line(text: &str) {
    println!("{text}");
}

/// Prints a token returned once, clearly labelled.
pub fn secret(label: &str, token: &str) {
    println!("{label} (shown once): {token}");
}

/// `label: value` lines, labels aligned; empty values are skipped.
#[derive(Default)]
pub struct Lines(Vec<(&'static str, String)>);

impl Lines {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add(mut self, label: &'static str, value: impl ToString) -> Self {
        self.0.push((label, value.to_string()));
        self
    }

    pub fn opt(self, label: &'static str, value: Option<impl ToString>) -> Self {
        match value {
            Some(v) => self.add(label, v),
            None => self,
        }
    }

    pub fn print(self) {
        let width = self.0.iter().map(|(l, _)| l.len()).max().unwrap_or(0) + 1;
        for (label, value) in self.0.into_iter().filter(|(_, v)| !v.is_empty()) {
            println!("{:<width$} {value}", format!("{label}:"));
        }
    }
}

/// Prints rows under upper-cased headers, columns aligned; `(none)` when there are no rows.
pub fn table(headers: &[&str], rows: Vec<Vec<String>>) {
    if rows.is_empty() {
        println!("(none)");
        return;
    }
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let render = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .into_iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", padded.join("  ").trim_end());
    };
    render(headers.iter().map(|h| h.to_uppercase()).collect());
    for row in rows {
        render(row);
    }
}

/// A list for a cell or a line: comma-separated, `-` when empty.
pub fn join<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        return "-".into();
    }
    items
        .iter()
        .map(AsRef::as_ref)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The names of references, comma-separated.
pub fn names(refs: &[Ref]) -> String {
    join(&refs.iter().map(|r| r.name.as_str()).collect::<Vec<_>>())
}

/// `yes` or `no`.
pub fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Array(items)
            if !items.is_empty() && items.iter().all(|i| i.get("name").is_some()) =>
        {
            items
                .iter()
                .map(|i| text(&i["name"]))
                .collect::<Vec<_>>()
                .join(", ")
        }
        Value::Array(items) => items.iter().map(text).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

/// Prints a JSON reply: raw with `json`, or `label: value` lines for the given JSON pointers.
pub fn show(json_mode: bool, reply: &Value, fields: &[(&str, &str)]) {
    if json_mode {
        json(reply);
        return;
    }
    let width = fields.iter().map(|(l, _)| l.len()).max().unwrap_or(0) + 1;
    for (label, pointer) in fields {
        if let Some(v) = reply.pointer(pointer) {
            println!("{:<width$} {}", format!("{label}:"), text(v));
        }
    }
}

/// Prints a JSON list reply: raw with `json`, or a table of the given JSON pointers.
pub fn list(json_mode: bool, reply: &Value, key: &str, fields: &[&str]) {
    if json_mode {
        json(reply);
        return;
    }
    let headers: Vec<&str> = fields.iter().map(|f| f.trim_start_matches('/')).collect();
    let rows = reply[key]
        .as_array()
        .into_iter()
        .flatten()
        .map(|item| {
            fields
                .iter()
                .map(|f| text(item.pointer(f).unwrap_or(&Value::Null)))
                .collect()
        })
        .collect();
    table(&headers, rows);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_show_message_code_and_status() {
        let err = anyhow::Error::from(ClientError::Admin {
            path: "svc/Op".into(),
            status_code: 409,
            error: Some(portcullis_shared::ConnectError::new(
                portcullis_shared::Code::AlreadyExists,
                "a gateway named 'team' already exists",
            )),
            body: String::new(),
        });
        assert_eq!(
            describe(&err),
            "a gateway named 'team' already exists (already_exists, HTTP 409)"
        );
        let err = err.context("attaching to gateway team");
        assert!(describe(&err).starts_with("attaching to gateway team: a gateway named"));
    }

    #[test]
    fn other_errors_keep_their_chain() {
        let err = anyhow::anyhow!("inner").context("outer");
        assert_eq!(describe(&err), "outer: inner");
    }

    #[test]
    fn joins() {
        assert_eq!(join::<&str>(&[]), "-");
        assert_eq!(join(&["a", "b"]), "a, b");
    }
}
