//! What make would remake a file from: its built-in rules' sources and
//! the pattern rules of the Makefiles it reads.

/// The suffixes of the files make's built-in rules make a file from (GNU
/// make's suffix list, and `.sh` for `%: %.sh`).
pub(super) const MAKE_SOURCES: &[&str] = &[
    ".sh", ".c", ".cc", ".cpp", ".C", ".o", ".s", ".S", ".f", ".F", ".r", ".p", ".y", ".l", ".ym",
    ".lm", ".mod", ".sym", ".def", ".w", ".ch", ".web", ".tex", ".texi", ".texinfo", ".txinfo",
];

/// Pattern rules read from Makefiles, at most.
pub(super) const MAX_MAKE_RULES: usize = 256;
/// Names make may be asked for that the rules are applied to, at most.
pub(super) const MAX_NAMED: usize = 4096;

/// Whether `path` is a file make reads its rules from.
pub(super) fn is_makefile(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    ["Makefile", "makefile", "GNUmakefile"].contains(&name) || name.ends_with(".mk")
}

/// The pattern rules of a Makefile's text, as (target, prerequisite)
/// pairs holding `%`: `%: %.in`, `tools/%: zz/%`, and a static pattern
/// rule's `tools/install: tools/%: zz/%.sh`. Assignments (`x := %`) and
/// recipes are not rules.
pub(super) fn make_rules(text: &str, max: usize) -> Vec<(String, String)> {
    let mut rules = Vec::new();
    let joined = text.replace("\\\n", " ");
    for line in joined.lines() {
        if line.starts_with('\t') || rules.len() >= max {
            continue;
        }
        let line = line.split('#').next().unwrap_or(line);
        let parts: Vec<&str> = line.split(':').collect();
        let (targets, prerequisites) = match parts.as_slice() {
            [_, rest @ ..] if rest.first().is_some_and(|r| r.starts_with('=')) => continue,
            [targets, prerequisites] => (*targets, *prerequisites),
            [_, targets, prerequisites] => (*targets, *prerequisites),
            _ => continue,
        };
        let prerequisites = prerequisites.split(';').next().unwrap_or(prerequisites);
        for target in targets.split_whitespace().filter(|t| t.contains('%')) {
            for prerequisite in prerequisites
                .split_whitespace()
                .filter(|p| p.contains('%') && *p != "|")
            {
                if rules.len() < max {
                    rules.push((target.to_owned(), prerequisite.to_owned()));
                }
            }
        }
    }
    rules
}

/// The prerequisite `prerequisite` names for `path` when `path` matches
/// the target pattern `target`: a pattern without a slash matches the
/// file's name, and the directory is put back before the prerequisite,
/// as make does.
pub(super) fn pattern_source(path: &str, target: &str, prerequisite: &str) -> Option<String> {
    let (dir, matched) = match target.contains('/') {
        true => ("", path),
        false => match path.rsplit_once('/') {
            Some((dir, name)) => (dir, name),
            None => ("", path),
        },
    };
    let (before, after) = target.split_once('%')?;
    let stem = matched.strip_prefix(before)?.strip_suffix(after)?;
    let source = prerequisite.replacen('%', stem, 1);
    Some(match dir {
        "" => source,
        dir => format!("{dir}/{source}"),
    })
}
