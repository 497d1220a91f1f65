//! First start: the `default` workspace, its `default` gateway (carrying the default marker)
//! and an `admin` platform key, written once to `DATA_DIR/admin.key` (mode 0600). Later starts
//! find them and change nothing.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use portcullis_shared::api::gateways::GatewayState;
use portcullis_shared::api::workspace::Role;
use portcullis_shared::seal::Cipher;

use crate::api::new_platform_key;
use crate::store::{gateways, now_ms, workspaces, Store};

pub const WORKSPACE_NAME: &str = "default";
pub const GATEWAY_NAME: &str = "default";

#[derive(Debug, Clone)]
pub struct Bootstrap {
    pub workspace_id: String,
    pub default_gateway_id: String,
    /// Path of the admin key file.
    pub admin_key_path: PathBuf,
    /// Set only on the start that created the key.
    pub new_admin_key: Option<String>,
}

impl Bootstrap {
    /// On the start that created the admin key, says where it is stored (DESIGN §11), and
    /// prints the key itself once when standard output is a terminal: a service manager's or
    /// container's captured output is no place for it (DESIGN §24). Later starts print
    /// nothing. Logs name the file, never the key.
    pub fn announce(&self) {
        let Some(key) = &self.new_admin_key else {
            return;
        };
        tracing::info!(path = %self.admin_key_path.display(), "Admin platform key created.");
        let mut out = std::io::stdout().lock();
        let path = self.admin_key_path.display();
        let _ = if out.is_terminal() {
            writeln!(
                out,
                "Admin platform key (shown once): {key}\nIt is stored in {path} (mode 0600); \
                 the portcullis command reads it from there."
            )
        } else {
            writeln!(
                out,
                "Admin platform key created and stored in {path} (mode 0600); it is not \
                 printed because standard output is not a terminal. The portcullis command \
                 reads it from there."
            )
        };
        let _ = out.flush();
    }
}

/// Writes a file only the owner can read.
pub fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(contents.as_bytes())?;
    file.sync_all()
}

/// The master key: from configuration, else `master.key` in the data dir, created if absent.
pub fn master_cipher(configured: Option<&str>, data_dir: &Path) -> anyhow::Result<Cipher> {
    if let Some(key) = configured {
        return Cipher::from_base64(key).context("PORTCULLIS_MASTER_KEY");
    }
    let path = data_dir.join("master.key");
    if !path.exists() {
        write_private(&path, &Cipher::generate_key())
            .with_context(|| format!("creating {}", path.display()))?;
    }
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Cipher::from_base64(&text).with_context(|| format!("{} holds no valid key", path.display()))
}

pub async fn ensure(store: &Store, data_dir: &Path) -> anyhow::Result<Bootstrap> {
    let admin_key_path = data_dir.join("admin.key");
    for _attempt in 0..3 {
        let mut conn = store.read().await?;
        if let Some(ws) = workspaces::workspace_by_name(&mut conn, WORKSPACE_NAME).await? {
            let list = gateways::list(&mut conn, &ws.id).await?;
            let gateway = list
                .iter()
                .find(|g| g.is_default != 0)
                .or_else(|| list.iter().find(|g| g.name == GATEWAY_NAME))
                .map(|g| g.id.clone())
                .unwrap_or_default();
            return Ok(Bootstrap {
                workspace_id: ws.id,
                default_gateway_id: gateway,
                admin_key_path,
                new_admin_key: None,
            });
        }
        drop(conn);
        match create(store, &admin_key_path).await {
            Ok(b) => return Ok(b),
            // Another control plane on the same database won the race; read what it made.
            Err(e)
                if e.downcast_ref::<crate::store::StoreError>()
                    .is_some_and(|s| s.is_unique_violation()) =>
            {
                continue
            }
            Err(e) => return Err(e),
        }
    }
    anyhow::bail!("could not bootstrap the default workspace")
}

async fn create(store: &Store, admin_key_path: &Path) -> anyhow::Result<Bootstrap> {
    let now = now_ms();
    let ws = workspaces::WorkspaceRow {
        id: uuid::Uuid::new_v4().to_string(),
        name: WORKSPACE_NAME.to_string(),
        plan: "pro".to_string(),
        revision: 1,
        created_at: now,
        actas_min_method: "none".to_string(),
        filter_window_bytes: 0,
        filter_window_tokens: 0,
    };
    let gateway = gateways::GatewayRow {
        id: uuid::Uuid::new_v4().to_string(),
        workspace_id: ws.id.clone(),
        name: GATEWAY_NAME.to_string(),
        description: "Created on first start.".to_string(),
        state: GatewayState::Active.as_str().to_string(),
        is_default: 1,
        all_agents: 0,
        created_at: now,
        updated_at: now,
    };
    let (key, token) = new_platform_key(&ws.id, "admin", Role::Admin, &Role::Admin.permissions());
    let mut tx = store.write_unscoped().await?;
    workspaces::insert_workspace(tx.conn(), &ws).await?;
    gateways::insert(tx.conn(), &gateway).await?;
    workspaces::insert_platform_key(tx.conn(), &key).await?;
    let pending = admin_key_path.with_extension("key.pending");
    write_private(&pending, &format!("{token}\n"))
        .with_context(|| format!("writing {}", pending.display()))?;
    if let Err(e) = tx.commit().await {
        let _ = std::fs::remove_file(&pending);
        return Err(e.into());
    }
    std::fs::rename(&pending, admin_key_path)
        .with_context(|| format!("writing {}", admin_key_path.display()))?;
    tracing::info!(workspace_id = %ws.id, gateway_id = %gateway.id, "Bootstrapped the default workspace.");
    Ok(Bootstrap {
        workspace_id: ws.id,
        default_gateway_id: gateway.id,
        admin_key_path: admin_key_path.to_path_buf(),
        new_admin_key: Some(token),
    })
}
