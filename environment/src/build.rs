//! The setup phase: an environment built in sandboxes whose only way out
//! is the egress proxy (the [`Door`]), holding no token, no key and no
//! host variable, then kept ([`crate::cache`]).
//!
//! 1. **Packages**, when the repository declares Debian packages (or the
//!    operator extra CA certificates): in a sandbox over the plain guest
//!    image, as the sandbox user, apt resolves them against the guest's
//!    installed set, downloads them through the proxy and extracts them
//!    (`dpkg-deb`, no maintainer script runs) into a layer that later
//!    lies over the guest image. Extracting needs no root, which is why
//!    it is done so; a package that only works after its maintainer
//!    scripts ran is not supported.
//! 2. **Setup**: the repository's command in a sandbox whose root is the
//!    guest image with that layer, whose `/workspace` is a view of the
//!    base commit holding only the environment's inputs
//!    ([`crate::spec::inputs`]: exactly what the key covers) under a
//!    writable layer, and whose home is kept. What it leaves in both is
//!    the environment.
//!
//! Everything is built on a size-limited file system of its own
//! (`environment.disk_mib`) and copied into the cache when done.

use std::path::{Path, PathBuf};
use std::time::Instant;

use forgehand_sandbox::disk::SizedDir;
use forgehand_sandbox::layers::Overlay;
use forgehand_sandbox::{
    Backend, ExecOutput, ExecRequest, ExitStatus, Handover, Limits, Sandbox, SandboxError,
    SandboxSpec,
};

use crate::cache::{self, Building, CacheError, EnvCache, EnvInfo, InUse};
use crate::egress::{Egress, Policy, PolicyError, Summary};
use crate::keep::{self, CheckError, Unkeepable};
use crate::spec::{Declared, EnvKey};
use forgehand_text::printable;

/// The port the proxy is reached at, on the sandbox's own loopback.
pub const PROXY_PORT: u16 = 3128;

/// Where the guest image keeps its CA certificates (Debian's bundle):
/// with extra certificates configured, the layer holds the guest's and
/// them, at the same path.
const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// What an environment is built from.
pub struct Setup<'a> {
    pub backend: &'a dyn Backend,
    /// The guest image.
    pub image: &'a Path,
    /// The base commit's files (its verified checkout). The setup sees
    /// only the declared inputs of it, copied into a view; with
    /// `whole_tree`, all of it (then it must be the sandbox user's).
    pub base: &'a Path,
    pub declared: &'a Declared,
    pub key: &'a EnvKey,
    /// `forge:owner/name`, or the root commit for `forgehand run`.
    pub repository: &'a str,
    /// The operator's extra CA certificates (`environment.ca_bundle`).
    pub ca_bundle: Option<&'a [u8]>,
    /// The setup sandbox's limits; its time limit is the whole setup's.
    pub limits: Limits,
    /// The size of the file system the environment is built on.
    pub disk_mib: u64,
    /// The most files, directories and links it may hold, all its layers
    /// together (`environment.max_entries`).
    pub max_entries: usize,
    /// What the one door (the egress proxy) lets through.
    pub egress: &'a Policy,
}

/// A built and kept environment.
#[derive(Debug)]
pub struct Built {
    pub env: InUse,
    /// The end of what setup printed.
    pub output: String,
    /// What the setup reached through the egress, and what was refused.
    pub egress: Summary,
    /// How long each step took, in order: where a slow setup's time went.
    pub steps: Vec<Step>,
}

