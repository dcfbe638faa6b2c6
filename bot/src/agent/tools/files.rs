//! File tools over a cap-std directory handle on the working copy: every
//! path resolves beneath it, symlinks included, or the call is refused.

use std::io;
use std::path::{Component, Path, PathBuf};

use cap_std::fs::Dir;

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

pub struct Files {
    root: Dir,
}

impl Files {
    pub fn open(root: &Path) -> io::Result<Files> {
        Ok(Files {
            root: Dir::open_ambient_dir(root, cap_std::ambient_authority())?,
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
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.root
                .create_dir_all(parent)
                .map_err(|e| explain(e, &args.path))?;
        }
        self.root
            .write(&path, args.content.as_bytes())
            .map_err(|e| explain(e, &args.path))?;
        Ok(format!(
            "wrote {} ({} bytes, {} lines)",
            args.path,
            args.content.len(),
            args.content.lines().count()
        ))
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
                self.root
                    .write(&path, new_text.as_bytes())
                    .map_err(|e| explain(e, &args.path))?;
                let line = text[..starts[0]].matches('\n').count() + 1;
                Ok(format!("edited {} at line {line}", args.path))
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
        let meta = self.root.metadata(&path).ok()?;
        if !meta.is_file() || meta.len() > limit.0 {
            return None;
        }
        String::from_utf8(self.root.read(&path).ok()?).ok()
    }

    fn read_text(&self, path: &Path, shown: &str) -> Result<String, String> {
        let meta = self.root.metadata(path).map_err(|e| explain(e, shown))?;
        if meta.is_dir() {
            return Err(format!("{shown} is a directory; use list_files"));
        }
        if meta.len() > MAX_FILE_BYTES * 4 {
            return Err(format!(
                "{shown} is {} bytes, too big to read whole; use grep, or bash with head/sed",
                meta.len()
            ));
        }
        let bytes = self.root.read(path).map_err(|e| explain(e, shown))?;
        String::from_utf8(bytes).map_err(|_| format!("{shown} is not UTF-8 text"))
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
            for entry in entries {
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
