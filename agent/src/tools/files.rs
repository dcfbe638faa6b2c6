//! File tools over a cap-std directory handle on the working copy: every
//! path resolves beneath it, or the call is refused. The host reads what
//! the agent may have planted, so every open is careful: the last
//! component is never followed if it is a symlink (the tool says where
//! it points instead), nothing blocks (`O_NONBLOCK`: a FIFO or a device
//! opens at once and is then refused, as it is not a regular file), and
//! reads stop at a size cap, whatever the file claims. What the host
//! creates in the tree belongs to whoever owns the directory it is made
//! in (the sandbox's user while a sandbox has the working copy), so the
//! agent can change it afterwards.

use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, MetadataExt, OpenOptions, OpenOptionsExt};

use super::schema::{EditArgs, GlobArgs, ListArgs, ReadArgs, WriteArgs, MAX_FILE_BYTES};

/// The most lines one read returns, and the most entries a listing shows.
const MAX_READ_LINES: usize = 2000;
const MAX_ENTRIES: usize = 2000;
/// Where the working copy is inside the sandbox: paths the model copies
/// from `bash` output may carry it.
const SANDBOX_ROOT: &str = "/workspace";

/// The most bytes [`Files::read_plain`] reads.
#[derive(Debug, Clone, Copy)]
pub struct ReadLimit(pub u64);

/// Cheap to clone: every tool call runs on a blocking thread of its own.
#[derive(Clone)]
pub struct Files {
    root: std::sync::Arc<Dir>,
}

impl Files {
    pub fn open(root: &Path) -> io::Result<Files> {
        Ok(Files {
            root: std::sync::Arc::new(Dir::open_ambient_dir(root, cap_std::ambient_authority())?),
        })
    }

    pub fn read(&self, args: ReadArgs) -> Result<String, String> {
        let path = self.checked(&args.path)?;
        let text = self.read_text(&path, &args.path)?;
        let lines: Vec<&str> = text.lines().collect();
        let start = args.start_line.unwrap_or(1);
        let end = args.end_line.unwrap_or(lines.len()).min(lines.len());
        if start > lines.len().max(1) {
            return Err(format!(
                "{} has {} lines; start_line {start} is past the end",
                args.path,
                lines.len()
            ));
        }
        if end < start && !lines.is_empty() {
            return Err(format!("end_line {end} is before start_line {start}"));
        }
        let last = end.min(start + MAX_READ_LINES - 1);
        let mut out = String::new();
        for (n, line) in lines.iter().enumerate().take(last).skip(start - 1) {
            out.push_str(&format!("{:>6}\t{line}\n", n + 1));
        }
        if last < end {
            out.push_str(&format!(
                "[{} more lines: read on with start_line {}]\n",
                end - last,
                last + 1
            ));
        }
        if lines.is_empty() {
            out.push_str("[the file is empty]\n");
        }
        Ok(out)
    }

    pub fn write(&self, args: WriteArgs) -> Result<String, String> {
        let path = self.checked(&args.path)?;
        let before = self.read_text(&path, &args.path).ok();
        self.write_bytes(&path, args.content.as_bytes(), &args.path)?;
        // Shown from the first line that changed.
        let first = before
            .as_deref()
            .map_or(1, |old| first_difference(old, &args.content));
        Ok(format!(
            "wrote {} ({} bytes, {} lines):\n{}",
            args.path,
            args.content.len(),
            args.content.lines().count(),
            snippet(&args.content, first, first + SNIPPET_LINES)
        ))
    }

    /// The file's text as it is now, when it is a readable UTF-8 file of
    /// the tree (a check's input, a change's undo).
    pub fn current(&self, shown: &str) -> Option<String> {
        let path = self.checked(shown).ok()?;
        self.read_text(&path, shown).ok()
    }

    /// Puts the file back as it was: its text, or no file.
    pub fn restore(&self, shown: &str, before: Option<&str>) -> Result<(), String> {
        let path = self.checked(shown)?;
        match before {
            Some(text) => self.write_bytes(&path, text.as_bytes(), shown),
            None => self.root.remove_file(&path).map_err(|e| explain(e, shown)),
        }
    }