/// One step of a setup and its time.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// `packages` (the Debian packages), `command` (the setup command),
    /// `keep` (checking and copying what it left into the cache).
    pub name: &'static str,
    pub secs: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("installing the Debian packages failed ({status}):\n{output}{refused}")]
    Packages {
        status: ExitStatus,
        output: String,
        refused: Refused,
    },
    #[error(
        "the guest's apt sources have no package named {}: a name in `packages` is a \
         package's exact name (or a virtual package's), never a pattern",
        quoted(.0)
    )]
    UnknownPackages(Vec<String>),
    #[error("the setup command failed ({status}):\n{output}{refused}{view}")]
    Setup {
        status: ExitStatus,
        output: String,
        // Boxed: the error stays small.
        refused: Box<Refused>,
        view: ViewHint,
    },
    /// What the setup left cannot be kept (a path too long to copy).
    #[error(transparent)]
    Unkeepable(Unkeepable),
    /// The setup made more entries than an environment may hold, or ran
    /// its file system out of them.
    #[error(
        "the environment is too large: {what}, more than the {max} files and directories an environment may hold (environment.max_entries); nothing was kept"
    )]
    TooLarge { what: String, max: usize },
    #[error("the setup sandbox: {0}")]
    Sandbox(#[from] SandboxError),
    #[error("the egress proxy: {0}")]
    Egress(#[from] PolicyError),
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error("building the environment: {0}")]
    Io(String),
}

impl SetupError {
    /// Whether the repository's own declaration failed (its packages, its
    /// command, or what its command left), rather than Forgehand's
    /// machinery.
    pub fn is_the_repositorys(&self) -> bool {
        matches!(
            self,
            SetupError::Packages { .. }
                | SetupError::UnknownPackages(_)
                | SetupError::Setup { .. }
                | SetupError::Unkeepable(_)
                | SetupError::TooLarge { .. }
        )
    }

    /// Whether it is [`SetupError::TooLarge`] (`environment:too_large`).
    pub fn is_too_large(&self) -> bool {
        matches!(self, SetupError::TooLarge { .. })
    }
}

/// What the egress proxy refused while a failed step ran: a setup that
/// fails is most often one whose registry is missing from the allow-list,
/// and its own output seldom names the host (an HTTP client says "403").
/// And, when the output says a certificate was not trusted (a network
/// whose proxy inspects TLS), what to set.
#[derive(Debug, Default)]
pub struct Refused {
    hosts: Vec<String>,
    certificate: Option<CertificateHint>,
}

/// A certificate the setup's tools did not trust, and the bundle this
/// host's package managers trust instead, when one was found.
#[derive(Debug)]
struct CertificateHint {
    configured: bool,
    bundle: Option<crate::hosts::CaBundle>,
}

/// What package managers and TLS libraries print when a certificate
/// chain is not trusted.
const UNTRUSTED: [&str; 6] = [
    "SELF_SIGNED_CERT_IN_CHAIN",
    "CERTIFICATE_VERIFY_FAILED",
    "certificate verify failed",
    "unable to get local issuer certificate",
    "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
    "SSL certificate problem",
];

impl Refused {
    async fn from_summary(summary: &Summary, output: &str, ca_configured: bool) -> Self {
        let certificate = if UNTRUSTED.iter().any(|s| output.contains(s)) {
            Some(CertificateHint {
                configured: ca_configured,
                bundle: crate::hosts::ca_in_use().await,
            })
        } else {
            None
        };
        // The host is the request's: escaped, as all the setup chose.
        Refused {
            hosts: summary
                .refused()
                .map(|r| printable(&r.to_string()).into_owned())
                .collect(),
            certificate,
        }
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.hosts.is_empty() {
            f.write_str("\nthe egress proxy refused (environment.allow_hosts lists the hosts it lets through):\n")?;
            for line in &self.hosts {
                writeln!(f, "  {line}")?;
            }
        }
        if let Some(hint) = &self.certificate {
            f.write_str("\na certificate was not trusted: if this host's network inspects TLS, ")?;
            match (&hint.bundle, hint.configured) {
                (Some(bundle), _) => writeln!(
                    f,
                    "set environment.ca_bundle = {:?} (the CA bundle {} names on this host)",
                    bundle.path.display().to_string(),
                    bundle.source
                )?,
                (None, true) => f.write_str(
                    "the bundle in environment.ca_bundle does not hold its CA\n",
                )?,
                (None, false) => f.write_str(
                    "set environment.ca_bundle to the CA bundle (PEM) its proxy's certificates chain to\n",
                )?,
            }
        }
        Ok(())
    }
}

/// What the setup saw of the repository, said when it failed: a setup
/// that reads a file outside its inputs fails for that reason.
#[derive(Debug, Default)]
pub struct ViewHint {
    /// The view's files; `None` when it saw the whole tree. Boxed: the
    /// error it is part of stays small.
    files: Option<Box<[String]>>,
}

