//! The path patterns of the catalogue: `/`-separated segments matched
//! against a path relative to the tree's root. A segment `**` is any
//! number of segments (none included), `*` inside a segment is any run of
//! characters but `/`, `{a,b,}` inside a segment is one of the listed
//! alternatives (an empty one included). Matching ignores ASCII case: a
//! checkout on macOS or Windows finds `MAKEFILE` where make looks for
//! `Makefile`.

/// A compiled pattern: its brace alternatives expanded.
#[derive(Debug, Clone)]
pub(crate) struct Glob {
    alternatives: Vec<Vec<Segment>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    AnyDepth,
    /// Lowercased pieces between the `*`s of one segment.
    Pieces(Vec<String>),
}

impl Glob {
    pub(crate) fn new(pattern: &str) -> Glob {
        let alternatives = expand_braces(pattern)
            .into_iter()
            .map(|alternative| alternative.split('/').map(Segment::new).collect())
            .collect();
        Glob { alternatives }
    }

    /// Whether `rel` (segments joined by `/`) matches.
    pub(crate) fn matches(&self, rel: &str) -> bool {
        let path: Vec<String> = rel.split('/').map(str::to_ascii_lowercase).collect();
        self.alternatives.iter().any(|a| match_segments(a, &path))
    }

    /// Whether `rel` is a directory on the way to a match: a path that
    /// the pattern's own named segments lead through (`.github` and
    /// `.github/workflows` for `.github/workflows/**`, `x/.cargo` for
    /// `**/.cargo/config.toml`), so a symlink there reroutes what the
    /// pattern watches. A directory that only a leading `**` covers is not
    /// one: every directory is on the way to some `**/Makefile`, and what
    /// a symlink there leads to is watched where it really is.
    pub(crate) fn leads_to(&self, rel: &str) -> bool {
        let path: Vec<String> = rel.split('/').map(str::to_ascii_lowercase).collect();
        self.alternatives.iter().any(|a| {
            (1..a.len()).any(|k| a[k - 1] != Segment::AnyDepth && match_segments(&a[..k], &path))
        })
    }
}

impl Segment {
    fn new(text: &str) -> Segment {
        if text == "**" {
            Segment::AnyDepth
        } else {
            Segment::Pieces(
                text.to_ascii_lowercase()
                    .split('*')
                    .map(str::to_owned)
                    .collect(),
            )
        }
    }

    fn matches(&self, name: &str) -> bool {
        let Segment::Pieces(pieces) = self else {
            return true;
        };
        let (first, rest) = pieces
            .split_first()
            .expect("split yields one piece at least");
        let Some(mut tail) = name.strip_prefix(first.as_str()) else {
            return false;
        };
        let Some((last, middle)) = rest.split_last() else {
            return tail.is_empty();
        };
        for piece in middle {
            match tail.find(piece.as_str()) {
                Some(at) => tail = &tail[at + piece.len()..],
                None => return false,
            }
        }
        tail.len() >= last.len() && tail.ends_with(last.as_str())
    }
}

fn match_segments(pattern: &[Segment], path: &[String]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((Segment::AnyDepth, rest)) => {
            (0..=path.len()).any(|skip| match_segments(rest, &path[skip..]))
        }
        Some((segment, rest)) => path
            .split_first()
            .is_some_and(|(name, tail)| segment.matches(name) && match_segments(rest, tail)),
    }
}

/// `a/{b,c}/{d,}` → `a/b/d`, `a/b/`, `a/c/d`, `a/c/`. Braces do not nest.
fn expand_braces(pattern: &str) -> Vec<String> {
    let Some(open) = pattern.find('{') else {
        return vec![pattern.to_owned()];
    };
    let close = open + pattern[open..].find('}').expect("a closed brace");
    let (head, tail) = (&pattern[..open], &pattern[close + 1..]);
    pattern[open + 1..close]
        .split(',')
        .flat_map(|choice| expand_braces(&format!("{head}{choice}{tail}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_stars_braces_and_any_depth() {
        let g = Glob::new("**/{GNUmakefile,makefile,Makefile}");
        assert!(g.matches("Makefile") && g.matches("a/b/makefile") && g.matches("x/MAKEFILE"));
        assert!(!g.matches("Makefile.am") && !g.matches("a/Makefile/x"));
        let g = Glob::new("**/*.mk");
        assert!(g.matches("rules.mk") && g.matches("a/.mk") && !g.matches("a/mk"));
        let g = Glob::new(".github/workflows/**");
        assert!(g.matches(".github/workflows/ci.yml") && g.matches(".github/workflows/a/b"));
        assert!(g.matches(".github/workflows"), "the directory itself");
        assert!(!g.matches("x/.github/workflows/ci.yml"));
        let g = Glob::new("**/rust-toolchain{,.toml}");
        assert!(g.matches("rust-toolchain") && g.matches("a/rust-toolchain.toml"));
        let g = Glob::new("**/Jenkinsfile*");
        assert!(g.matches("ci/Jenkinsfile.release") && g.matches("Jenkinsfile"));
        let g = Glob::new("a*b*c");
        assert!(g.matches("abc") && g.matches("aXbYc") && !g.matches("ab") && !g.matches("acb"));
    }

    #[test]
    fn directories_on_the_way_to_a_match() {
        let g = Glob::new(".github/workflows/**");
        assert!(g.leads_to(".github") && g.leads_to(".github/workflows"));
        assert!(!g.leads_to(".gitea") && !g.leads_to("src"));
        let g = Glob::new("**/.cargo/config{,.toml}");
        assert!(g.leads_to(".cargo") && g.leads_to("crates/x/.cargo"));
        assert!(!g.leads_to("crates/x"), "only the leading ** covers it");
        assert!(!Glob::new("**/Makefile").leads_to("src"));
    }
}
