//! The tool step's table: each tool connection compiled (how it is reached, its catalog,
//! its secrets to scrub), and what each gateway offers of them.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use http::{HeaderName, HeaderValue};

/// The workspace's tool connections, by name (the prefix of `connection/tool`).
pub type ToolsByName = HashMap<String, Arc<ToolEntry>>;

/// What one gateway offers of the workspace's tools.
#[derive(Default)]
pub struct GatewayTools {
    /// Tool connections attached whole, by id.
    pub sources: HashSet<String>,
    /// Single operations attached: (connection id, operation).
    pub members: HashSet<(String, String)>,
    /// Every tool connection something of which is attached, in name order.
    pub connections: Vec<Arc<ToolEntry>>,
}

impl GatewayTools {
    /// Whether this gateway offers the operation.
    pub fn offers(&self, connection_id: &str, tool: &str) -> bool {
        self.sources.contains(connection_id)
            || self
                .members
                .contains(&(connection_id.to_string(), tool.to_string()))
    }
}

/// The tool tables a request reads: the workspace's connections and this gateway's offer.
#[derive(Clone, Copy)]
pub struct Tools<'a> {
    pub by_name: &'a ToolsByName,
    pub gateway: &'a GatewayTools,
}

/// How the gateway reaches a tool connection's MCP server.
#[derive(Debug, Clone)]
pub enum ToolTransport {
    Http {
        url: reqwest::Url,
        /// Literal, secret and credential headers, sent on every request.
        headers: Vec<(HeaderName, HeaderValue)>,
        /// Headers that carry the caller's act-as assertion.
        actas_headers: Vec<HeaderName>,
    },
    Stdio {
        command: String,
        args: Vec<String>,
        /// The configured environment plus the connection's secret values.
        env: Vec<(String, String)>,
        cwd: Option<String>,
    },
    /// A catalog adapter: its operations are HTTP requests the gateway makes itself.
    Rest {
        adapter: std::sync::Arc<super::upstream::rest::RestAdapter>,
    },
}

pub struct ToolEntry {
    pub id: String,
    pub name: String,
    /// Each person calls with their own API key or OAuth grant ([`crate::peruser`]).
    pub per_user: bool,
    /// Calls carry the connection's shared OAuth access token, asked of the control plane
    /// and refreshed there ([`crate::peruser`], subject `""`).
    pub shared_oauth: bool,
    pub transport: ToolTransport,
    /// Operation → (status, message). Operations not in the catalog are not served.
    pub catalog: HashMap<String, (portcullis_shared::api::tools::ToolStatus, Option<String>)>,
    /// Changes whenever anything that affects calling the upstream changes.
    pub fingerprint: String,
    /// Why calls cannot be made (a cleared URL, a stdio tool on a gateway that runs none, …).
    pub unavailable: Option<String>,
    /// Secret values, to scrub from error messages.
    pub secret_values: Vec<String>,
    /// Classified fields of structured results: (field name or JSON pointer, class).
    pub classified: Vec<(String, String)>,
}