impl std::fmt::Display for ViewHint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Some(files) = &self.files else {
            return Ok(());
        };
        const SHOWN: usize = 20;
        let mut shown: Vec<String> = files
            .iter()
            .take(SHOWN)
            .map(|path| printable(path).into_owned())
            .collect();
        if files.len() > SHOWN {
            shown.push(format!("and {} more", files.len() - SHOWN));
        }
        let seen = if shown.is_empty() {
            "none of the repository's files".to_owned()
        } else {
            shown.join(", ")
        };
        write!(
            f,
            "\nthe setup saw only the environment's inputs ({seen}): if it needs other files of the repository, add them to `[environment] inputs` in .forgehand.toml (glob patterns; `inputs = [\"**\"]` is the whole tree, set up again for every commit)\n"
        )
    }
}

/// `a`, `b`: names in the package grammar, which holds no backquote.
fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn io(what: &str) -> impl FnOnce(std::io::Error) -> SetupError + '_ {
    move |e| SetupError::Io(format!("{what}: {e}"))
}

/// Builds the environment `setup` describes and keeps it in `cache`.
pub async fn build(setup: &Setup<'_>, cache: &EnvCache) -> Result<Built, SetupError> {
    let started = Instant::now();
    let building = cache.building(setup.key.as_str())?;
    let scratch = Scratch::create(&building, setup).await?;
    let mut output = String::new();
    let mut egress = Summary::default();
    let mut steps = Vec::new();
    let mut step = Instant::now();
    let mut timed = |name, steps: &mut Vec<Step>| {
        steps.push(Step {
            name,
            secs: step.elapsed().as_secs_f64(),
        });
        step = Instant::now();
    };
    let layer = setup.declared.packages.is_empty() && setup.ca_bundle.is_none();
    if !layer {
        output.push_str(&packages(setup, &scratch, &mut egress).await?);
        timed("packages", &mut steps);
    }
    if let Some(command) = &setup.declared.setup {
        output.push_str(&run_setup(setup, &scratch, command, &mut egress).await?);
        timed("command", &mut steps);
    }
    scratch.keep_into(&building.dir, setup.max_entries)?;
    drop(scratch);
    timed("keep", &mut steps);
    let info = EnvInfo {
        key: setup.key.to_string(),
        repository: setup.repository.to_owned(),
        source: setup.declared.source.to_string(),
        packages: setup
            .declared
            .packages
            .iter()
            .map(|p| p.as_str().to_owned())
            .collect(),
        setup: setup.declared.setup.clone(),
        built_at: cache::now(),
        last_used: cache::now(),
        bytes: 0,
        entries: 0,
        setup_secs: started.elapsed().as_secs_f64(),
    };
    let env = cache.keep(building, info)?;
    Ok(Built {
        env,
        output,
        egress,
        steps,
    })
}

/// The size-limited file system an environment is built on, and its
/// directories, all the sandbox user's.
struct Scratch {
    // Dropped last: unmounted after everything mounted in it.
    sized: SizedDir,
}

impl Scratch {
    async fn create(building: &Building, setup: &Setup<'_>) -> Result<Self, SetupError> {
        let sized = SizedDir::create(
            &building.dir.join("disk"),
            &building.dir.join("disk.img"),
            setup.disk_mib,
        )?;
        let scratch = Scratch { sized };
        for dir in [
            "packages",
            "rootfs",
            "home",
            "workspace",
            "work",
            "merged",
            "root",
            "view",
        ] {
            std::fs::create_dir(scratch.path(dir)).map_err(io("a scratch directory"))?;
        }
        if !setup.declared.whole_tree {
            // Before the scratch is given to the sandbox user, so the view
            // is theirs as the rest.
            crate::view::copy(setup.base, &setup.declared.inputs, &scratch.path("view"))
                .map_err(|e| SetupError::Io(format!("the inputs' view: {e}")))?;
        }
        setup
            .backend
            .prepare_for_sandbox(scratch.sized.path())
            .await?;
        Ok(scratch)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.sized.path().join(name)
    }

