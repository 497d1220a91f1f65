//! The schema's migrations, embedded in the binary: one set where the SQL is the same for both
//! stores (`migrations/common`) and a file per store where it differs
//! (`migrations/{sqlite,postgres}`). Each file is named `<version>_<description>.sql` and is
//! recorded as sqlx records a migrations directory (same version, description and checksum),
//! so databases migrated before this layout keep their history.

use std::borrow::Cow;

use futures_util::future::BoxFuture;
use sqlx::error::BoxDynError;
use sqlx::migrate::{MigrateError, Migration, MigrationSource, MigrationType, Migrator};

use super::db::Backend;

/// A migration file: its name and its SQL.
type File = (&'static str, &'static str);

/// The files of one folder under `migrations/`, by name.
macro_rules! files {
    ($dir:literal: $($name:literal),* $(,)?) => {
        &[$(($name, include_str!(concat!("../../migrations/", $dir, "/", $name)))),*]
    };
}

const SQLITE: &[File] = files!("sqlite": "0001_init.sql");
const POSTGRES: &[File] = files!("postgres": "0001_init.sql");
const COMMON: &[File] = files!("common":
    "0002_tools.sql",
    "0003_audit.sql",
    "0004_quotas.sql",
    "0005_spend.sql",
    "0006_token_keys.sql",
    "0007_actas.sql",
    "0008_guards.sql",
    "0009_filter_window.sql",
    "0010_webhooks.sql",
    "0011_provision.sql",
    "0012_oauth_flows.sql",
    "0013_model_auth_config.sql",
    "0014_interactive.sql",
    "0015_audit_indexes.sql",
    "0016_interactive_consents.sql",
    "0017_interactive_client_purge.sql",
    "0018_actas_unverified_email.sql",
    "0019_provision_link_agent.sql",
);

/// The migrations of one store: its own files, then the common ones.
#[derive(Debug)]
struct Embedded(&'static [File]);

impl MigrationSource<'static> for Embedded {
    fn resolve(self) -> BoxFuture<'static, Result<Vec<Migration>, BoxDynError>> {
        Box::pin(async move { all(self.0) })
    }
}

fn all(own: &'static [File]) -> Result<Vec<Migration>, BoxDynError> {
    let mut out = own
        .iter()
        .chain(COMMON)
        .map(migration)
        .collect::<Result<Vec<_>, _>>()?;
    out.sort_by_key(|m| m.version);
    Ok(out)
}

/// A file as sqlx reads it from a directory: the version before the first `_`, the rest of
/// the name without `.sql` and with spaces for `_` as its description.
fn migration((name, sql): &File) -> Result<Migration, BoxDynError> {
    let (version, rest) = name
        .split_once('_')
        .filter(|(_, rest)| rest.ends_with(".sql"))
        .ok_or_else(|| format!("migration {name}: expected <version>_<description>.sql"))?;
    let version: i64 = version
        .parse()
        .map_err(|_| format!("migration {name}: the version is not a number"))?;
    let kind = MigrationType::from_filename(rest);
    let description = rest.trim_end_matches(kind.suffix()).replace('_', " ");
    Ok(Migration::new(
        version,
        Cow::Owned(description),
        kind,
        Cow::Borrowed(sql),
        sql.starts_with("-- no-transaction"),
    ))
}

/// The migrator of a store.
pub async fn migrator(backend: Backend) -> Result<Migrator, MigrateError> {
    let own = match backend {
        Backend::Sqlite => SQLITE,
        Backend::Postgres => POSTGRES,
    };
    Migrator::new(Embedded(own)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file under `migrations/` is embedded, each once, for its store.
    #[test]
    fn every_migration_file_is_embedded() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        for (folder, listed) in [
            ("common", COMMON),
            ("sqlite", SQLITE),
            ("postgres", POSTGRES),
        ] {
            let mut on_disk: Vec<String> = std::fs::read_dir(dir.join(folder))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            on_disk.sort();
            let listed: Vec<&str> = listed.iter().map(|(name, _)| *name).collect();
            assert_eq!(on_disk, listed, "migrations/{folder}");
        }
    }

    /// What deployments recorded when these migrations ran (before they were embedded this
    /// way): SHA-256 over `version:checksum` lines, read from `_sqlx_migrations` of a SQLite
    /// and a PostgreSQL database migrated by the previous release. A migration that ran must
    /// never change; a new one changes these.
    #[test]
    fn applied_migrations_keep_their_checksums() {
        use sha2::{Digest, Sha256};
        let recorded = |own| {
            let lines: String = all(own)
                .unwrap()
                .iter()
                .map(|m| format!("{}:{}\n", m.version, hex::encode(&m.checksum)))
                .collect();
            hex::encode(Sha256::digest(lines.as_bytes()))
        };
        assert_eq!(
            recorded(SQLITE),
            "aebfa6f96dbd54994ae294822318700e533115306863d85c6f78a413e4f1343d"
        );
        assert_eq!(
            recorded(POSTGRES),
            "53d85ae1154b24c8d42a4a684216bcf9c3d9906a3fb5676a66a9e23182b5f8f6"
        );
    }

    /// Each store's versions run 1, 2, 3, … with descriptions as sqlx names them.
    #[test]
    fn each_store_has_one_migration_per_version() {
        for own in [SQLITE, POSTGRES] {
            let all = all(own).unwrap();
            let versions: Vec<i64> = all.iter().map(|m| m.version).collect();
            assert_eq!(versions, (1..=all.len() as i64).collect::<Vec<_>>());
            assert_eq!(all[0].description, "init");
            assert_eq!(all[12].description, "model auth config");
        }
    }
}
