//! Rule bundles parsed and validated once while their text stays the same, shared by every
//! snapshot that keeps them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::Rules;

/// A bundle's policies, parsed with qualified ids and validated.
type CheckedBundle = Arc<Rules>;

/// Id prefix → (policies text, the parsed and validated rules): a snapshot that changes one
/// agent checks one bundle, not every agent's, and every snapshot shares the rules of the
/// bundles it keeps.
#[derive(Default)]
pub struct BundleCache {
    bundles: Mutex<HashMap<String, (String, CheckedBundle)>>,
}

impl BundleCache {
    /// Parses and validates (strictly, against the schema) each bundle not checked before, by
    /// prefix and text, and forgets bundles the snapshot no longer has; the rules in the
    /// given order, or each bundle's error. Validation is per policy, so checking bundles
    /// apart finds what checking their union would. A bundle kept from the last snapshot is
    /// neither parsed nor copied again.
    pub fn checked_bundles<'a>(
        &self,
        bundles: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> Vec<Result<CheckedBundle, portcullis_shared::policy::PolicyError>> {
        use portcullis_shared::policy::PolicyError;
        let bundles: Vec<(&str, &str)> = bundles.collect();
        let mut cache = self.bundles.lock().unwrap_or_else(|e| e.into_inner());
        let mut last = std::mem::take(&mut *cache);
        let same = |entry: &(String, CheckedBundle), text: &str| entry.0 == text;
        // Each bundle not cached, once even when the snapshot holds it twice.
        let mut seen = std::collections::HashSet::new();
        let new: Vec<(&str, &str)> = bundles
            .iter()
            .copied()
            .filter(|(prefix, text)| !last.get(*prefix).is_some_and(|e| same(e, text)))
            .filter(|bundle| seen.insert(*bundle))
            .collect();
        let fresh: HashMap<(&str, &str), Result<CheckedBundle, PolicyError>> = new
            .iter()
            .copied()
            .zip(check_all(&new).into_iter().map(|r| r.map(Arc::new)))
            .collect();
        bundles
            .into_iter()
            .map(|(prefix, text)| {
                if let Some((key, entry)) = last.remove_entry(prefix).filter(|(_, e)| same(e, text))
                {
                    let set = entry.1.clone();
                    cache.insert(key, entry);
                    return Ok(set);
                }
                if let Some(entry) = cache.get(prefix).filter(|e| same(e, text)) {
                    return Ok(entry.1.clone());
                }
                let set = fresh.get(&(prefix, text)).cloned().unwrap_or_else(|| {
                    Err(PolicyError::Invalid("the bundle was not checked".into()))
                })?;
                cache.insert(prefix.to_string(), (text.to_string(), set.clone()));
                Ok(set)
            })
            .collect()
    }
}

/// Checks bundles on every core (a first snapshot of a large workspace holds thousands);
/// the results in the given order.
fn check_all(
    bundles: &[(&str, &str)],
) -> Vec<Result<Rules, portcullis_shared::policy::PolicyError>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = bundles.len().div_ceil(threads.max(1)).max(256);
    std::thread::scope(|scope| {
        let running: Vec<_> = bundles
            .chunks(chunk.max(1))
            .map(|part| (part.len(), scope.spawn(move || check_part(part))))
            .collect();
        running
            .into_iter()
            .flat_map(|(len, handle)| {
                handle.join().unwrap_or_else(|_| {
                    let failed = portcullis_shared::policy::PolicyError::Invalid(
                        "checking the bundle failed".into(),
                    );
                    (0..len).map(|_| Err(failed.clone())).collect()
                })
            })
            .collect()
    })
}

fn check_part(
    bundles: &[(&str, &str)],
) -> Vec<Result<Rules, portcullis_shared::policy::PolicyError>> {
    use portcullis_shared::policy;
    bundles
        .iter()
        .map(|(prefix, text)| match policy::check_bundle(prefix, text)? {
            policy::Checked::Permits(permits) => Ok(Rules::from_permits(permits)),
            policy::Checked::Cedar { set, .. } => Rules::new(*set),
        })
        .collect()
}
