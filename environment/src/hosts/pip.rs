//! pip's hosts: the index (`index-url`), extra indexes and `find-links`
//! URLs it is configured with, else its built-in default index and the
//! host that index's files are served from, read from pip itself.
//!
//! `pip config list` is asked first: it merges every place pip reads
//! (`PIP_*` variables, `/etc/pip.conf`, the user's and a virtualenv's
//! files) exactly as pip does. Only when pip cannot be asked are the
//! variables and the two usual files read here.

use super::command::output;
use super::{read_config, Found, Manager, Places};

/// The settings whose values name hosts pip fetches from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Key {
    Index,
    ExtraIndex,
    FindLinks,
}

impl Key {
    fn from_name(name: &str) -> Option<Key> {
        match name {
            "index-url" => Some(Key::Index),
            "extra-index-url" => Some(Key::ExtraIndex),
            "find-links" => Some(Key::FindLinks),
            _ => None,
        }
    }
}

/// A host pip is configured with, and the setting that named it.
pub(crate) type Configured = (Key, Found);

/// Asks this host's pip.
pub(crate) async fn find(places: &Places) -> (Vec<Found>, Vec<String>) {
    let mut notes = Vec::new();
    let configured = match output("python3", &["-m", "pip", "config", "list"]).await {
        Ok(stdout) => from_config_list(&stdout),
        Err(note) => {
            notes.push(format!(
                "pip: {note}; reading its variables and files instead"
            ));
            let (found, file_notes) = from_variables_and_files(places);
            notes.extend(file_notes);
            found
        }
    };
    let index_configured = configured.iter().any(|(key, _)| *key == Key::Index);
    let mut found: Vec<Found> = configured.into_iter().map(|(_, found)| found).collect();
    if index_configured {
        notes.push(
            "pip: an index is configured; the host its files are served from is whatever \
             that index links to (try a `pip download` through the egress)"
                .into(),
        );
    } else {
        match output(
            "python3",
            &[
                "-c",
                "from pip._internal.models.index import PyPI; print(PyPI.url); print(PyPI.file_storage_domain)",
            ],
        )
        .await
        {
            Ok(stdout) => {
                let defaults = from_defaults(&stdout);
                if defaults.is_empty() {
                    notes.push("pip: its built-in defaults could not be read".into());
                }
                found.extend(defaults);
            }
            Err(note) => notes.push(format!("pip: built-in defaults unknown: {note}")),
        }
    }
    (found, notes)
}

/// `pip config list` prints `section.key='value'` (a Python repr; a
/// multi-line value's newlines as `\n`), variables as `:env:.key`.
pub(crate) fn from_config_list(stdout: &str) -> Vec<Configured> {
    let mut found = Vec::new();
    for line in stdout.lines() {
        let Some((name, value)) = line.split_once('=') else {
            continue;
        };
        let name = name.trim();
        let Some(key) = name
            .rsplit_once('.')
            .and_then(|(_, key)| Key::from_name(key))
        else {
            continue;
        };
        found.extend(urls(
            key,
            &unrepr(value.trim()),
            &format!("`pip config list` {name}"),
        ));
    }
    found
}

/// The http(s) URLs among whitespace-separated `values`.
fn urls(key: Key, values: &str, source: &str) -> Vec<Configured> {
    values
        .split_whitespace()
        .filter_map(|url| Found::from_url(Manager::Pip, url, source))
        .map(|found| (key, found))
        .collect()
}

/// A Python string repr's contents: quotes off, `\n` and `\\` undone.
fn unrepr(value: &str) -> String {
    let inner = ['\'', '"']
        .iter()
        .find_map(|q| value.strip_prefix(*q).and_then(|v| v.strip_suffix(*q)))
        .unwrap_or(value);
    inner
        .replace("\\n", "\n")
        .replace("\\t", "\t")
        .replace("\\\\", "\\")
}

/// pip's own defaults: the index URL on the first line, the file host
/// (a bare name) on the second.
pub(crate) fn from_defaults(stdout: &str) -> Vec<Found> {
    let mut lines = stdout.lines().map(str::trim).filter(|l| !l.is_empty());
    let mut found = Vec::new();
    if let Some(index) = lines.next() {
        found.extend(Found::from_url(
            Manager::Pip,
            index,
            "pip's built-in default index",
        ));
    }
    if let Some(files) = lines.next() {
        found.extend(Found::from_url(
            Manager::Pip,
            &format!("https://{files}/"),
            "pip's built-in default file host",
        ));
    }
    found
}

