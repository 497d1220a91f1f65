//! The last-known-good snapshot on disk, sealed with a key derived from this deployment's
//! token: only a process holding the token can read the upstream secrets in it.

use std::path::{Path, PathBuf};

use portcullis_shared::seal::Cipher;
use portcullis_shared::snapshot::Snapshot;

const FILE: &str = "snapshot.lkg";
const LABEL: &str = "portcullis-gateway-lkg";

pub struct LastKnownGood {
    path: PathBuf,
    cipher: Cipher,
}

impl LastKnownGood {
    pub fn new(data_dir: &Path, token: &str) -> Self {
        Self {
            path: data_dir.join(FILE),
            cipher: Cipher::derived(LABEL, token),
        }
    }

    /// Reads the stored snapshot; `None` when there is none or it cannot be opened.
    pub fn load(&self) -> Option<Snapshot> {
        let sealed = std::fs::read_to_string(&self.path).ok()?;
        let opened = match self.cipher.open(LABEL, sealed.trim()) {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "Last-known-good snapshot unreadable; ignoring it.");
                return None;
            }
        };
        match serde_json::from_slice(&opened) {
            Ok(snapshot) => Some(snapshot),
            Err(e) => {
                tracing::warn!(error = %e, "Last-known-good snapshot is not a snapshot; ignoring it.");
                None
            }
        }
    }

    /// Writes atomically (temp file, then rename), readable by the owner only; the snapshot
    /// is serialized once and sealed in place, so a large one costs its size once more.
    pub fn store(&self, snapshot: &Snapshot) -> std::io::Result<()> {
        let json = serde_json::to_vec(snapshot)?;
        let tmp = self.path.with_extension("lkg.tmp");
        {
            use std::io::Write;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                options.mode(0o600);
            }
            let mut file = std::io::BufWriter::new(options.open(&tmp)?);
            self.cipher.seal_into(LABEL, json, &mut file)?;
            file.flush()?;
            file.into_inner()
                .map_err(std::io::IntoInnerError::into_error)?
                .sync_all()?;
        }
        std::fs::rename(&tmp, &self.path)
    }
}