    pub fn edit(&self, args: EditArgs) -> Result<String, String> {
        let path = self.checked(&args.path)?;
        let text = self.read_text(&path, &args.path)?;
        let starts: Vec<usize> = text
            .match_indices(&args.old_string)
            .map(|(i, _)| i)
            .collect();
        match starts.len() {
            0 => Err(format!(
                "old_string does not occur in {}; read the file again and copy the text exactly, whitespace included",
                args.path
            )),
            1 => {
                let new_text = text.replacen(&args.old_string, &args.new_string, 1);
                self.write_bytes(&path, new_text.as_bytes(), &args.path)?;
                let line = text[..starts[0]].matches('\n').count() + 1;
                let last = line + args.new_string.matches('\n').count();
                Ok(format!(
                    "edited {} at line {line}:\n{}",
                    args.path,
                    snippet(&new_text, line, last)
                ))
            }
            n => {
                let lines: Vec<String> = starts
                    .iter()
                    .take(10)
                    .map(|&i| (text[..i].matches('\n').count() + 1).to_string())
                    .collect();
                Err(format!(
                    "old_string occurs {n} times in {} (lines {}); include more of the surrounding text so that it occurs once",
                    args.path,
                    lines.join(", ")
                ))
            }
        }
    }

    pub fn list(&self, args: ListArgs) -> Result<String, String> {
        let shown = args.path.clone().unwrap_or_else(|| ".".into());
        let path = self.checked(&shown)?;
        let mut out = Vec::new();
        self.walk(&path, args.max_depth.unwrap_or(3), &mut |p, is_dir| {
            out.push(if is_dir {
                format!("{p}/")
            } else {
                p.to_owned()
            });
        })
        .map_err(|e| explain(e, &shown))?;
        Ok(render(out))
    }

