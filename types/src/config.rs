//! What the configuration's sections share, whichever crate reads them.

use serde::{Deserialize, Deserializer};

/// A list of strings, from a TOML array or a comma-separated string (the
/// only form an environment variable can carry); blanks dropped.
pub fn string_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    let raw = match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => s.split(',').map(str::to_owned).collect(),
        OneOrMany::Many(v) => v,
    };
    Ok(raw
        .into_iter()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect())
}