/// Without pip to ask: `PIP_INDEX_URL`, `PIP_EXTRA_INDEX_URL`,
/// `PIP_FIND_LINKS`, `/etc/pip.conf`, `~/.config/pip/pip.conf`.
fn from_variables_and_files(places: &Places) -> (Vec<Configured>, Vec<String>) {
    let mut found = Vec::new();
    let mut notes = Vec::new();
    for (variable, key) in [
        ("PIP_INDEX_URL", Key::Index),
        ("PIP_EXTRA_INDEX_URL", Key::ExtraIndex),
        ("PIP_FIND_LINKS", Key::FindLinks),
    ] {
        if let Ok(value) = std::env::var(variable) {
            found.extend(urls(key, &value, variable));
        }
    }
    let mut files = vec![places.root.join("etc/pip.conf")];
    if let Some(home) = &places.home {
        files.push(home.join(".config/pip/pip.conf"));
    }
    for path in files {
        match read_config(&path) {
            Ok(Some(text)) => found.extend(from_conf_file(&text, &path.display().to_string())),
            Ok(None) => {}
            Err(note) => notes.push(format!("pip: {note}")),
        }
    }
    (found, notes)
}

/// A `pip.conf` (INI): the URL keys in any section, values continued on
/// indented lines.
pub(crate) fn from_conf_file(text: &str, path: &str) -> Vec<Configured> {
    let mut found = Vec::new();
    // The setting a continuation line adds to, and its name as written.
    let mut current: Option<(Key, String)> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        if line.starts_with([' ', '\t']) && !trimmed.is_empty() {
            if let Some((key, name)) = &current {
                found.extend(urls(*key, trimmed, &format!("{path}: {name}")));
            }
            continue;
        }
        current = trimmed.split_once(['=', ':']).and_then(|(name, value)| {
            let name = name.trim().replace('_', "-");
            let key = Key::from_name(&name)?;
            found.extend(urls(key, value, &format!("{path}: {name}")));
            Some((key, name))
        });
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(found: &[Configured]) -> Vec<(&str, u16, &str)> {
        found
            .iter()
            .map(|(_, f)| (f.host.as_str(), f.port, f.source.as_str()))
            .collect()
    }

    fn keys(found: &[Configured]) -> Vec<Key> {
        found.iter().map(|(key, _)| *key).collect()
    }

    #[test]
    fn config_list_values_give_hosts_and_local_paths_are_skipped() {
        let stdout = "global.index-url='https://mirror.invalid/simple'\n\
                      global.extra-index-url='https://one.invalid/simple\\nhttp://two.invalid:8080/s'\n\
                      :env:.find-links='/opt/wheels'\n\
                      :env:.default-timeout='180'\n\
                      global.cert='/etc/ssl/certs/ca-certificates.crt'\n";
        assert_eq!(
            hosts(&from_config_list(stdout)),
            [
                ("mirror.invalid", 443, "`pip config list` global.index-url"),
                (
                    "one.invalid",
                    443,
                    "`pip config list` global.extra-index-url"
                ),
                (
                    "two.invalid",
                    8080,
                    "`pip config list` global.extra-index-url"
                ),
            ]
        );
        assert_eq!(
            keys(&from_config_list(stdout)),
            [Key::Index, Key::ExtraIndex, Key::ExtraIndex]
        );
        assert_eq!(from_config_list("garbage\n\n"), []);
    }

    #[test]
    fn built_in_defaults_are_the_index_and_the_file_host() {
        assert_eq!(
            from_defaults("https://index.invalid/\nfiles.invalid\n")
                .iter()
                .map(|f| (f.host.as_str(), f.port, f.source.as_str()))
                .collect::<Vec<_>>(),
            [
                ("index.invalid", 443, "pip's built-in default index"),
                ("files.invalid", 443, "pip's built-in default file host"),
            ]
        );
    }

    #[test]
    fn pip_conf_files_are_read_with_continuation_lines() {
        let text = "[global]\n# index-url = https://commented.invalid/\n\
                    index-url = https://mirror.invalid/simple\n\
                    extra-index-url =\n    https://one.invalid/simple\n\thttps://two.invalid/simple\n\
                    timeout = 60\n[install]\nfind_links = http://links.invalid/wheels\n";
        assert_eq!(
            hosts(&from_conf_file(text, "/etc/pip.conf")),
            [
                ("mirror.invalid", 443, "/etc/pip.conf: index-url"),
                ("one.invalid", 443, "/etc/pip.conf: extra-index-url"),
                ("two.invalid", 443, "/etc/pip.conf: extra-index-url"),
                ("links.invalid", 80, "/etc/pip.conf: find-links"),
            ]
        );
    }
}
