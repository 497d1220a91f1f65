//! The last-known-good snapshot on disk, sealed with a key derived from this deployment's
//! token: only a process holding the token can read the upstream secrets in it.

use std::path::{Path, PathBuf};

use portcullis_shared::seal::Cipher;
use portcullis_shared::snapshot::{GetSnapshotResponse, Snapshot};

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
        drop(sealed);
        // The control plane's reply as received; a file of an earlier version holds the
        // snapshot alone (read as a reply, it has no `snapshot`).
        let parsed = match serde_json::from_slice::<GetSnapshotResponse>(&opened) {
            Ok(GetSnapshotResponse {
                snapshot: Some(snapshot),
                ..
            }) => Ok(snapshot),
            _ => serde_json::from_slice::<Snapshot>(&opened),
        };
        match parsed {
            Ok(snapshot) => Some(snapshot),
            Err(e) => {
                tracing::warn!(error = %e, "Last-known-good snapshot is not a snapshot; ignoring it.");
                None
            }
        }
    }

    /// Seals the control plane's reply `body` (a `GetSnapshotResponse`, as received) into a
    /// file beside the stored one, readable by the owner only, while the snapshot in it
    /// compiles: the body is written as it came rather than serialized again, and is freed
    /// before the compile's peak. [`Staged::keep`] makes it the stored snapshot.
    pub fn stage(&self, mut body: Vec<u8>) -> std::io::Result<Staged> {
        use std::io::Write;
        let tmp = self.path.with_extension("lkg.tmp");
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = std::io::BufWriter::new(options.open(&tmp)?);
        self.cipher.seal_into(LABEL, &mut body, &mut file)?;
        drop(body);
        file.flush()?;
        file.into_inner()
            .map_err(std::io::IntoInnerError::into_error)?
            .sync_all()?;
        Ok(Staged {
            tmp: Some(tmp),
            path: self.path.clone(),
        })
    }
}

/// A snapshot written beside the stored one; removed unless kept.
pub struct Staged {
    /// The written file, until it is kept.
    tmp: Option<PathBuf>,
    path: PathBuf,
}

impl Staged {
    /// Replaces the stored snapshot with this one, atomically (a rename).
    pub fn keep(mut self) -> std::io::Result<()> {
        match self.tmp.take() {
            Some(tmp) => std::fs::rename(tmp, &self.path),
            None => Ok(()),
        }
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(snapshot: &Snapshot) -> Vec<u8> {
        serde_json::to_vec(&GetSnapshotResponse {
            revision: snapshot.revision,
            snapshot: Some(snapshot.clone()),
        })
        .unwrap()
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_kept_reply_loads_as_its_snapshot_and_only_with_the_token() {
        let dir = tempfile::tempdir().unwrap();
        let lkg = LastKnownGood::new(dir.path(), "token-1");
        let mut snapshot = crate::snapshot::tests::snapshot("");
        snapshot.public_url = "https://plain-text-marker.example".into();
        lkg.stage(reply(&snapshot)).unwrap().keep().unwrap();
        assert_eq!(files(dir.path()), ["snapshot.lkg"]);
        assert_eq!(lkg.load(), Some(snapshot.clone()));
        let text = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert!(!text.contains("plain-text-marker"), "sealed, not plain");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(LastKnownGood::new(dir.path(), "token-2").load(), None);
    }

    #[test]
    fn a_staged_reply_not_kept_leaves_the_stored_one() {
        let dir = tempfile::tempdir().unwrap();
        let lkg = LastKnownGood::new(dir.path(), "token");
        let stored = crate::snapshot::tests::snapshot("");
        lkg.stage(reply(&stored)).unwrap().keep().unwrap();
        let mut refused = stored.clone();
        refused.revision += 1;
        let staged = lkg.stage(reply(&refused)).unwrap();
        assert_eq!(files(dir.path()), ["snapshot.lkg", "snapshot.lkg.tmp"]);
        drop(staged);
        assert_eq!(files(dir.path()), ["snapshot.lkg"]);
        assert_eq!(lkg.load(), Some(stored));
    }

    #[test]
    fn a_file_holding_the_snapshot_alone_still_loads() {
        let dir = tempfile::tempdir().unwrap();
        let lkg = LastKnownGood::new(dir.path(), "token");
        let snapshot = crate::snapshot::tests::snapshot("");
        let mut json = serde_json::to_vec(&snapshot).unwrap();
        let mut sealed = Vec::new();
        lkg.cipher.seal_into(LABEL, &mut json, &mut sealed).unwrap();
        std::fs::write(dir.path().join(FILE), sealed).unwrap();
        assert_eq!(lkg.load(), Some(snapshot));
    }

    #[test]
    fn a_reply_without_a_snapshot_is_not_one() {
        let dir = tempfile::tempdir().unwrap();
        let lkg = LastKnownGood::new(dir.path(), "token");
        let body = br#"{"revision": 4, "snapshot": null}"#.to_vec();
        lkg.stage(body).unwrap().keep().unwrap();
        assert_eq!(lkg.load(), None);
    }
}
