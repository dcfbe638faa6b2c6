//! The host's own secrets inside archives the agent adds: gzip, zip
//! (stored or deflated members) and tar, nested up to [`MAX_DEPTH`]
//! deep. The line scan reads an archive's bytes as they are, where a
//! compressed secret does not show; here what the archive would unpack
//! to is read, within a budget. An archive past the budget, or one that
//! cannot be read (encrypted, another compression, zip64, damaged), is a
//! finding of its own: what cannot be scanned is not pushed.

use std::io::Read;

use regex::bytes::Regex;
use secrecy::ExposeSecret;

use super::{SecretKind, SecretScanner};

/// How deep archives nest before the rest is not opened (a `.tar.gz`
/// inside a `.zip` is three).
pub const MAX_DEPTH: usize = 3;

/// What one archive may unpack to, all members and levels together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveBudget {
    pub bytes: u64,
    pub members: usize,
}

impl Default for ArchiveBudget {
    fn default() -> Self {
        ArchiveBudget {
            bytes: 64 << 20,
            members: 10_000,
        }
    }
}

/// A secret in an archive, or an archive that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveFinding {
    /// The member's path inside the archive (`a.tar.gz` → `a.tar` →
    /// `dir/x.txt` is `a.tar/dir/x.txt`), escaped as paths are shown;
    /// empty for the archive itself.
    pub member: String,
    pub what: ArchiveProblem,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchiveProblem {
    Secret(SecretKind),
    /// Past the budget: not read to its end.
    TooLarge,
    /// Not readable as its kind claims.
    Unreadable(String),
}

impl std::fmt::Display for ArchiveProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArchiveProblem::Secret(kind) => write!(f, "{kind}"),
            ArchiveProblem::TooLarge => {
                f.write_str("an archive that unpacks to more than the host scans")
            }
            ArchiveProblem::Unreadable(why) => write!(f, "an archive the host cannot scan ({why})"),
        }
    }
}

/// What kind of archive `bytes` starts as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Gzip,
    Zip,
    Tar,
}

fn kind_of(bytes: &[u8]) -> Option<Kind> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        Some(Kind::Gzip)
    } else if bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06") {
        Some(Kind::Zip)
    } else if bytes.get(257..262) == Some(b"ustar") {
        Some(Kind::Tar)
    } else {
        None
    }
}

/// Whether `head` (a file's first 512 bytes or more) starts an archive
/// this module reads.
pub fn is_archive(head: &[u8]) -> bool {
    kind_of(head).is_some()
}

impl SecretScanner {
    /// The host's secrets (and their encoded forms) in what `bytes`, an
    /// archive, unpacks to; an archive past `budget` or unreadable is a
    /// finding. Nothing for bytes that are no archive.
    pub fn scan_archive(&self, bytes: &[u8], budget: ArchiveBudget) -> Vec<ArchiveFinding> {
        let Some(kind) = kind_of(bytes) else {
            return Vec::new();
        };
        let Some(search) = self.host_regex() else {
            return Vec::new();
        };
        let mut walk = Walk {
            scanner: self,
            search,
            budget,
            findings: Vec::new(),
        };
        walk.archive(kind, bytes, "", 1);
        let mut findings = walk.findings;
        findings.sort_by(|a, b| a.member.cmp(&b.member));
        findings.dedup();
        // A tar holds its members' bytes as they are: the secret found in
        // the tar is the one found in its member, named better there.
        let within = |outer: &ArchiveFinding, inner: &ArchiveFinding| {
            outer.what == inner.what && inner.member.starts_with(&format!("{}/", outer.member))
        };
        let named: Vec<ArchiveFinding> = findings
            .iter()
            .filter(|f| !findings.iter().any(|inner| within(f, inner)))
            .cloned()
            .collect();
        named
    }

    /// One search for every host secret and form, over bytes.
    fn host_regex(&self) -> Option<Regex> {
        if self.host_secrets.is_empty() {
            return None;
        }
        let alternatives: Vec<String> = self
            .host_secrets
            .iter()
            .map(|(_, value)| regex::escape(value.expose_secret()))
            .collect();
        Regex::new(&alternatives.join("|")).ok()
    }