    /// Copies the environment's layers out of the scratch file system
    /// (owners, modes, overlay whiteouts and their xattrs as they are),
    /// each checked first for what cannot be kept ([`keep::check`]).
    fn keep_into(&self, dir: &Path, max_entries: usize) -> Result<(), SetupError> {
        let mut budget = max_entries;
        for (layer, place) in [
            ("rootfs", ""),
            ("home", "/home/agent"),
            ("workspace", "/workspace"),
        ] {
            let from = self.path(layer);
            if layer == "rootfs" && is_empty(&from) {
                continue;
            }
            let entries = keep::check(&from, place, keep::MAX_PATH_BYTES, budget).map_err(
                |error| match error {
                    CheckError::Unkeepable(Unkeepable::TooManyEntries { place, .. }) => {
                        SetupError::TooLarge {
                            what: format!("it left more in {place}"),
                            max: max_entries,
                        }
                    }
                    CheckError::Unkeepable(unkeepable) => SetupError::Unkeepable(unkeepable),
                    CheckError::Io { .. } => SetupError::Io(format!(
                        "checking the setup's {layer} before keeping it: {error}"
                    )),
                },
            )?;
            budget -= entries;
            keep::copy(&from, &dir.join(layer)).map_err(|problem| {
                SetupError::Io(format!(
                    "copying the setup's {layer} into the cache: {problem}"
                ))
            })?;
        }
        Ok(())
    }
}

/// Whether the file system at `path` has no inode left: a setup that
/// failed there failed for making too many files, whatever it printed.
fn out_of_inodes(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: statvfs on a NUL-terminated path we own, into a zeroed struct.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return false;
    }
    stat.f_files > 0 && stat.f_favail == 0
}

fn is_empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).map_or(true, |mut d| d.next().is_none())
}

/// The environment every setup command sees: the proxy, the home, the
/// path, the language; with extra CA certificates, where the tools that
/// do not read the system's bundle find it. Nothing of the host's.
fn setup_env(setup: &Setup<'_>) -> std::collections::BTreeMap<String, String> {
    let mut env = forgehand_sandbox::namespace::sandbox_env([]);
    let proxy = format!("http://127.0.0.1:{PROXY_PORT}");
    for name in ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"] {
        env.insert(name.into(), proxy.clone());
    }
    for name in ["NO_PROXY", "no_proxy"] {
        env.insert(name.into(), "localhost,127.0.0.1".into());
    }
    if setup.ca_bundle.is_some() {
        for name in [
            "SSL_CERT_FILE",
            "REQUESTS_CA_BUNDLE",
            "PIP_CERT",
            "NODE_EXTRA_CA_CERTS",
            "CURL_CA_BUNDLE",
            "GIT_SSL_CAINFO",
            "CARGO_HTTP_CAINFO",
        ] {
            env.insert(name.into(), CA_BUNDLE.into());
        }
    }
    env
}

