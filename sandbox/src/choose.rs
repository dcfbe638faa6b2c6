//! Which backend runs the sandboxes: `sandbox.backend = "auto" |
//! "microvm" | "namespace"`. `microvm` fails closed; `auto` falls back to
//! namespaces and says so loudly, because that isolation shares the
//! host's kernel.

use std::str::FromStr;
use std::sync::Arc;

use crate::{Backend, Isolation, SandboxError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase", try_from = "String")]
pub enum BackendChoice {
    #[default]
    Auto,
    Microvm,
    Namespace,
}

impl TryFrom<String> for BackendChoice {
    type Error = String;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl FromStr for BackendChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(BackendChoice::Auto),
            "microvm" => Ok(BackendChoice::Microvm),
            "namespace" => Ok(BackendChoice::Namespace),
            other => Err(format!(
                "unknown sandbox backend {other:?}: expected auto, microvm or namespace"
            )),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// Usable; what it will use.
    Usable(String),
    /// Not usable; why, and what to do about it.
    Unusable(String),
}

impl Readiness {
    pub fn is_usable(&self) -> bool {
        matches!(self, Readiness::Usable(_))
    }

    pub fn detail(&self) -> &str {
        match self {
            Readiness::Usable(d) | Readiness::Unusable(d) => d,
        }
    }
}

/// The backend in use, and what operators must be told about it.
pub struct Chosen {
    pub backend: Arc<dyn Backend>,
    /// Set when the isolation is weaker than a microVM: goes to the log at
    /// start-up, to `/readyz` and to every pull request's footer.
    pub warning: Option<String>,
}

/// Picks the backend for `choice` among `microvm` (absent when built
/// without it) and `namespace`.
pub async fn choose(
    choice: BackendChoice,
    microvm: Option<Arc<dyn Backend>>,
    namespace: Arc<dyn Backend>,
) -> Result<Chosen, SandboxError> {
    let unavailable = |backend, reason: String| SandboxError::Unavailable { backend, reason };
    let microvm_readiness = match &microvm {
        Some(backend) => backend.readiness().await,
        None => {
            Readiness::Unusable("this forgehand was built without the microvm feature".to_owned())
        }
    };
    match choice {
        BackendChoice::Microvm => match (microvm, microvm_readiness) {
            (Some(backend), Readiness::Usable(_)) => Ok(Chosen {
                backend,
                warning: None,
            }),
            (_, readiness) => Err(unavailable("microvm", readiness.detail().to_owned())),
        },
        BackendChoice::Namespace => match namespace.readiness().await {
            Readiness::Usable(_) => Ok(Chosen {
                warning: Some(shared_kernel_warning("sandbox.backend is \"namespace\"")),
                backend: namespace,
            }),
            Readiness::Unusable(reason) => Err(unavailable("namespace", reason)),
        },
        BackendChoice::Auto => {
            if let (Some(backend), Readiness::Usable(_)) = (&microvm, &microvm_readiness) {
                return Ok(Chosen {
                    backend: backend.clone(),
                    warning: None,
                });
            }
            match namespace.readiness().await {
                Readiness::Usable(_) => Ok(Chosen {
                    warning: Some(shared_kernel_warning(&format!(
                        "microVMs are not usable here ({})",
                        microvm_readiness.detail()
                    ))),
                    backend: namespace,
                }),
                Readiness::Unusable(reason) => Err(unavailable(
                    "auto",
                    format!(
                        "no backend is usable: microvm: {}; namespace: {reason}",
                        microvm_readiness.detail()
                    ),
                )),
            }
        }
    }
}

fn shared_kernel_warning(why: &str) -> String {
    format!(
        "sandboxes use {}: {why}",
        Isolation::SharedKernel.describe()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ExecOutput, ExecRequest, ExecStream, Sandbox, SandboxSpec};

    struct Fake(&'static str, Readiness);

    #[async_trait::async_trait]
    impl Backend for Fake {
        fn name(&self) -> &'static str {
            self.0
        }
        fn isolation(&self) -> Isolation {
            Isolation::MicroVm
        }
        async fn readiness(&self) -> Readiness {
            self.1.clone()
        }
        async fn create(&self, _: SandboxSpec) -> Result<Box<dyn Sandbox>, SandboxError> {
            unimplemented!("not used by these tests")
        }
        async fn remove_leftovers(&self) -> Result<usize, SandboxError> {
            Ok(0)
        }
    }

    #[allow(dead_code)]
    fn _unused(_: ExecOutput, _: ExecRequest, _: ExecStream) {}

    fn usable(name: &'static str) -> Arc<dyn Backend> {
        Arc::new(Fake(name, Readiness::Usable("ok".into())))
    }
    fn unusable(name: &'static str) -> Arc<dyn Backend> {
        Arc::new(Fake(name, Readiness::Unusable("no /dev/kvm".into())))
    }

    #[tokio::test]
    async fn microvm_fails_closed() {
        let err = choose(
            BackendChoice::Microvm,
            Some(unusable("microvm")),
            usable("namespace"),
        )
        .await
        .err()
        .unwrap();
        assert!(err.to_string().contains("no /dev/kvm"), "{err}");
        let err = choose(BackendChoice::Microvm, None, usable("namespace"))
            .await
            .err()
            .unwrap();
        assert!(
            err.to_string().contains("without the microvm feature"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn auto_prefers_microvm_and_warns_when_it_falls_back() {
        let chosen = choose(
            BackendChoice::Auto,
            Some(usable("microvm")),
            usable("namespace"),
        )
        .await
        .unwrap();
        assert_eq!(chosen.backend.name(), "microvm");
        assert!(chosen.warning.is_none());

        let chosen = choose(
            BackendChoice::Auto,
            Some(unusable("microvm")),
            usable("namespace"),
        )
        .await
        .unwrap();
        assert_eq!(chosen.backend.name(), "namespace");
        let warning = chosen.warning.unwrap();
        assert!(warning.contains("kernel is shared"), "{warning}");
        assert!(warning.contains("no /dev/kvm"), "{warning}");
    }

    #[tokio::test]
    async fn auto_with_nothing_usable_says_why_for_each() {
        let err = choose(BackendChoice::Auto, None, unusable("namespace"))
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("microvm: this forgehand was built without"),
            "{err}"
        );
        assert!(err.contains("namespace: no /dev/kvm"), "{err}");
    }

    #[test]
    fn parses_the_configured_names() {
        assert_eq!("auto".parse(), Ok(BackendChoice::Auto));
        assert_eq!("namespace".parse(), Ok(BackendChoice::Namespace));
        assert!("docker"
            .parse::<BackendChoice>()
            .unwrap_err()
            .contains("expected auto"));
    }
}
