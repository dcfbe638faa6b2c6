//! Unknown keys, named where they were written: a key of the file by its
//! file and line, a variable by its name, each with the key it most
//! likely meant. The known keys are the configuration's own (its
//! defaults, serialised), so this list cannot drift from the types.

use std::path::Path;

use serde_json::Value;
use toml_edit::{ImDocument, Item};

use super::Config;

/// What the configuration knows: each section with its keys, and
/// whether a key is a table of the operator's own names
/// (`sandbox.env`, `model.prices`), where any name goes.
pub(super) fn known() -> Vec<(String, Vec<(String, bool)>)> {
    let defaults = serde_json::to_value(Config::default()).unwrap_or(Value::Null);
    let Value::Object(sections) = defaults else {
        return Vec::new();
    };
    sections
        .into_iter()
        .map(|(section, keys)| {
            let keys = match keys {
                Value::Object(keys) => keys
                    .into_iter()
                    .map(|(key, value)| (key, value.is_object()))
                    .collect(),
                _ => Vec::new(),
            };
            (section, keys)
        })
        .collect()
}

/// The nearest of `names` to `wrong`, when it is near enough to be
/// what was meant.
fn nearest<'a>(wrong: &str, names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    names
        .map(|name| (strsim::damerau_levenshtein(name, wrong), name))
        .filter(|(distance, name)| *distance <= 2.max(name.len() / 4))
        .min()
        .map(|(_, name)| name)
}

fn did_you_mean(suggestion: Option<&str>, wrap: impl Fn(&str) -> String) -> String {
    suggestion.map_or(String::new(), |s| format!(" (did you mean {}?)", wrap(s)))
}

/// What is wrong with `section.key`, or nothing when both are known.
fn problem(
    known: &[(String, Vec<(String, bool)>)],
    section: &str,
    key: Option<&str>,
) -> Option<String> {
    let Some((_, keys)) = known.iter().find(|(s, _)| s == section) else {
        let suggestion = nearest(section, known.iter().map(|(s, _)| s.as_str()));
        return Some(format!(
            "there is no section [{section}]{}",
            did_you_mean(suggestion, |s| format!("[{s}]"))
        ));
    };
    let key = key?;
    if keys.iter().any(|(k, _)| k == key) {
        return None;
    }
    let suggestion = nearest(key, keys.iter().map(|(k, _)| k.as_str()));
    Some(format!(
        "[{section}] has no key `{key}`{}",
        did_you_mean(suggestion, |s| format!("`{s}`"))
    ))
}

/// The unknown sections and keys of the file `path` (its text `text`),
/// each as `FILE, line N: …`. A file that is not TOML is left to the
/// loader, which says so.
pub fn in_file(path: &Path, text: &str) -> Vec<String> {
    let Ok(document) = ImDocument::parse(text) else {
        return Vec::new();
    };
    let known = known();
    let line_of = |span: Option<std::ops::Range<usize>>| {
        span.map_or(1, |s| {
            text[..s.start.min(text.len())].matches('\n').count() + 1
        })
    };
    let mut out = Vec::new();
    for (section, item) in document.as_table().iter() {
        let section_span = document.as_table().key(section).and_then(|k| k.span());
        let Some(table) = item
            .as_table_like()
            .filter(|_| !matches!(item, Item::ArrayOfTables(_)))
        else {
            if let Some(problem) = problem(&known, section, None) {
                out.push(format!(
                    "{}, line {}: {problem}",
                    path.display(),
                    line_of(section_span)
                ));
            } else {
                out.push(format!(
                    "{}, line {}: `{section}` is a section: write it as [{section}]",
                    path.display(),
                    line_of(section_span)
                ));
            }
            continue;
        };
        if let Some(problem) = problem(&known, section, None) {
            out.push(format!(
                "{}, line {}: {problem}",
                path.display(),
                line_of(section_span)
            ));
            continue;
        }
        for (key, _) in table.iter() {
            if let Some(problem) = problem(&known, section, Some(key)) {
                let span = table.key(key).and_then(|k| k.span());
                out.push(format!(
                    "{}, line {}: {problem}",
                    path.display(),
                    line_of(span)
                ));
            }
        }
    }
    out
}

/// The unknown sections and keys set through `FORGEHAND_<SECTION>__<KEY>`
/// variables, each named by its variable.
pub fn in_variables<'a>(variables: impl Iterator<Item = &'a str>) -> Vec<String> {
    let known = known();
    let mut out = Vec::new();
    for name in variables {
        let Some(rest) = name.strip_prefix("FORGEHAND_").filter(|r| r.contains("__")) else {
            continue;
        };
        let mut parts = rest.splitn(3, "__");
        let (Some(section), key) = (parts.next(), parts.next()) else {
            continue;
        };
        let (section, key) = (
            section.to_ascii_lowercase(),
            key.map(str::to_ascii_lowercase),
        );
        // A map key's own names (FORGEHAND_SANDBOX__ENV__X) are the
        // operator's.
        if let Some(problem) = problem(&known, &section, key.as_deref()) {
            out.push(format!("{name}: {problem}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 24, finding 7: a typo named neither the file, the line nor a
    /// suggestion, and set through a variable did not name the variable.
    #[test]
    fn a_typo_is_named_by_file_and_line_or_by_variable_with_a_suggestion() {
        let text = "[server]\nlisten = \"127.0.0.1:8080\"\n\n[queue]\nwokers = 2\n\n[qeue]\nworkers = 1\n\n[sandbox.env]\nANY_NAME = \"x\"\n";
        let problems = in_file(Path::new("/etc/forgehand/forgehand.toml"), text);
        assert_eq!(
            problems,
            [
                "/etc/forgehand/forgehand.toml, line 5: [queue] has no key `wokers` (did you mean `workers`?)",
                "/etc/forgehand/forgehand.toml, line 7: there is no section [qeue] (did you mean [queue]?)",
            ]
        );
        let problems = in_variables(
            [
                "FORGEHAND_QUEUE__WOKERS",
                "FORGEHAND_QUEUE__WORKERS",
                "FORGEHAND_SANDBOX__ENV__FOO",
                "FORGEHAND_CONFIG",
            ]
            .into_iter(),
        );
        assert_eq!(
            problems,
            ["FORGEHAND_QUEUE__WOKERS: [queue] has no key `wokers` (did you mean `workers`?)"]
        );
        assert!(in_variables(["FORGEHAND_MODLE__NAME"].into_iter())[0]
            .ends_with("(did you mean [model]?)"));
        let far = in_file(Path::new("f.toml"), "[queue]\nzzzzzzzzz = 1\n");
        assert_eq!(far, ["f.toml, line 2: [queue] has no key `zzzzzzzzz`"]);
    }
}
