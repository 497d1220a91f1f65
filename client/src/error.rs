//! Client errors. Every class the spec names derives from [`ClientError`]; the admin error
//! carries the operation path, the HTTP status and the server's body.

use portcullis_shared::ConnectError;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The client was configured with something unusable (a bad URL, an empty key).
    #[error("configuration error: {0}")]
    Configuration(String),
    /// The control plane answered with an error.
    #[error("{path}: {status_code} {}", .error.as_ref().map_or_else(|| .body.clone(), |e| e.to_string()))]
    Admin {
        path: String,
        status_code: u16,
        /// The Connect error, when the body was one.
        error: Option<ConnectError>,
        /// The raw body.
        body: String,
    },
    /// The request did not complete (connection refused, timeout, TLS).
    #[error("could not reach {url}: {source}")]
    Transport {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// An argument cannot be used as given (an act-as identity without `sub`, a malformed
    /// token).
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// A wait ran out (e.g. no audit event matched in time).
    #[error("timed out: {0}")]
    Timeout(String),
    /// The reply was not the JSON the operation promises.
    #[error("{path}: unexpected reply: {message}")]
    Decode { path: String, message: String },
}

impl ClientError {
    /// The Connect code, for errors the server reported.
    pub fn code(&self) -> Option<portcullis_shared::Code> {
        match self {
            ClientError::Admin { error: Some(e), .. } => Some(e.code),
            _ => None,
        }
    }

    /// The HTTP status, for errors the server reported.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            ClientError::Admin { status_code, .. } => Some(*status_code),
            _ => None,
        }
    }
}
