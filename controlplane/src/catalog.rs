//! The adapter registry: the definitions shipped in `catalog/adapters` (compiled in), and any
//! in the configured `catalog_dir`, read on each call so a new version dropped there is seen
//! without a restart. A definition that does not check is refused at load with its file.

use std::path::{Path, PathBuf};

use portcullis_shared::adapter::{self, Definition};

/// `(file, text)` of every shipped definition.
const SHIPPED: &[(&str, &str)] = &[
    (
        "github-issues/v1.json",
        include_str!("../../catalog/adapters/github-issues/v1.json"),
    ),
    (
        "github-issues/v2.json",
        include_str!("../../catalog/adapters/github-issues/v2.json"),
    ),
    (
        "slack/v1.json",
        include_str!("../../catalog/adapters/slack/v1.json"),
    ),
    (
        "notion/v1.json",
        include_str!("../../catalog/adapters/notion/v1.json"),
    ),
];

#[derive(Debug, Clone, Default)]
pub struct Catalog {
    dir: Option<PathBuf>,
}

impl Catalog {
    pub fn new(dir: Option<PathBuf>) -> Self {
        Self { dir }
    }

    /// Every definition, by slug then version; a deployment's own file of the same slug and
    /// version replaces the shipped one.
    pub fn all(&self) -> Result<Vec<Definition>, String> {
        let mut out: Vec<Definition> = Vec::new();
        for (file, text) in SHIPPED {
            out.push(parse(file, text)?);
        }
        if let Some(dir) = &self.dir {
            for d in read_dir(dir)? {
                out.retain(|o| (o.slug.as_str(), o.version) != (d.slug.as_str(), d.version));
                out.push(d);
            }
        }
        out.sort_by(|a, b| (&a.slug, a.version).cmp(&(&b.slug, b.version)));
        Ok(out)
    }

    /// The newest enabled version of an adapter.
    pub fn latest(&self, slug: &str) -> Result<Option<Definition>, String> {
        Ok(self
            .all()?
            .into_iter()
            .rfind(|d| d.slug == slug && d.enabled))
    }
}

fn parse(file: &str, text: &str) -> Result<Definition, String> {
    let d: Definition =
        serde_json::from_str(text).map_err(|e| format!("catalog adapter {file}: {e}"))?;
    adapter::check(&d).map_err(|e| format!("catalog adapter {file}: {e}"))?;
    Ok(d)
}

/// `<dir>/<slug>/v<N>.json`; the folder must be the slug and the file the version.
fn read_dir(dir: &Path) -> Result<Vec<Definition>, String> {
    let mut out = Vec::new();
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("catalog_dir {}: {e}", dir.display()))?;
    for folder in entries.flatten().filter(|e| e.path().is_dir()) {
        let files = std::fs::read_dir(folder.path())
            .map_err(|e| format!("{}: {e}", folder.path().display()))?;
        for file in files.flatten() {
            let path = file.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let shown = path.display().to_string();
            let text = std::fs::read_to_string(&path).map_err(|e| format!("{shown}: {e}"))?;
            let d = parse(&shown, &text)?;
            let expected = (
                folder.file_name().to_string_lossy().to_string(),
                format!("v{}.json", d.version),
            );
            if (
                d.slug.clone(),
                file.file_name().to_string_lossy().to_string(),
            ) != expected
            {
                return Err(format!(
                    "catalog adapter {shown}: a definition of {} v{} belongs in {}/v{}.json",
                    d.slug, d.version, d.slug, d.version
                ));
            }
            out.push(d);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_adapters_load_and_the_newest_enabled_version_wins() {
        let c = Catalog::default();
        let all = c.all().unwrap();
        assert!(all.iter().any(|d| d.slug == "slack"));
        assert_eq!(c.latest("github-issues").unwrap().unwrap().version, 2);
        assert!(c.latest("nope").unwrap().is_none());
    }

    #[test]
    fn a_deployment_directory_adds_versions_and_a_disabled_one_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let mut v3: serde_json::Value = serde_json::from_str(SHIPPED[1].1).unwrap();
        v3["version"] = 3.into();
        v3["enabled"] = false.into();
        std::fs::create_dir_all(dir.path().join("github-issues")).unwrap();
        std::fs::write(dir.path().join("github-issues/v3.json"), v3.to_string()).unwrap();
        let c = Catalog::new(Some(dir.path().to_path_buf()));
        assert_eq!(
            c.all()
                .unwrap()
                .iter()
                .filter(|d| d.slug == "github-issues")
                .count(),
            3
        );
        assert_eq!(
            c.latest("github-issues").unwrap().unwrap().version,
            2,
            "v3 is disabled"
        );
        std::fs::write(dir.path().join("github-issues/v4.json"), v3.to_string()).unwrap();
        let err = c.all().unwrap_err();
        assert!(err.contains("belongs in github-issues/v3.json"), "{err}");
    }
}
