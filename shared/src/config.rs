//! Start-up configuration shared by the daemons: defaults ← TOML file ← `PORTCULLIS_*`
//! environment (only the keys the daemon knows, so other tools' variables do not collide) ←
//! the flags given on the command line. Unknown keys in the file are errors.

use std::path::Path;

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::de::DeserializeOwned;
use serde::Serialize;

pub fn load<T: Serialize + DeserializeOwned>(
    defaults: T,
    file: Option<&Path>,
    env_keys: &[&str],
    flags: &impl Serialize,
) -> Result<T, Box<figment::Error>> {
    let mut figment = Figment::from(Serialized::defaults(defaults));
    if let Some(path) = file {
        figment = figment.merge(Toml::file_exact(path));
    }
    figment
        .merge(Env::prefixed("PORTCULLIS_").only(env_keys))
        .merge(Serialized::defaults(flags))
        .extract()
        .map_err(Box::new)
}
