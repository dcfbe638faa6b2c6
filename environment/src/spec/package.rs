//! A Debian package name, checked against Debian Policy's grammar (§5.6.7:
//! lower-case letters, digits, `+`, `-` and `.`, at least two characters,
//! starting with a letter or digit). The names reach `apt-get install` as
//! arguments: the grammar is what keeps a name from being an option
//! (`-o…`), a version or release pin (`foo=1.0`, `foo/sid`), an
//! architecture (`foo:i386`) or a path to a local `.deb`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Longer than any package in the archive; a bound on what is shown back.
pub const MAX_PACKAGE_NAME: usize = 128;

/// A valid Debian package name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct DebianPackage(String);

/// Why a name is not a Debian package name; its Display names the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PackageNameError {
    #[error("`{name}` is not a Debian package name: a name has at least two characters")]
    TooShort { name: String },
    #[error("a Debian package name has at most {MAX_PACKAGE_NAME} characters; this one has {len}")]
    TooLong { len: usize },
    #[error(
        "`{name}` is not a Debian package name: a name starts with a lower-case letter or a digit"
    )]
    BadStart { name: String },
    #[error("`{name}` is not a Debian package name: {found:?} is not allowed (only lower-case letters, digits, `+`, `-` and `.`)")]
    BadCharacter { name: String, found: char },
}

impl DebianPackage {
    pub fn new(name: &str) -> Result<Self, PackageNameError> {
        let len = name.chars().count();
        if len > MAX_PACKAGE_NAME {
            return Err(PackageNameError::TooLong { len });
        }
        let mut chars = name.chars();
        match chars.next() {
            Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit() => {}
            Some(_) => {
                return Err(PackageNameError::BadStart {
                    name: name.to_owned(),
                })
            }
            None => {
                return Err(PackageNameError::TooShort {
                    name: name.to_owned(),
                })
            }
        }
        if let Some(found) = name
            .chars()
            .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(*c)))
        {
            return Err(PackageNameError::BadCharacter {
                name: name.to_owned(),
                found,
            });
        }
        if len < 2 {
            return Err(PackageNameError::TooShort {
                name: name.to_owned(),
            });
        }
        Ok(DebianPackage(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DebianPackage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for DebianPackage {
    type Error = PackageNameError;
    fn try_from(name: String) -> Result<Self, Self::Error> {
        DebianPackage::new(&name)
    }
}

impl From<DebianPackage> for String {
    fn from(package: DebianPackage) -> String {
        package.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_in_the_archive_are_accepted() {
        for name in [
            "nodejs",
            "python3-venv",
            "libstdc++6",
            "g++",
            "0ad",
            "golang-go",
            "libgtk-3.0",
        ] {
            assert_eq!(DebianPackage::new(name).unwrap().as_str(), name);
        }
    }

    #[test]
    fn names_outside_the_grammar_are_refused_naming_the_rule() {
        let cases: [(&str, &str); 9] = [
            ("", "at least two characters"),
            ("a", "at least two characters"),
            ("-oDebug=1", "starts with a lower-case letter or a digit"),
            ("Nodejs", "starts with a lower-case letter or a digit"),
            ("nodejs=18", "'=' is not allowed"),
            ("nodejs:i386", "':' is not allowed"),
            ("nodejs/sid", "'/' is not allowed"),
            ("node js", "' ' is not allowed"),
            ("pythön", "'ö' is not allowed"),
        ];
        for (name, rule) in cases {
            let error = DebianPackage::new(name).unwrap_err().to_string();
            assert!(error.contains(rule), "{name:?}: {error}");
        }
        let long = "a".repeat(MAX_PACKAGE_NAME + 1);
        assert!(matches!(
            DebianPackage::new(&long),
            Err(PackageNameError::TooLong { .. })
        ));
        assert!(DebianPackage::new(&long[1..]).is_ok());
    }

    #[test]
    fn deserializing_checks_the_grammar() {
        let ok: DebianPackage = serde_json::from_str("\"nodejs\"").unwrap();
        assert_eq!(ok.as_str(), "nodejs");
        assert!(serde_json::from_str::<DebianPackage>("\"-y\"").is_err());
    }
}
