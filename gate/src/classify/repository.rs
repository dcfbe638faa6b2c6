//! A repository's own word on what is ordinary, in the `[gate]` table of
//! the base branch's `.forgehand.toml` (never the agent's edited copy):
//!
//! ```toml
//! [gate]
//! ordinary = ["tests/fixtures/**", "config/*.yaml"]   # widens the built-in list
//! held = ["migrations/**"]                            # narrows it; wins over `ordinary`
//! ```
//!
//! Patterns are the catalogue's (`**`, `*`, `{a,b}`), compared folded as
//! names are. No pattern makes a link, a submodule, a mode change, a git
//! control file or `.forgehand.toml` itself ordinary.

use crate::integrity::glob::Glob;

use super::names::{fold, FoldedPath};

/// The patterns of `[gate]`, compiled.
#[derive(Debug, Clone, Default)]
pub struct RepoRules {
    ordinary: Vec<(String, Glob)>,
    held: Vec<(String, Glob)>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(".forgehand.toml, [gate]: {0}")]
pub struct RepoRulesError(pub String);

/// Most patterns one list may hold.
const MAX_PATTERNS: usize = 200;

impl RepoRules {
    /// The built-in list alone.
    pub fn none() -> RepoRules {
        RepoRules::default()
    }

    /// The rules of a `.forgehand.toml` whose bytes are `bytes`; none
    /// when it has no `[gate]` table.
    pub fn parse(bytes: &[u8]) -> Result<RepoRules, RepoRulesError> {
        let bad = |why: String| RepoRulesError(why);
        let text = std::str::from_utf8(bytes).map_err(|_| bad("the file is not UTF-8".into()))?;
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| bad(format!("not TOML: {}", e.message())))?;
        let Some(gate) = table.get("gate") else {
            return Ok(RepoRules::none());
        };
        let gate = gate
            .as_table()
            .ok_or_else(|| bad("expected a table ([gate])".into()))?;
        let mut rules = RepoRules::none();
        for (key, value) in gate {
            let list = match key.as_str() {
                "ordinary" => &mut rules.ordinary,
                "held" => &mut rules.held,
                other => {
                    return Err(bad(format!(
                        "unknown key `{other}`: [gate] has `ordinary` and `held`"
                    )))
                }
            };
            let patterns = value
                .as_array()
                .ok_or_else(|| bad(format!("`{key}`: expected a list of path patterns")))?;
            if patterns.len() > MAX_PATTERNS {
                return Err(bad(format!("`{key}`: at most {MAX_PATTERNS} patterns")));
            }
            for pattern in patterns {
                let pattern = pattern
                    .as_str()
                    .filter(|p| !p.trim().is_empty() && !p.starts_with('/'))
                    .ok_or_else(|| {
                        bad(format!("`{key}`: each entry is a path pattern relative to the repository's root, like \"tests/fixtures/**\""))
                    })?;
                let folded: Vec<String> = pattern.split('/').map(fold).collect();
                list.push((pattern.to_owned(), Glob::new(&folded.join("/"))));
            }
        }
        Ok(rules)
    }

    /// The `held` pattern that names `path`, if one does.
    pub fn held_by(&self, path: &FoldedPath) -> Option<String> {
        first_match(&self.held, path)
    }

    /// The `ordinary` pattern that names `path`, if one does.
    pub fn ordinary_by(&self, path: &FoldedPath) -> Option<String> {
        first_match(&self.ordinary, path)
    }

    /// The patterns as written: `(ordinary, held)`.
    pub fn patterns(&self) -> (Vec<&str>, Vec<&str>) {
        (
            self.ordinary.iter().map(|(p, _)| p.as_str()).collect(),
            self.held.iter().map(|(p, _)| p.as_str()).collect(),
        )
    }
}

fn first_match(list: &[(String, Glob)], path: &FoldedPath) -> Option<String> {
    let joined = path.joined();
    list.iter()
        .find(|(_, glob)| glob.matches(&joined))
        .map(|(pattern, _)| pattern.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_read_and_bad_ones_named() {
        let rules = RepoRules::parse(
            b"[environment]\ntest = \"pytest\"\n[gate]\nordinary = [\"tests/fixtures/**\", \"config/*.yaml\"]\nheld = [\"migrations/**\"]\n",
        )
        .unwrap();
        assert_eq!(
            rules
                .ordinary_by(&FoldedPath::new("Tests/Fixtures/a/b.json"))
                .as_deref(),
            Some("tests/fixtures/**")
        );
        assert_eq!(
            rules
                .ordinary_by(&FoldedPath::new("config/app.yaml"))
                .as_deref(),
            Some("config/*.yaml")
        );
        assert_eq!(
            rules
                .held_by(&FoldedPath::new("migrations/0001.py"))
                .as_deref(),
            Some("migrations/**")
        );
        assert!(rules.held_by(&FoldedPath::new("src/a.py")).is_none());
        assert!(RepoRules::parse(b"[environment]\n")
            .unwrap()
            .patterns()
            .0
            .is_empty());
        let err = RepoRules::parse(b"[gate]\nordinry = []\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            ".forgehand.toml, [gate]: unknown key `ordinry`: [gate] has `ordinary` and `held`"
        );
        assert!(RepoRules::parse(b"[gate]\nheld = \"x\"\n").is_err());
        assert!(RepoRules::parse(b"[gate]\nheld = [\"/abs\"]\n").is_err());
    }
}