/// The packages step's script: check each name is one apt knows exactly,
/// resolve, download, extract, merge a package's `/bin` and `/lib` into
/// `/usr` as the guest's merged-`/usr` layout has them (a real `/bin` in
/// the layer would hide the guest's), then the CA bundle (the guest's and
/// the extra ones, from stdin).
///
/// A name in Debian's grammar can still mean something else to
/// `apt-get install`: a regular expression (`cowsay.+`, `lib.+`: every
/// package matching), or an action (`hello-` removes, `hello+`
/// installs). apt reads a name as a package first when a package (or a
/// virtual one) of that very name exists, so every name must be a line
/// of `apt-cache pkgnames` (which lists the names with that prefix);
/// the others are printed, one a line, and the step ends with
/// [`UNKNOWN_EXIT`] before apt resolves anything.
const PACKAGES_SCRIPT: &str = r#"set -eu
W=/workspace/packages
R=/workspace/root
mkdir -p "$W/lists/partial" "$W/cache/archives/partial" "$R"
O="-q -o Debug::NoLocking=1 -o Dir::State::Lists=$W/lists -o Dir::Cache=$W/cache -o APT::Sandbox::User=$(id -un) -o Acquire::http::Proxy=$HTTP_PROXY -o Acquire::https::Proxy=$HTTP_PROXY -o Acquire::Retries=3"
if [ -n "$FORGEHAND_PACKAGES" ]; then
  apt-get $O update
  unknown=0
  for name in $FORGEHAND_PACKAGES; do
    if ! apt-cache $O pkgnames "$name" | grep -qxF -e "$name"; then
      echo "forgehand-unknown-package: $name"
      unknown=1
    fi
  done
  [ "$unknown" = 0 ] || exit "$FORGEHAND_UNKNOWN_EXIT"
  apt-get $O -s --no-install-recommends install $FORGEHAND_PACKAGES \
    | sed -n 's/^Inst \([^ ]*\) .*/\1/p' > "$W/wanted"
  if [ -s "$W/wanted" ]; then
    cd "$W/cache/archives"
    apt-get $O download $(cat "$W/wanted")
    for deb in "$W"/cache/archives/*.deb; do
      dpkg-deb --fsys-tarfile "$deb" | tar -x --no-same-owner --no-same-permissions -C "$R"
    done
  fi
  for d in bin sbin lib lib32 lib64 libx32; do
    if [ -d "$R/$d" ] && [ ! -L "$R/$d" ] && [ -L "/$d" ]; then
      mkdir -p "$R/usr/$d"
      cp -a "$R/$d/." "$R/usr/$d/"
      rm -rf "$R/$d"
    fi
  done
fi
if [ "$FORGEHAND_CA" = 1 ]; then
  mkdir -p "$R/etc/ssl/certs"
  cat /etc/ssl/certs/ca-certificates.crt - > "$R/etc/ssl/certs/ca-certificates.crt"
fi
echo "forgehand: $(wc -l < "$W/wanted" 2>/dev/null || echo 0) packages extracted"
"#;

/// The packages step's exit status when a name is not a package apt
/// knows; what it prints then names them (`UNKNOWN_LINE`).
const UNKNOWN_EXIT: i32 = 87;
const UNKNOWN_LINE: &str = "forgehand-unknown-package: ";

/// The declared packages the packages step said apt does not know. Only
/// declared names are taken from its output (the repository's own
/// names, in the grammar), in the declaration's order.
fn unknown_packages(declared: &[&str], stdout: &str) -> Vec<String> {
    let said: std::collections::BTreeSet<&str> = stdout
        .lines()
        .filter_map(|line| line.strip_prefix(UNKNOWN_LINE))
        .collect();
    declared
        .iter()
        .filter(|name| said.contains(*name))
        .map(|name| (*name).to_owned())
        .collect()
}

async fn packages(
    setup: &Setup<'_>,
    scratch: &Scratch,
    egress: &mut Summary,
) -> Result<String, SetupError> {
    let spec = SandboxSpec {
        rootfs: setup.image.to_owned(),
        workspace: scratch.sized.path().to_owned(),
        home: None,
        handover: Handover::Prepared {
            give_back: Vec::new(),
        },
        env: setup_env(setup),
        limits: setup.limits.clone(),
    };
    let names: Vec<&str> = setup.declared.packages.iter().map(|p| p.as_str()).collect();
    let request = ExecRequest::new(["/bin/sh", "-c", PACKAGES_SCRIPT])
        .env("FORGEHAND_PACKAGES", names.join(" "))
        .env("FORGEHAND_UNKNOWN_EXIT", UNKNOWN_EXIT.to_string())
        .env(
            "FORGEHAND_CA",
            if setup.ca_bundle.is_some() { "1" } else { "0" },
        )
        .stdin(setup.ca_bundle.unwrap_or_default().to_vec());
    let out = in_sandbox(setup, spec, request, egress).await?;
    if out.status == ExitStatus::Exited(UNKNOWN_EXIT) {
        let unknown = unknown_packages(&names, &out.stdout.to_text());
        if !unknown.is_empty() {
            return Err(SetupError::UnknownPackages(unknown));
        }
    }
    if !out.status.success() {
        let output = printed(&out);
        let refused = Refused::from_summary(egress, &output, setup.ca_bundle.is_some()).await;
        return Err(SetupError::Packages {
            status: out.status,
            output,
            refused,
        });
    }
    // The layer is what was extracted; apt's lists and downloads go.
    std::fs::remove_dir(scratch.path("rootfs")).map_err(io("the rootfs layer"))?;
    std::fs::rename(scratch.path("root"), scratch.path("rootfs"))
        .map_err(io("the rootfs layer"))?;
    cache::remove_tree(&scratch.path("packages"));
    Ok(printed(&out))
}

async fn run_setup(
    setup: &Setup<'_>,
    scratch: &Scratch,
    command: &str,
    egress: &mut Summary,
) -> Result<String, SetupError> {
    let layer = scratch.path("rootfs");
    let rootfs_merged = scratch.path("rootfs-merged");
    std::fs::create_dir_all(&rootfs_merged).map_err(io("the rootfs mount point"))?;
    let rootfs = if is_empty(&layer) {
        None
    } else {
        Some(
            Overlay::read_only(&[&layer, setup.image], &rootfs_merged)
                .map_err(io("the rootfs overlay"))?,
        )
    };
    let view = scratch.path("view");
    let lower = if setup.declared.whole_tree {
        setup.base
    } else {
        view.as_path()
    };
    let workspace = Overlay::writable(
        &[lower],
        &scratch.path("workspace"),
        &scratch.path("work"),
        &scratch.path("merged"),
    )
    .map_err(io("the workspace overlay"))?;
    let spec = SandboxSpec {
        rootfs: rootfs
            .as_ref()
            .map_or_else(|| setup.image.to_owned(), |r| r.path().to_owned()),
        workspace: workspace.path().to_owned(),
        home: Some(scratch.path("home")),
        handover: Handover::Prepared {
            give_back: Vec::new(),
        },
        env: setup_env(setup),
        limits: setup.limits.clone(),
    };
    let out = in_sandbox(setup, spec, ExecRequest::shell(command), egress).await;
    drop(workspace);
    drop(rootfs);
    let out = out?;
    if !out.status.success() && out_of_inodes(scratch.sized.path()) {
        return Err(SetupError::TooLarge {
            what: "it ran its file system out of inodes".into(),
            max: setup.max_entries,
        });
    }
    if !out.status.success() {
        let output = printed(&out);
        let refused = Refused::from_summary(egress, &output, setup.ca_bundle.is_some()).await;
        let view = ViewHint {
            files: (!setup.declared.whole_tree)
                .then(|| setup.declared.inputs.clone().into_boxed_slice()),
        };
        return Err(SetupError::Setup {
            status: out.status,
            output,
            refused: Box::new(refused),
            view,
        });
    }
    keep_additions_only(&scratch.path("workspace"), lower).map_err(io("the workspace layer"))?;
    Ok(printed(&out))
}

/// Takes out of the setup's workspace layer whatever is not an addition
/// to what it saw: files it changed or deleted there (a rewritten
/// lockfile) are not the environment's. (An addition at a path the
/// commit has outside the view never hides the commit's file: a job's
/// checkout lies above the environment's layer.) Never follows a link;
/// the layer is on the setup's own size-limited file system.
fn keep_additions_only(layer: &Path, base: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        for entry in std::fs::read_dir(layer.join(&rel))? {
            let entry = entry?;
            let (path, rel) = (entry.path(), rel.join(entry.file_name()));
            let kind = entry.file_type()?;
            let in_base = std::fs::symlink_metadata(base.join(&rel)).ok();
            let whiteout = kind.is_char_device();
            match in_base {
                _ if whiteout => std::fs::remove_file(&path)?,
                Some(meta) if meta.is_dir() && kind.is_dir() => {
                    // Merged with the base's again, not hiding it.
                    let _ = xattr_remove(&path, "trusted.overlay.opaque");
                    pending.push(rel);
                }
                Some(_) if kind.is_dir() => std::fs::remove_dir_all(&path)?,
                Some(_) => std::fs::remove_file(&path)?,
                None => {}
            }
        }
    }
    Ok(())
}

fn xattr_remove(path: &Path, name: &str) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    let name = std::ffi::CString::new(name)?;
    // SAFETY: lremovexattr on NUL-terminated strings we own.
    if unsafe { libc::lremovexattr(path.as_ptr(), name.as_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Runs one request in a sandbox made from `spec`, the egress proxy
/// serving its door for as long as it runs; what the proxy did is added
/// to `egress`.
async fn in_sandbox(
    setup: &Setup<'_>,
    spec: SandboxSpec,
    request: ExecRequest,
    egress: &mut Summary,
) -> Result<ExecOutput, SetupError> {
    let sandbox = setup.backend.create(spec).await?;
    let result = serve_and_run(setup, &*sandbox, request, egress).await;
    let destroyed = sandbox.destroy().await;
    let out = result?;
    destroyed?;
    Ok(out)
}

async fn serve_and_run(
    setup: &Setup<'_>,
    sandbox: &dyn Sandbox,
    request: ExecRequest,
    egress: &mut Summary,
) -> Result<ExecOutput, SetupError> {
    let listener = sandbox.listen_inside(PROXY_PORT).await?;
    let listener = tokio::net::TcpListener::from_std(listener).map_err(io("the door"))?;
    let door = Egress::new(setup.egress.clone())?.spawn(listener);
    let out = sandbox.exec(request.timeout(setup.limits.timeout)).await;
    let done = door.shutdown().await;
    egress.merge(done);
    Ok(out?)
}

/// What a command printed, both streams, as people read it (its end is
/// kept when it is long), its control characters escaped: the
/// repository's commands chose it, and it reaches the operator's
/// terminal and the status comment.
fn printed(out: &ExecOutput) -> String {
    let mut text = out.stdout.to_text();
    let err = out.stderr.to_text();
    if !err.is_empty() {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&err);
    }
    printable(&text).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use forgehand_sandbox::Captured;

    fn captured(text: &str) -> Captured {
        Captured {
            bytes: text.as_bytes().to_vec(),
            ..Captured::default()
        }
    }

    /// Red-team F3: what a setup prints reaches the operator's terminal
    /// and the status comment; its escape sequences must not.
    #[test]
    fn what_setup_printed_is_shown_with_its_controls_escaped() {
        let out = ExecOutput {
            status: ExitStatus::Exited(1),
            stdout: captured("step 1\tok\n\u{1b}]0;PWNED-TITLE\u{7}\u{1b}[31mRED\r\n"),
            stderr: captured("fake\rreal \u{9b}2J \u{202e}gpj.exe\n"),
            duration: std::time::Duration::ZERO,
        };
        assert_eq!(
            printed(&out),
            "step 1\tok\n\\u{1b}]0;PWNED-TITLE\\u{7}\\u{1b}[31mRED\n\
             fake\\rreal \\u{9b}2J \\u{202e}gpj.exe\n"
        );
    }

    /// Only the repository's own names are taken from the step's output,
    /// each once, in the declaration's order.
    #[test]
    fn unknown_packages_are_the_declared_names_the_step_named() {
        let stdout = "Get:1 ...\nforgehand-unknown-package: hello-\n\
                      forgehand-unknown-package: cowsay.+\nforgehand-unknown-package: evil`\n";
        assert_eq!(
            unknown_packages(&["hello", "cowsay.+", "hello-"], stdout),
            ["cowsay.+", "hello-"]
        );
        let error = SetupError::UnknownPackages(vec!["cowsay.+".into(), "hello-".into()]);
        assert!(error.is_the_repositorys());
        assert!(
            error
                .to_string()
                .contains("no package named `cowsay.+`, `hello-`"),
            "{error}"
        );
    }

    /// Issue 26: npm's SELF_SIGNED_CERT_IN_CHAIN reached the user raw,
    /// with no word of environment.ca_bundle.
    #[tokio::test]
    async fn an_untrusted_certificate_says_what_to_set() {
        let output =
            "npm error code SELF_SIGNED_CERT_IN_CHAIN\nnpm error errno SELF_SIGNED_CERT_IN_CHAIN\n";
        let refused = Refused::from_summary(&Summary::default(), output, false).await;
        let said = refused.to_string();
        assert!(
            said.contains("a certificate was not trusted: if this host's network inspects TLS, set environment.ca_bundle"),
            "{said}"
        );
        let quiet = Refused::from_summary(&Summary::default(), "npm error 404\n", false).await;
        assert_eq!(quiet.to_string(), "");
    }
}
