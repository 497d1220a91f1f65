//! The one place where a failure becomes a Connect error response.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use portcullis_shared::{Code, ConnectError};

use crate::store::StoreError;

/// Why an operation failed. Messages are shown to the caller and never contain secrets.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    FailedPrecondition(String),
    #[error("{0}")]
    Unauthenticated(String),
    #[error("{0}")]
    PermissionDenied(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    AlreadyExists(String),
    /// No such service or operation.
    #[error("{0}")]
    Unimplemented(String),
    #[error("{0}")]
    Unavailable(String),
    /// The caller used up a budget (too many requests); retry later.
    #[error("{0}")]
    ResourceExhausted(String),
    #[error("{0}")]
    Internal(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub type ApiResult<T> = Result<T, ApiError>;

/// A stored value that does not read back (a fault of the store, not of the caller).
pub fn corrupt(what: &str) -> ApiError {
    ApiError::Internal(format!("stored {what} is unreadable"))
}

/// Shorthands for the common cases.
pub fn invalid(msg: impl Into<String>) -> ApiError {
    ApiError::InvalidArgument(msg.into())
}

pub fn precondition(msg: impl Into<String>) -> ApiError {
    ApiError::FailedPrecondition(msg.into())
}

pub fn not_found(what: &str, id: &str) -> ApiError {
    ApiError::NotFound(format!("{what} {id} not found in this workspace"))
}

pub fn exists(msg: impl Into<String>) -> ApiError {
    ApiError::AlreadyExists(msg.into())
}

impl ApiError {
    /// The Connect error the caller sees. Store failures other than a uniqueness conflict are
    /// reported without detail; the detail goes to the log with the request id.
    pub fn to_connect(&self, request_id: &str) -> ConnectError {
        let (code, message) = match self {
            ApiError::InvalidArgument(m) => (Code::InvalidArgument, m.clone()),
            ApiError::FailedPrecondition(m) => (Code::FailedPrecondition, m.clone()),
            ApiError::Unauthenticated(m) => (Code::Unauthenticated, m.clone()),
            ApiError::PermissionDenied(m) => (Code::PermissionDenied, m.clone()),
            ApiError::NotFound(m) => (Code::NotFound, m.clone()),
            ApiError::AlreadyExists(m) => (Code::AlreadyExists, m.clone()),
            ApiError::Unimplemented(m) => (Code::Unimplemented, m.clone()),
            ApiError::Unavailable(m) => (Code::Unavailable, m.clone()),
            ApiError::ResourceExhausted(m) => (Code::ResourceExhausted, m.clone()),
            ApiError::Internal(_) => (
                Code::Internal,
                format!("internal error (request {request_id})"),
            ),
            ApiError::Store(e) if e.is_unique_violation() => (
                Code::AlreadyExists,
                "a resource with that name already exists".to_string(),
            ),
            ApiError::Store(e) if e.is_unavailable() => (
                Code::Unavailable,
                format!("the database is unavailable; retry later (request {request_id})"),
            ),
            ApiError::Store(_) => (
                Code::Internal,
                format!("internal error (request {request_id})"),
            ),
        };
        ConnectError::new(code, message)
    }

    /// Whether this failure is the server's fault (logged at error level).
    pub fn is_internal(&self) -> bool {
        match self {
            ApiError::Internal(_) => true,
            ApiError::Store(e) => !e.is_unique_violation(),
            _ => false,
        }
    }
}

/// Renders a Connect error with its HTTP status and the request id header.
pub fn connect_response(err: &ConnectError, request_id: &str) -> Response {
    let status =
        StatusCode::from_u16(err.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, axum::Json(err)).into_response();
    if let Ok(value) = HeaderValue::from_str(request_id) {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}

/// What a parser refused, naming the field (`field a.b: detail`; the detail alone at the top),
/// without serde_json's position.
pub(crate) fn field_error<E: std::fmt::Display>(e: serde_path_to_error::Error<E>) -> String {
    let path = e.path().to_string();
    let detail = strip_position(&e.into_inner().to_string());
    if path == "." {
        detail
    } else {
        format!("field {path}: {detail}")
    }
}

/// serde_json appends " at line 1 column 42"; the field path says more.
pub(crate) fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}
