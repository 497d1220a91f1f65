//! Files only this process's user may read (DESIGN §24): data directories 0700, and the
//! database, keys and spools inside them 0600. On other platforms these are plain creates.

use std::path::Path;

/// Creates `dir` (and its parents) if needed and makes it private to the owner: a data dir
/// holds the database, the master key and audit events.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    restrict(dir, 0o700)
}

/// Makes an existing file private to the owner; a missing file is left alone.
pub fn private_file(path: &Path) -> std::io::Result<()> {
    match restrict(path, 0o600) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(unix)]
fn restrict(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let current = std::fs::metadata(path)?.permissions().mode() & 0o777;
    if current & !mode == 0 {
        return Ok(());
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(current & mode))
}

#[cfg(not(unix))]
fn restrict(_path: &Path, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn data_dirs_and_files_are_the_owners_alone() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/data");
        private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700, "an existing open dir is closed");
        let db = dir.join("portcullis.db");
        std::fs::write(&db, b"x").unwrap();
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
        private_file(&db).unwrap();
        assert_eq!(mode(&db), 0o600);
        private_file(&dir.join("missing")).unwrap();
    }
}
