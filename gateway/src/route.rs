//! First step of every request: which route the method and path name.
//! Gateway routes live under `…/gateways/{gateway_id}/`.

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route<'a> {
    Ready,
    Health,
    Metrics,
    ChatCompletions {
        gateway_id: &'a str,
    },
    /// Anthropic's Messages API.
    Messages {
        gateway_id: &'a str,
    },
    Models {
        gateway_id: &'a str,
    },
    Mcp {
        gateway_id: &'a str,
    },
    /// The protected resource metadata of a gateway's `/mcp` (RFC 9728), at
    /// `{gateway_url}/.well-known/oauth-protected-resource` or at the well-known URL RFC 9728
    /// derives from `{gateway_url}/mcp`.
    ResourceMetadata {
        gateway_id: &'a str,
    },
    /// A gateway path with no route behind it (method or path unknown).
    UnknownGatewayPath {
        gateway_id: &'a str,
    },
    NotFound,
}

impl Route<'_> {
    /// The shape this route's errors take.
    pub fn shape(&self) -> crate::error::Shape {
        use crate::error::Shape;
        match self {
            Route::Messages { .. } => Shape::Anthropic,
            Route::Mcp { .. } => Shape::JsonRpc,
            _ => Shape::OpenAi,
        }
    }

    /// The metrics label of this route.
    pub fn kind(&self) -> &'static str {
        match self {
            Route::ChatCompletions { .. } => "chat",
            Route::Messages { .. } => "messages",
            Route::Models { .. } => "models",
            Route::Mcp { .. } => "mcp",
            _ => "other",
        }
    }
}

/// The well-known path of protected resource metadata (RFC 9728 §3).
pub const RESOURCE_METADATA: &str = "/.well-known/oauth-protected-resource";

pub fn route<'a>(method: &str, path: &'a str) -> Route<'a> {
    let path = path.split('?').next().unwrap_or_default();
    match (method, path) {
        ("GET", "/ready") => return Route::Ready,
        ("GET", "/healthz") => return Route::Health,
        ("GET", "/metrics") => return Route::Metrics,
        _ => {}
    }
    let Some(start) = path.find("/gateways/") else {
        return Route::NotFound;
    };
    let rest = &path[start + "/gateways/".len()..];
    let (gateway_id, tail) = rest.split_once('/').unwrap_or((rest, ""));
    if gateway_id.is_empty() {
        return Route::NotFound;
    }
    let tail = tail.trim_end_matches('/');
    if path.starts_with(RESOURCE_METADATA) {
        return match (method, tail) {
            ("GET", "mcp") => Route::ResourceMetadata { gateway_id },
            _ => Route::NotFound,
        };
    }
    match (method, tail) {
        ("POST", "v1/chat/completions") => Route::ChatCompletions { gateway_id },
        ("POST", "v1/messages") => Route::Messages { gateway_id },
        ("GET", "v1/models") => Route::Models { gateway_id },
        ("POST", "mcp") => Route::Mcp { gateway_id },
        ("GET", ".well-known/oauth-protected-resource") => Route::ResourceMetadata { gateway_id },
        _ => Route::UnknownGatewayPath { gateway_id },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(route("GET", "/ready"), Route::Ready);
        assert_eq!(
            route("POST", "/gateways/g1/v1/chat/completions"),
            Route::ChatCompletions { gateway_id: "g1" }
        );
        assert_eq!(
            route("POST", "/prefix/gateways/g1/v1/chat/completions?x=1"),
            Route::ChatCompletions { gateway_id: "g1" }
        );
        assert_eq!(
            route("GET", "/gateways/g1/v1/models"),
            Route::Models { gateway_id: "g1" }
        );
        assert_eq!(
            route("GET", "/gateways/g1/v1/chat/completions"),
            Route::UnknownGatewayPath { gateway_id: "g1" }
        );
        assert_eq!(route("POST", "/gateways//v1/models"), Route::NotFound);
        assert_eq!(
            route("POST", "/gateways/g1/mcp"),
            Route::Mcp { gateway_id: "g1" }
        );
        assert_eq!(route("GET", "/other"), Route::NotFound);
        let metadata = Route::ResourceMetadata { gateway_id: "g1" };
        assert_eq!(
            route("GET", "/gateways/g1/.well-known/oauth-protected-resource"),
            metadata
        );
        assert_eq!(
            route(
                "GET",
                "/.well-known/oauth-protected-resource/p/gateways/g1/mcp"
            ),
            metadata
        );
        assert_eq!(
            route(
                "POST",
                "/.well-known/oauth-protected-resource/gateways/g1/mcp"
            ),
            Route::NotFound
        );
        assert_eq!(
            route("POST", "/gateways/g1/v1/messages"),
            Route::Messages { gateway_id: "g1" }
        );
    }
}