    /// The name of the host secret `found` is, or one of its forms.
    fn host_name(&self, found: &[u8]) -> String {
        self.host_secrets
            .iter()
            .find(|(_, value)| value.expose_secret().as_bytes() == found)
            .map_or_else(|| "?".to_owned(), |(name, _)| name.clone())
    }
}

struct Walk<'s> {
    scanner: &'s SecretScanner,
    search: Regex,
    budget: ArchiveBudget,
    findings: Vec<ArchiveFinding>,
}

impl Walk<'_> {
    fn found(&mut self, member: &str, what: ArchiveProblem) {
        self.findings.push(ArchiveFinding {
            member: forgehand_text::one_line(member).into_owned(),
            what,
        });
    }

    /// One member's unpacked bytes: searched, and opened in turn when
    /// they are an archive.
    fn member(&mut self, member: &str, bytes: &[u8], depth: usize) {
        if let Some(found) = self.search.find(bytes) {
            let name = self.scanner.host_name(found.as_bytes());
            self.found(
                member,
                ArchiveProblem::Secret(SecretKind::HostCredential(name)),
            );
        }
        if let Some(kind) = kind_of(bytes) {
            if depth < MAX_DEPTH {
                self.archive(kind, bytes, member, depth + 1);
            } else {
                self.found(
                    member,
                    ArchiveProblem::Unreadable(format!("nested more than {MAX_DEPTH} deep")),
                );
            }
        }
    }

    fn archive(&mut self, kind: Kind, bytes: &[u8], at: &str, depth: usize) {
        let read = match kind {
            Kind::Gzip => self.gzip(bytes, at, depth),
            Kind::Tar => self.tar(bytes, at, depth),
            Kind::Zip => self.zip(bytes, at, depth),
        };
        if let Err(problem) = read {
            self.found(at, problem);
        }
    }

    /// Up to the budget of `reader`, or the budget's finding.
    fn take(&mut self, reader: impl Read) -> Result<Vec<u8>, ArchiveProblem> {
        if self.budget.members == 0 {
            return Err(ArchiveProblem::TooLarge);
        }
        self.budget.members -= 1;
        let mut out = Vec::new();
        reader
            .take(self.budget.bytes.saturating_add(1))
            .read_to_end(&mut out)
            .map_err(|e| ArchiveProblem::Unreadable(e.to_string()))?;
        if out.len() as u64 > self.budget.bytes {
            return Err(ArchiveProblem::TooLarge);
        }
        self.budget.bytes -= out.len() as u64;
        Ok(out)
    }

    fn gzip(&mut self, bytes: &[u8], at: &str, depth: usize) -> Result<(), ArchiveProblem> {
        let unpacked = self.take(flate2::read::MultiGzDecoder::new(bytes))?;
        let name = at.strip_suffix(".gz").unwrap_or(at);
        let name = if name.is_empty() { "(gzip)" } else { name };
        self.member(name, &unpacked, depth);
        Ok(())
    }

    fn tar(&mut self, bytes: &[u8], at: &str, depth: usize) -> Result<(), ArchiveProblem> {
        let mut archive = tar::Archive::new(bytes);
        let unreadable = |e: std::io::Error| ArchiveProblem::Unreadable(e.to_string());
        for entry in archive.entries().map_err(unreadable)? {
            let mut entry = entry.map_err(unreadable)?;
            let name = entry.path_bytes().into_owned();
            let name = join(at, &String::from_utf8_lossy(&name));
            let unpacked = self.take(&mut entry)?;
            self.member(&name, &unpacked, depth);
        }
        Ok(())
    }

    fn zip(&mut self, bytes: &[u8], at: &str, depth: usize) -> Result<(), ArchiveProblem> {
        for entry in zip_entries(bytes)? {
            let name = join(at, &entry.name);
            let data = bytes
                .get(entry.data.clone())
                .ok_or_else(|| ArchiveProblem::Unreadable("a member past the end".into()))?;
            let unpacked = match entry.method {
                0 => self.take(data)?,
                8 => self.take(flate2::read::DeflateDecoder::new(data))?,
                other => {
                    return Err(ArchiveProblem::Unreadable(format!(
                        "compression method {other}"
                    )))
                }
            };
            self.member(&name, &unpacked, depth);
        }
        Ok(())
    }
}

