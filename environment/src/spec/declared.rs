//! Which declaration applies: `.forgehand.toml`, else a devcontainer, else
//! detection (see the module's documentation for why in that order).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::detect::{self, Plan, Toolchain};
use super::error::{DeclFile, DeclareError, DevcontainerPath};
use super::package::DebianPackage;
use super::MAX_DECLARATION_BYTES;
use super::{devcontainer, forgehand_toml, inputs, RepoFiles};

/// What a repository's environment is made of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Declared {
    /// Debian packages added to the guest image, sorted and deduplicated.
    pub packages: Vec<DebianPackage>,
    /// A shell line run with `sh -c` in the setup sandbox, in `/workspace`.
    pub setup: Option<String>,
    /// The command that shows a change works, run in `/workspace`.
    pub test: Option<String>,
    pub source: Source,
    /// The files the setup sees, and whose contents define the
    /// environment (lockfiles, manifests, what `[environment] inputs`
    /// adds), sorted; the key covers them.
    pub inputs: Vec<String>,
    /// The setup sees the whole tree instead (`inputs = ["**"]`, a
    /// devcontainer without `inputs`): the key is the tree's.
    #[serde(default)]
    pub whole_tree: bool,
}

impl Declared {
    /// Whether there is anything to install; an environment of only a test
    /// runs in the guest image as it is.
    pub fn needs_setup(&self) -> bool {
        !self.packages.is_empty() || self.setup.is_some()
    }
}

/// Where a [`Declared`] came from, as the status comment says it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    ForgehandToml,
    Devcontainer(DevcontainerPath),
    /// Detected from the lockfiles and manifests at the root: every
    /// toolchain found, in a fixed order (JavaScript, Python, Rust, Go).
    Detected(Vec<Toolchain>),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::ForgehandToml => f.write_str(".forgehand.toml"),
            Source::Devcontainer(path) => f.write_str(path.as_str()),
            Source::Detected(toolchains) => {
                f.write_str("detected from the repository's files: ")?;
                for (i, toolchain) in toolchains.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{toolchain}")?;
                }
                Ok(())
            }
        }
    }
}

/// What the repository at `files` declares about its environment; `None`
/// when it declares nothing and nothing is detected (or `detect` is off).
pub fn declared(files: &dyn RepoFiles, detect: bool) -> Result<Option<Declared>, DeclareError> {
    let file = DeclFile::ForgehandToml;
    let toml = read(files, file)?
        .map(forgehand_toml::parse)
        .transpose()?
        .flatten();
    // `inputs` alone widens what another declaration's setup sees; any
    // other key (or an empty table, which turns detection off) makes the
    // table the whole declaration.
    let patterns = toml.as_ref().map(|e| e.inputs.clone()).unwrap_or_default();
    if let Some(environment) = toml.filter(|e| e.declares() || e.inputs.is_empty()) {
        return finish(
            files,
            Source::ForgehandToml,
            Parts {
                packages: environment.packages,
                setup: environment.setup,
                test: environment.test,
            },
            &patterns,
            false,
        )
        .map(Some);
    }
    let plans = if detect {
        detect::detect(files).map_err(DeclareError::Files)?
    } else {
        Vec::new()
    };
    if let Some((path, setup)) = devcontainer_setup(files)? {
        // The devcontainer's own commands install the tools, not the
        // detected setup: the test is the toolchain's usual command. Its
        // commands were written for a full checkout: without `inputs`,
        // it sees the whole tree (and is built again for every commit).
        let test = joined(plans.iter().filter_map(|plan| plan.plain_test.as_deref()));
        return finish(
            files,
            Source::Devcontainer(path),
            Parts {
                packages: packages(&plans),
                setup: Some(setup),
                test,
            },
            &patterns,
            patterns.is_empty(),
        )
        .map(Some);
    }
    if plans.is_empty() {
        return Ok(None);
    }
    let setup = joined(plans.iter().map(|plan| plan.setup.as_str()));
    let test = joined(plans.iter().filter_map(|plan| plan.test.as_deref()));
    let source = Source::Detected(plans.iter().map(|plan| plan.toolchain).collect());
    let parts = Parts {
        packages: packages(&plans),
        setup,
        test,
    };
    finish(files, source, parts, &patterns, false).map(Some)
}

/// What a declaration says, before its inputs are found.
struct Parts {
    packages: Vec<DebianPackage>,
    setup: Option<String>,
    test: Option<String>,
}

fn read(files: &dyn RepoFiles, file: DeclFile) -> Result<Option<Vec<u8>>, DeclareError> {
    files
        .read(file.path(), MAX_DECLARATION_BYTES)
        .map_err(|error| DeclareError::reading(file, error))
}

/// The setup of the first devcontainer file present, when it has one.
fn devcontainer_setup(
    files: &dyn RepoFiles,
) -> Result<Option<(DevcontainerPath, String)>, DeclareError> {
    for path in [DevcontainerPath::Folder, DevcontainerPath::Root] {
        if let Some(bytes) = read(files, DeclFile::Devcontainer(path))? {
            let setup = devcontainer::parse(path, bytes)?;
            return Ok(setup.map(|setup| (path, setup)));
        }
    }
    Ok(None)
}

fn packages(plans: &[Plan]) -> Vec<DebianPackage> {
    plans
        .iter()
        .flat_map(|plan| plan.packages.iter())
        .map(|name| DebianPackage::new(name).expect("detection names valid Debian packages"))
        .collect()
}

fn joined<'a>(commands: impl Iterator<Item = &'a str>) -> Option<String> {
    let commands: Vec<&str> = commands.collect();
    (!commands.is_empty()).then(|| commands.join(" && "))
}

fn finish(
    files: &dyn RepoFiles,
    source: Source,
    parts: Parts,
    patterns: &[String],
    whole_tree: bool,
) -> Result<Declared, DeclareError> {
    let Parts {
        mut packages,
        setup,
        test,
    } = parts;
    packages.sort();
    packages.dedup();
    let inputs = inputs::inputs(files, patterns, whole_tree).map_err(DeclareError::Files)?;
    Ok(Declared {
        packages,
        setup,
        test,
        source,
        inputs: inputs.files,
        whole_tree: inputs.whole_tree,
    })
}

#[cfg(test)]
#[path = "declared_tests.rs"]
mod tests;
