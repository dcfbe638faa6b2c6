//! Names as the file systems that check them out compare them. macOS's
//! default file system folds case fully and ignores some code points
//! (git's `protectHFS` list); Windows folds case. A name the gate does
//! not recognise as `.vscode` must not be one a developer's machine opens
//! as `.vscode`: `.vſcode` (U+017F, which folds to `s`), `MaKefile` with
//! the Kelvin sign, `CLAUDE.md` with a zero-width space. So every name is
//! compared after: Unicode's format characters removed (a superset of
//! HFS+'s ignorable code points), NFC, full case folding (Unicode's
//! CaseFolding.txt, C and F), NFC again.

use unicode_normalization::UnicodeNormalization;

/// `name` as the gate compares it.
pub fn fold(name: &str) -> String {
    let visible: String = name.chars().filter(|c| !is_ignorable(*c)).collect();
    let composed: String = visible.nfc().collect();
    caseless::default_case_fold_str(&composed)
        .nfc()
        // NTFS's upper-case table maps the dotless i to `I`: `GEMıNı.md`
        // opens `GEMINI.md` there.
        .map(|c| if c == '\u{131}' { 'i' } else { c })
        .collect()
}

/// Whether a folded component has the form of a Windows short (8.3)
/// name (`CLAUDE~1`, `GITHUB~1.YML`), which Windows may resolve to any
/// long name: what it aliases cannot be known from the name.
pub fn is_short_name(component: &str) -> bool {
    component.find('~').is_some_and(|at| {
        component[at + 1..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit())
    })
}

/// What HFS+ ignores in a name, and every other format character (a
/// zero-width space shows nothing and means nothing to a reader).
fn is_ignorable(c: char) -> bool {
    forgehand_text::is_hidden(c) && !c.is_control()
}

/// A path's components, each folded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldedPath {
    pub components: Vec<String>,
}

impl FoldedPath {
    pub fn new(path: &str) -> FoldedPath {
        FoldedPath {
            components: path
                .split('/')
                .filter(|c| !c.is_empty())
                .map(fold)
                .collect(),
        }
    }

    /// The last component.
    pub fn name(&self) -> &str {
        self.components.last().map_or("", String::as_str)
    }

    /// The directories, outermost first.
    pub fn dirs(&self) -> &[String] {
        match self.components.split_last() {
            Some((_, dirs)) => dirs,
            None => &[],
        }
    }

    /// The path, folded, `/`-joined.
    pub fn joined(&self) -> String {
        self.components.join("/")
    }

    /// The name's extension: what follows its last dot, when the name
    /// has a dot that is not its first character.
    pub fn extension(&self) -> Option<&str> {
        let name = self.name();
        let at = name.rfind('.')?;
        (at > 0).then(|| &name[at + 1..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 25: names a case-insensitive file system folds onto watched
    /// ones.
    #[test]
    fn twins_fold_onto_the_name_they_imitate() {
        assert_eq!(fold(".v\u{17f}code"), ".vscode");
        assert_eq!(fold(".hu\u{17f}ky"), ".husky");
        assert_eq!(fold("Ma\u{212a}efile"), "makefile");
        assert_eq!(fold("CLAUDE\u{200b}.md"), "claude.md");
        assert_eq!(fold("AGENTS\u{200c}.md"), "agents.md");
        assert_eq!(fold("\u{feff}.github"), ".github");
        assert_eq!(fold("Stra\u{df}e.py"), "strasse.py");
        // Composed and decomposed forms are one name.
        assert_eq!(fold("cafe\u{301}.md"), fold("caf\u{e9}.md"));
        assert_eq!(fold("README.md"), "readme.md");
        // Red-team round 1 of issue 25: NTFS opens it as GEMINI.md.
        assert_eq!(fold("GEM\u{131}N\u{131}.md"), "gemini.md");
        assert!(is_short_name("claude~1"));
        assert!(is_short_name("github~2.yml"));
        assert!(!is_short_name("notes~draft.md"));
    }

    #[test]
    fn a_path_has_folded_components_a_name_and_an_extension() {
        let p = FoldedPath::new("Src/Tests/Test_Calc.PY");
        assert_eq!(p.components, ["src", "tests", "test_calc.py"]);
        assert_eq!(p.name(), "test_calc.py");
        assert_eq!(p.dirs(), ["src", "tests"]);
        assert_eq!(p.extension(), Some("py"));
        assert_eq!(FoldedPath::new(".bashrc").extension(), None);
        assert_eq!(FoldedPath::new("Makefile").extension(), None);
    }
}