fn join(at: &str, name: &str) -> String {
    if at.is_empty() {
        name.to_owned()
    } else {
        format!("{at}/{name}")
    }
}

/// A zip member, as the central directory lists it.
struct ZipEntry {
    name: String,
    method: u16,
    /// Its compressed bytes in the archive.
    data: std::ops::Range<usize>,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The members the central directory lists (what every unzip tool
/// reads), each with where its data is.
fn zip_entries(bytes: &[u8]) -> Result<Vec<ZipEntry>, ArchiveProblem> {
    let bad = |why: &str| ArchiveProblem::Unreadable(why.to_owned());
    // The end record: the last "PK\5\6" within the 64 KiB a comment
    // may take.
    let lowest = bytes.len().saturating_sub(22 + 0xffff);
    let end = (lowest..=bytes.len().saturating_sub(22))
        .rev()
        .find(|&at| bytes.get(at..at + 4) == Some(b"PK\x05\x06"))
        .ok_or_else(|| bad("no end of central directory"))?;
    let count = usize::from(u16_at(bytes, end + 10).ok_or_else(|| bad("a short end record"))?);
    let start = u32_at(bytes, end + 16).ok_or_else(|| bad("a short end record"))? as usize;
    if count == 0xffff || start == 0xffff_ffff {
        return Err(bad("zip64"));
    }
    let mut at = start;
    let mut out = Vec::with_capacity(count.min(10_000));
    for _ in 0..count {
        let field = |offset: usize| u16_at(bytes, at + offset).map(usize::from);
        if bytes.get(at..at + 4) != Some(b"PK\x01\x02") {
            return Err(bad("a damaged central directory"));
        }
        let (Some(flags), Some(method), Some(name_len), Some(extra_len), Some(comment_len)) = (
            field(8),
            u16_at(bytes, at + 10),
            field(28),
            field(30),
            field(32),
        ) else {
            return Err(bad("a short central directory"));
        };
        let compressed = u32_at(bytes, at + 20).ok_or_else(|| bad("a short entry"))? as usize;
        let local = u32_at(bytes, at + 42).ok_or_else(|| bad("a short entry"))? as usize;
        if compressed == 0xffff_ffff || local == 0xffff_ffff {
            return Err(bad("zip64"));
        }
        if flags & 1 != 0 {
            return Err(bad("an encrypted member"));
        }
        let name = bytes
            .get(at + 46..at + 46 + name_len)
            .ok_or_else(|| bad("a short name"))?;
        let name = String::from_utf8_lossy(name).into_owned();
        if bytes.get(local..local + 4) != Some(b"PK\x03\x04") {
            return Err(bad("a member without its local header"));
        }
        let local_name =
            usize::from(u16_at(bytes, local + 26).ok_or_else(|| bad("a short header"))?);
        let local_extra =
            usize::from(u16_at(bytes, local + 28).ok_or_else(|| bad("a short header"))?);
        let data_start = local + 30 + local_name + local_extra;
        out.push(ZipEntry {
            name,
            method,
            data: data_start..data_start.saturating_add(compressed),
        });
        at += 46 + name_len + extra_len + comment_len;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::SecretString;
    use std::io::Write;

    const SECRET: &str = "host-model-key-0123456789abcdef";

    fn scanner() -> SecretScanner {
        SecretScanner::new([(
            "model.api_key".to_owned(),
            SecretString::from(SECRET.to_owned()),
        )])
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut out = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        out.write_all(bytes).unwrap();
        out.finish().unwrap()
    }

    fn tar(members: &[(&str, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, data) in members {
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            builder.append_data(&mut header, name, *data).unwrap();
        }
        builder.into_inner().unwrap()
    }

    /// A zip as Python's `zipfile` writes one: the reference tool, run at
    /// test time.
    fn zip(members: &[(&str, &[u8])], deflate: bool) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        for (name, data) in members {
            std::fs::write(dir.path().join(name), data).unwrap();
        }
        let out = dir.path().join("out.zip");
        let names: Vec<&str> = members.iter().map(|(n, _)| *n).collect();
        let script = format!(
            "import zipfile,sys\nwith zipfile.ZipFile(sys.argv[1],'w',zipfile.{}) as z:\n    [z.write(n) for n in sys.argv[2:]]\n",
            if deflate { "ZIP_DEFLATED" } else { "ZIP_STORED" }
        );
        let status = std::process::Command::new("python3")
            .arg("-c")
            .arg(script)
            .arg(&out)
            .args(&names)
            .current_dir(dir.path())
            .status()
            .expect("python3 runs");
        assert!(status.success());
        std::fs::read(out).unwrap()
    }

    fn found(findings: &[ArchiveFinding]) -> Vec<String> {
        findings
            .iter()
            .map(|f| format!("{}: {}", f.member, f.what))
            .collect()
    }

    #[test]
    fn the_hosts_secret_is_found_in_gzip_tar_and_zip_and_nested() {
        let text = format!("config\nKEY={SECRET}\n");
        let s = scanner();
        let budget = ArchiveBudget::default();
        assert_eq!(
            found(&s.scan_archive(&gzip(text.as_bytes()), budget)),
            ["(gzip): the host's own credential model.api_key"]
        );
        let archive = tar(&[("a.txt", b"nothing"), ("dir/b.env", text.as_bytes())]);
        assert_eq!(
            found(&s.scan_archive(&archive, budget)),
            ["dir/b.env: the host's own credential model.api_key"]
        );
        let tgz = gzip(&archive);
        assert_eq!(
            found(&s.scan_archive(&tgz, budget)),
            ["(gzip)/dir/b.env: the host's own credential model.api_key"]
        );
        for deflate in [false, true] {
            let z = zip(&[("x.bin", &tgz), ("plain.txt", b"hello")], deflate);
            assert_eq!(
                found(&s.scan_archive(&z, budget)),
                ["x.bin/dir/b.env: the host's own credential model.api_key"],
                "deflate: {deflate}"
            );
        }
        // Encoded inside the archive too.
        let hex: String = SECRET.bytes().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            found(&s.scan_archive(&gzip(hex.as_bytes()), budget)).len(),
            1
        );
    }

    #[test]
    fn an_archive_without_the_secret_or_no_archive_at_all_is_nothing() {
        let s = scanner();
        let budget = ArchiveBudget::default();
        assert!(s.scan_archive(&gzip(b"just text"), budget).is_empty());
        assert!(s.scan_archive(&tar(&[("a", b"b")]), budget).is_empty());
        assert!(s.scan_archive(b"plain file", budget).is_empty());
        assert!(s
            .scan_archive(&zip(&[("a.txt", b"fine")], true), budget)
            .is_empty());
    }

    /// What cannot be read whole is not pushed: a bomb past the budget,
    /// a damaged or encrypted archive.
    #[test]
    fn what_cannot_be_scanned_is_a_finding() {
        let s = scanner();
        let bomb = gzip(&vec![0u8; 2 << 20]);
        let small = ArchiveBudget {
            bytes: 1 << 20,
            members: 10,
        };
        assert_eq!(
            found(&s.scan_archive(&bomb, small)),
            [": an archive that unpacks to more than the host scans"]
        );
        let mut broken = zip(&[("a.txt", b"fine")], true);
        let len = broken.len();
        broken.truncate(len - 10);
        assert_eq!(s.scan_archive(&broken, small).len(), 1);
        let many: Vec<(String, Vec<u8>)> = (0..12).map(|i| (format!("f{i}"), vec![b'x'])).collect();
        let refs: Vec<(&str, &[u8])> = many
            .iter()
            .map(|(n, d)| (n.as_str(), d.as_slice()))
            .collect();
        assert_eq!(
            found(&s.scan_archive(&tar(&refs), small)),
            [": an archive that unpacks to more than the host scans"]
        );
    }
}
