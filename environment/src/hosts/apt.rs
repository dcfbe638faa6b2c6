//! apt's hosts: the URIs of `/etc/apt/sources.list` and of
//! `/etc/apt/sources.list.d/` (`*.list` one-line entries, `*.sources`
//! deb822 stanzas).

use std::path::{Path, PathBuf};

use super::{read_config, Found, Manager};

/// One repository apt fetches from: its URI (credentials removed) and
/// suites, and the file it is written in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AptSource {
    pub uri: url::Url,
    pub suites: Vec<String>,
    pub file: PathBuf,
    /// A `mirror+` URI names a list of mirrors: those must be allowed too.
    pub mirror_list: bool,
}

impl AptSource {
    pub(crate) fn found(&self) -> Option<Found> {
        let what = if self.mirror_list {
            " (a mirror list)"
        } else {
            ""
        };
        Found::from_url(
            Manager::Apt,
            self.uri.as_str(),
            format!("{}{what}", self.file.display()),
        )
    }
}

/// Files read at most in `sources.list.d`.
const MAX_FILES: usize = 256;

/// The sources configured under `root` (`/` on the host), with notes on
/// what was skipped.
pub fn read_sources(root: &Path) -> (Vec<AptSource>, Vec<String>) {
    let mut sources = Vec::new();
    let mut notes = Vec::new();
    let mut files = vec![(root.join("etc/apt/sources.list"), Format::OneLine)];
    let parts = root.join("etc/apt/sources.list.d");
    match std::fs::read_dir(&parts) {
        Ok(entries) => {
            let mut names: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
            names.sort();
            for path in names.into_iter().take(MAX_FILES) {
                match path.extension().and_then(|e| e.to_str()) {
                    Some("list") => files.push((path, Format::OneLine)),
                    Some("sources") => files.push((path, Format::Deb822)),
                    // apt itself ignores other names (`.disabled`, `.save`).
                    _ => {}
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => notes.push(format!("apt: {}: {e}", parts.display())),
    }
    for (path, format) in files {
        let text = match read_config(&path) {
            Ok(Some(text)) => text,
            Ok(None) => continue,
            Err(note) => {
                notes.push(format!("apt: {note}"));
                continue;
            }
        };
        let entries = match format {
            Format::OneLine => parse_one_line(&text),
            Format::Deb822 => parse_deb822(&text),
        };
        for (uri, suites) in entries {
            match source(&uri, suites, &path) {
                Ok(Some(found)) => sources.push(found),
                Ok(None) => {}
                Err(note) => notes.push(format!("apt: {}: {note}", path.display())),
            }
        }
    }
    (sources, notes)
}

#[derive(Clone, Copy)]
enum Format {
    OneLine,
    Deb822,
}

/// An entry's URI as an [`AptSource`]; `None` for local ones (`file:`,
/// `cdrom:`, `copy:`), a note for methods the egress does not carry.
fn source(uri: &str, suites: Vec<String>, file: &Path) -> Result<Option<AptSource>, String> {
    let (method, rest) = uri.split_once(':').ok_or("a URI without a method")?;
    let method = method.to_ascii_lowercase();
    if matches!(method.as_str(), "file" | "cdrom" | "copy") {
        return Ok(None);
    }
    // `mirror+http:`, `tor+https:`: the transport after the `+`.
    let (wrapper, transport) = match method.split_once('+') {
        Some((wrapper, transport)) => (Some(wrapper), transport),
        None if method == "mirror" => (Some("mirror"), "http"),
        None => (None, method.as_str()),
    };
    if !matches!(transport, "http" | "https") {
        return Err(format!(
            "method {method}: only http and https go through the egress"
        ));
    }
    let mut url = url::Url::parse(&format!("{transport}:{rest}"))
        .map_err(|e| format!("a URI that does not parse ({e})"))?;
    let _ = url.set_username("");
    let _ = url.set_password(None);
    Ok(Some(AptSource {
        uri: url,
        suites,
        file: file.to_owned(),
        mirror_list: wrapper == Some("mirror"),
    }))
}

/// `deb [ options ] uri suite [component…]`, and `deb-src` alike.
pub(crate) fn parse_one_line(text: &str) -> Vec<(String, Vec<String>)> {
    let mut entries = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default();
        let mut words = line.split_whitespace();
        if !matches!(words.next(), Some("deb" | "deb-src")) {
            continue;
        }
        let mut word = words.next();
        // Options: one bracketed group, which may hold spaces.
        if word.is_some_and(|w| w.starts_with('[')) {
            while let Some(w) = word {
                word = words.next();
                if w.ends_with(']') {
                    break;
                }
            }
        }
        if let Some(uri) = word {
            entries.push((
                uri.to_owned(),
                words.next().into_iter().map(str::to_owned).collect(),
            ));
        }
    }
    entries
}

/// Stanzas of `Field: value` lines (continued on indented lines),
/// separated by blank lines; `URIs` and `Suites` may hold several values,
/// and `Enabled: no` turns a stanza off.
pub(crate) fn parse_deb822(text: &str) -> Vec<(String, Vec<String>)> {
    let mut entries = Vec::new();
    let mut stanza: Vec<(String, String)> = Vec::new();
    let mut flush = |stanza: &mut Vec<(String, String)>| {
        let field = |name: &str| {
            stanza
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        let enabled = field("Enabled").is_none_or(|v| !v.trim().eq_ignore_ascii_case("no"));
        if enabled {
            let suites: Vec<String> = field("Suites")
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_owned)
                .collect();
            for uri in field("URIs").unwrap_or_default().split_whitespace() {
                entries.push((uri.to_owned(), suites.clone()));
            }
        }
        stanza.clear();
    };
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        if line.trim().is_empty() {
            flush(&mut stanza);
        } else if line.starts_with([' ', '\t']) {
            if let Some((_, value)) = stanza.last_mut() {
                value.push(' ');
                value.push_str(line.trim());
            }
        } else if let Some((name, value)) = line.split_once(':') {
            stanza.push((name.trim().to_owned(), value.trim().to_owned()));
        }
    }
    flush(&mut stanza);
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_entries_with_options_and_comments() {
        let text = "# deb http://commented.invalid/debian bookworm main\n\
                    deb http://mirror.invalid/debian bookworm main contrib\n\
                    deb-src [ arch=amd64 signed-by=/usr/share/keyrings/x.gpg ] https://src.invalid/debian bookworm main\n\
                    deb [trusted=yes] file:/srv/local ./\n\
                    deb cdrom:[Debian 12]/ bookworm main\n\
                    rubbish line\n";
        assert_eq!(
            parse_one_line(text),
            [
                (
                    "http://mirror.invalid/debian".to_owned(),
                    vec!["bookworm".to_owned()]
                ),
                (
                    "https://src.invalid/debian".to_owned(),
                    vec!["bookworm".to_owned()]
                ),
                ("file:/srv/local".to_owned(), vec!["./".to_owned()]),
                ("cdrom:[Debian".to_owned(), vec!["12]/".to_owned()]),
            ]
        );
    }

    #[test]
    fn deb822_stanzas_with_several_uris_continuations_and_disabled_ones() {
        let text = "Types: deb\n\
                    # http://commented.invalid/debian\n\
                    URIs: http://one.invalid/debian\n  http://two.invalid/debian\n\
                    Suites: bookworm bookworm-updates\n\
                    Components: main\n\
                    \n\
                    Types: deb\nURIs: https://off.invalid/x\nSuites: a\nEnabled: no\n\
                    \n\n\
                    Types: deb\nuris: mirror+http://list.invalid/mirrors.txt\nSuites: b\n";
        assert_eq!(
            parse_deb822(text),
            [
                (
                    "http://one.invalid/debian".to_owned(),
                    vec!["bookworm".to_owned(), "bookworm-updates".to_owned()]
                ),
                (
                    "http://two.invalid/debian".to_owned(),
                    vec!["bookworm".to_owned(), "bookworm-updates".to_owned()]
                ),
                (
                    "mirror+http://list.invalid/mirrors.txt".to_owned(),
                    vec!["b".to_owned()]
                ),
            ]
        );
    }

    #[test]
    fn a_tree_of_sources_gives_hosts_and_notes() {
        let root = tempfile::tempdir().unwrap();
        let apt = root.path().join("etc/apt");
        std::fs::create_dir_all(apt.join("sources.list.d")).unwrap();
        std::fs::write(
            apt.join("sources.list"),
            "deb http://user:pw@mirror.invalid/debian bookworm main\n\
             deb ftp://old.invalid/debian bookworm main\n",
        )
        .unwrap();
        std::fs::write(
            apt.join("sources.list.d/extra.sources"),
            "Types: deb\nURIs: tor+https://onion.invalid/x mirror+http://list.invalid/m.txt\nSuites: s\n",
        )
        .unwrap();
        std::fs::write(
            apt.join("sources.list.d/off.list.disabled"),
            "deb http://disabled.invalid/x s main\n",
        )
        .unwrap();
        let (sources, notes) = read_sources(root.path());
        let found: Vec<Found> = sources.iter().filter_map(AptSource::found).collect();
        let hosts: Vec<(&str, u16)> = found.iter().map(|f| (f.host.as_str(), f.port)).collect();
        assert_eq!(
            hosts,
            [
                ("mirror.invalid", 80),
                ("onion.invalid", 443),
                ("list.invalid", 80)
            ]
        );
        assert_eq!(sources[0].uri.as_str(), "http://mirror.invalid/debian");
        assert!(
            found[2].source.ends_with("extra.sources (a mirror list)"),
            "{:?}",
            found[2]
        );
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("method ftp"), "{notes:?}");
    }
}