    pub fn glob(&self, args: GlobArgs) -> Result<String, String> {
        let pattern = args.pattern.trim_start_matches("./");
        let matcher = globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| format!("`{}` is not a glob: {e}", args.pattern))?
            .compile_matcher();
        let mut out = Vec::new();
        self.walk(Path::new(""), 64, &mut |p, is_dir| {
            if !is_dir && matcher.is_match(p) {
                out.push(p.to_owned());
            }
        })
        .map_err(|e| explain(e, "."))?;
        if out.is_empty() {
            return Ok(format!("no file matches {}", args.pattern));
        }
        Ok(render(out))
    }

    /// The path the model gave, relative to the working copy, when
    /// neither its spelling nor a symlink on the way leads out of it.
    fn checked(&self, input: &str) -> Result<PathBuf, String> {
        let path = relative(input)?;
        let mut prefix = PathBuf::new();
        for part in path.components() {
            prefix.push(part);
            let Ok(meta) = self.root.symlink_metadata(&prefix) else {
                break;
            };
            if meta.is_symlink() && self.root.canonicalize(&prefix).is_err() {
                return Err(format!(
                    "{input} leads outside the repository through the symlink {}: refused",
                    prefix.display()
                ));
            }
        }
        Ok(path)
    }

    /// A small text file of the tree, when it is one (instruction files).
    pub fn read_plain(&self, path: &str, limit: ReadLimit) -> Option<String> {
        let path = self.checked(path).ok()?;
        let (file, len) = self.open_regular(&path, "").ok()?;
        if len > limit.0 {
            return None;
        }
        String::from_utf8(read_capped(file, limit.0).ok()?).ok()
    }

    fn read_text(&self, path: &Path, shown: &str) -> Result<String, String> {
        let cap = MAX_FILE_BYTES * 4;
        let (file, len) = self.open_regular(path, shown)?;
        let too_big = |len: u64| {
            format!(
                "{shown} is {len} bytes, too big to read whole; use grep, or bash with head/sed"
            )
        };
        if len > cap {
            return Err(too_big(len));
        }
        let bytes = read_capped(file, cap).map_err(|e| explain(e, shown))?;
        if bytes.len() as u64 > cap {
            return Err(too_big(bytes.len() as u64));
        }
        String::from_utf8(bytes).map_err(|_| format!("{shown} is not UTF-8 text"))
    }

    /// Opens a regular file of the tree for reading, without following a
    /// symlink at the last step and without blocking; with its length.
    fn open_regular(&self, path: &Path, shown: &str) -> Result<(std::fs::File, u64), String> {
        let mut options = OpenOptions::new();
        options
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .follow(FollowSymlinks::No);
        let file = self
            .root
            .open_with(path, &options)
            .map_err(|e| self.open_error(e, path, shown))?;
        let meta = file.metadata().map_err(|e| explain(e, shown))?;
        if meta.is_dir() {
            return Err(format!("{shown} is a directory; use list_files"));
        }
        if !meta.is_file() {
            return Err(format!(
                "{shown} is not a regular file (a FIFO, socket or device): refused"
            ));
        }
        Ok((file.into_std(), meta.len()))
    }

    /// Writes `bytes` as the whole content of the regular file at `path`,
    /// creating it (and its directories) when missing.
    fn write_bytes(&self, path: &Path, bytes: &[u8], shown: &str) -> Result<(), String> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.create_dirs(parent).map_err(|e| explain(e, shown))?;
        }
        let mut options = OpenOptions::new();
        options
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .follow(FollowSymlinks::No);
        let (file, created) = match self.root.open_with(path, options.clone().create_new(true)) {
            Ok(file) => (file, true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => (
                self.root
                    .open_with(path, &options)
                    .map_err(|e| self.open_error(e, path, shown))?,
                false,
            ),
            Err(e) => return Err(self.open_error(e, path, shown)),
        };
        let meta = file.metadata().map_err(|e| explain(e, shown))?;
        if !meta.is_file() {
            return Err(format!(
                "{shown} is not a regular file (a FIFO, socket or device): refused"
            ));
        }
        let mut file = file.into_std();
        if created {
            self.give_to_parents_owner(&file, path);
        }
        file.set_len(0).map_err(|e| explain(e, shown))?;
        file.write_all(bytes).map_err(|e| explain(e, shown))
    }

    /// Like `create_dir_all`, each new directory given to its parent's
    /// owner.
    fn create_dirs(&self, dir: &Path) -> io::Result<()> {
        let mut prefix = PathBuf::new();
        for part in dir.components() {
            prefix.push(part);
            match self.root.create_dir(&prefix) {
                Ok(()) => {
                    // A plain descriptor (not O_PATH): fchown needs one.
                    let mut options = OpenOptions::new();
                    options
                        .read(true)
                        .custom_flags(libc::O_DIRECTORY | libc::O_NONBLOCK)
                        .follow(FollowSymlinks::No);
                    if let Ok(made) = self.root.open_with(&prefix, &options) {
                        self.give_to_parents_owner(&made, &prefix);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn give_to_parents_owner(&self, made: &impl std::os::fd::AsFd, path: &Path) {
        let parent = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(parent) => self.root.symlink_metadata(parent),
            None => self.root.dir_metadata(),
        };
        if let Ok(parent) = parent {
            // Only root may give a file away, and only then is it needed.
            let _ = std::os::unix::fs::fchown(made, Some(parent.uid()), Some(parent.gid()));
        }
    }

    fn open_error(&self, error: io::Error, path: &Path, shown: &str) -> String {
        if let Ok(meta) = self.root.symlink_metadata(path) {
            if !meta.is_symlink() && !meta.is_file() && !meta.is_dir() {
                return format!(
                    "{shown} is not a regular file (a FIFO, socket or device): refused"
                );
            }
            if meta.is_symlink() {
                let target = self
                    .root
                    .read_link(path)
                    .map(|t| t.display().to_string())
                    .unwrap_or_else(|_| "?".into());
                return format!(
                    "{shown} is a symlink to {target}: the file tools do not follow symlinks; give the path it points to"
                );
            }
        }
        explain(error, shown)
    }

    /// Visits entries under `dir` breadth-first in name order, without
    /// following symlinks, up to `depth` levels and [`MAX_ENTRIES`].
    fn walk(&self, dir: &Path, depth: usize, visit: &mut dyn FnMut(&str, bool)) -> io::Result<()> {
        let mut queue = vec![(dir.to_owned(), 1usize)];
        let mut seen = 0;
        while let Some((current, level)) = queue.pop() {
            let entries = if current.as_os_str().is_empty() {
                self.root.entries()?
            } else {
                self.root.read_dir(&current)?
            };
            let mut names: Vec<(String, bool)> = Vec::new();
            // A directory the agent filled with millions of entries is
            // not read to its end.
            for entry in entries.take(MAX_ENTRIES + 1) {
                let entry = entry?;
                let kind = entry.file_type()?;
                let name = entry.file_name().to_string_lossy().into_owned();
                names.push((name, kind.is_dir()));
            }
            names.sort();
            for (name, is_dir) in names.into_iter().rev() {
                let rel = current.join(&name);
                let shown = rel.to_string_lossy().trim_start_matches("./").to_owned();
                seen += 1;
                if seen > MAX_ENTRIES {
                    return Ok(());
                }
                visit(&shown, is_dir);
                if is_dir && level < depth {
                    queue.push((rel, level + 1));
                }
            }
        }
        Ok(())
    }
}

/// At most `cap` + 1 bytes, so that a file that grew past what its length
/// said is still caught.
fn read_capped(file: std::fs::File, cap: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(cap + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn render(mut entries: Vec<String>) -> String {
    entries.sort();
    let mut out = entries.join("\n");
    if entries.len() >= MAX_ENTRIES {
        out.push_str(&format!("\n[stopped at {MAX_ENTRIES} entries]"));
    }
    out.push('\n');
    out
}

/// A path the model gave, as one relative to the working copy, or why not.
fn relative(input: &str) -> Result<PathBuf, String> {
    if input.contains('\0') {
        return Err("a path cannot contain a NUL byte".into());
    }
    let trimmed = input
        .strip_prefix(SANDBOX_ROOT)
        .filter(|rest| rest.is_empty() || rest.starts_with('/'))
        .map(|rest| rest.trim_start_matches('/'))
        .unwrap_or(input);
    let path = Path::new(trimmed);
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!(
                "{input} is an absolute path: refused. Give a path relative to the repository root"
            ))
            }
            Component::ParentDir => {
                return Err(format!(
                    "{input} goes up with `..`: refused. Paths stay inside the repository"
                ))
            }
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    Ok(out)
}

fn explain(error: io::Error, shown: &str) -> String {
    match error.kind() {
        io::ErrorKind::NotFound => format!("{shown}: no such file or directory"),
        io::ErrorKind::PermissionDenied => {
            format!("{shown} leads outside the repository (through a symlink?): refused")
        }
        _ => format!("{shown}: {error}"),
    }
}

/// Lines of context a snippet shows around a change, and the most lines
/// of the change itself it shows.
const SNIPPET_CONTEXT: usize = 3;
const SNIPPET_LINES: usize = 20;

/// Lines `first..=last` of `text` (numbered from 1, as `read_file` shows
/// them) with a few lines around them; a long change is cut.
pub fn snippet(text: &str, first: usize, last: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    if lines.is_empty() {
        return "[the file is empty]\n".into();
    }
    let last = last.max(first).min(first + SNIPPET_LINES);
    let from = first.saturating_sub(SNIPPET_CONTEXT).max(1);
    let to = (last + SNIPPET_CONTEXT).min(lines.len());
    let mut out = String::new();
    for n in from..=to {
        let line: String = lines[n - 1].chars().take(400).collect();
        out.push_str(&format!("{n:>6}\t{line}\n"));
    }
    out
}

/// The first line (from 1) where `new` differs from `old`.
fn first_difference(old: &str, new: &str) -> usize {
    old.lines()
        .zip(new.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| old.lines().count().min(new.lines().count()))
        + 1
}
