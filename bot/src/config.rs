//! Configuration: `forgehand.toml` overlaid with `FORGEHAND_<SECTION>__<KEY>`
//! environment variables, validated once at start-up. Secrets are held in
//! `SecretString` and only ever printed redacted.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use secrecy::SecretString;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

mod forges;
mod gate;
mod keys;
mod locate;
mod model;
mod paths;
mod server;

pub use forgehand_agent::config::AgentConfig;
pub use forgehand_environment::config::EnvironmentConfig;
pub use forgehand_jobcore::config::GitConfig;
pub use forgehand_model::Price;
pub use forgehand_sandbox::config::{SandboxConfig, DEFAULT_ROOTFS};
pub use forges::{GitHubConfig, GiteaConfig};
pub use gate::GateConfig;
pub use locate::{ConfigFile, ConfigOrigin, SYSTEM_CONFIG};
pub use model::ModelConfig;
pub use paths::{Places, DATA_PATHS};
pub use server::{DatabaseConfig, DatabaseKind, ServerConfig};

/// The variable naming the configuration file; not a configuration key.
pub const CONFIG_PATH_VAR: &str = "FORGEHAND_CONFIG";
const ENV_PREFIX: &str = "FORGEHAND_";

/// What fills in the GitHub section from outside the configuration before
/// it is validated (`github_app::adopt`: the App `setup` stored). A hook,
/// so that the configuration stands on nothing that reads other files.
pub type Adopt<'a> = &'a dyn Fn(&mut GitHubConfig) -> Result<(), String>;

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub server: ServerConfig,
    pub database: DatabaseConfig,
    pub github: GitHubConfig,
    pub gitea: GiteaConfig,
    pub api: ApiConfig,
    pub bot: BotConfig,
    pub queue: QueueConfig,
    pub log: LogConfig,
    pub sandbox: SandboxConfig,
    pub git: GitConfig,
    pub gate: GateConfig,
    pub model: ModelConfig,
    pub agent: AgentConfig,
    pub environment: EnvironmentConfig,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiConfig {
    /// Bearer token of the operator API. Without it the API is off.
    #[serde(deserialize_with = "optional_secret", serialize_with = "redact_option")]
    pub token: Option<SecretString>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BotConfig {
    /// The bot's own user on the forge: mentions, assignments and "never
    /// react to yourself" all key on it.
    pub username: String,
    /// The label that asks Forgehand to work on an issue.
    pub label: String,
    /// Record and log jobs without acting on any forge (trying out the
    /// intake, testing the queue).
    pub dry_run: bool,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueueConfig {
    /// Jobs run at once by this node; 0 makes an intake-only node.
    pub workers: usize,
    /// Attempts before a job is dead-lettered.
    pub max_attempts: u32,
    /// How long a claim holds without a heartbeat.
    pub lease_secs: u64,
    /// First retry delay; doubled on each further attempt.
    pub retry_base_secs: u64,
    pub retry_max_secs: u64,
    /// How often an idle worker looks for work other nodes queued.
    pub poll_interval_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// A `tracing` filter: `info`, `forgehand_bot=debug,info`, …
    pub level: String,
    pub format: LogFormat,
}

impl Default for BotConfig {
    fn default() -> Self {
        BotConfig {
            username: "forgehand".into(),
            label: "forgehand".into(),
            dry_run: false,
        }
    }
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            workers: 2,
            max_attempts: 5,
            lease_secs: 60,
            retry_base_secs: 10,
            retry_max_secs: 3600,
            poll_interval_ms: 1000,
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: "info".into(),
            format: LogFormat::Text,
        }
    }
}

impl QueueConfig {
    pub fn lease(&self) -> Duration {
        Duration::from_secs(self.lease_secs)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read configuration: {0}")]
    Load(#[from] config::ConfigError),
    #[error("configuration file {0} does not exist")]
    MissingFile(PathBuf),
    #[error("invalid configuration:\n{}", .0.iter().map(|e| format!("  - {e}")).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<String>),
}

/// The largest whole number any key takes: past it, sizes turned into
/// bytes or times into milliseconds would overflow.
const MAX_WHOLE: u64 = 1 << 40;

/// The largest value of a key by its unit: a size in MiB or GiB becomes
/// bytes, and a machine has no more than 16 TiB to give.
fn max_for(key: &str) -> u64 {
    if key.ends_with("_mib") {
        1 << 24
    } else if key.ends_with("_gib") {
        1 << 14
    } else {
        MAX_WHOLE
    }
}

/// The whole-number keys whose value is not one a typed read keeps as
/// written: a fraction (the typed read rounds it: 0.4 hours became 0,
/// "never"), not a number at all (`nan`, `inf`), or past the key's
/// largest ([`max_for`]). `written` is the configuration as written,
/// `typed` the typed configuration serialised; each problem names its key.
fn whole_numbers_refused(written: &serde_json::Value, typed: &serde_json::Value) -> Vec<String> {
    fn walk(
        written: &serde_json::Value,
        typed: &serde_json::Value,
        path: &mut Vec<String>,
        out: &mut Vec<String>,
    ) {
        use serde_json::Value;
        match (written, typed) {
            (Value::Object(w), Value::Object(t)) => {
                for (key, value) in w {
                    if let Some(typed) = t.get(key) {
                        path.push(key.clone());
                        walk(value, typed, path, out);
                        path.pop();
                    }
                }
            }
            (_, Value::Number(t)) if !t.is_f64() => {
                let key = path.join(".");
                // An environment variable is written as a string; TOML's
                // nan and inf reach JSON as null.
                let number = match written {
                    Value::String(s) => s.trim().parse::<f64>().ok(),
                    Value::Number(n) => n.as_f64(),
                    _ => None,
                };
                let shown = match written {
                    Value::String(s) => s.clone(),
                    Value::Null => "nan or inf".to_owned(),
                    other => other.to_string(),
                };
                let max = max_for(&key);
                match number {
                    Some(n) if n.is_finite() && n.fract() == 0.0 => {
                        if n > max as f64 || t.as_u64().is_some_and(|t| t > max) {
                            out.push(format!("{key}: at most {max}, got {shown}"));
                        }
                    }
                    _ => out.push(format!("{key}: expected a whole number, got {shown}")),
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(written, typed, &mut Vec::new(), &mut out);
    out
}

impl Config {
    /// The address that credits `login` as co-author of a commit on
    /// `forge`: the forge's own no-reply address for that user.
    pub fn co_author_email(&self, forge: forgehand_forge::ForgeKind, login: &str) -> String {
        let domain = if forge.is_gitea_family() {
            self.gitea.noreply_domain()
        } else {
            self.github.noreply_domain()
        };
        format!("{login}@{domain}")
    }

    /// The gate's policy for `repo` (`owner/name`) when no maintainer
    /// allowed more.
    pub fn policy_for(&self, repo: &str) -> forgehand_gate::GatePolicy {
        forgehand_gate::GatePolicy {
            max_removed_share: self.gate.max_removed_share,
            ..self.git.policy_for(repo)
        }
    }

    /// Loads `path` (when given: see [`ConfigFile::locate`] for which
    /// file the operator chose) and then the environment, lets `adopt`
    /// fill in what the configuration leaves to something stored
    /// elsewhere (a GitHub App `forgehand setup github` created:
    /// `github_app::adopt`), and validates. No file is ever looked for on
    /// its own: the working directory may be a repository's, and a
    /// repository does not configure the host; loading reads no file but
    /// the configuration's own, unless its caller's `adopt` does.
    pub fn load(path: Option<&Path>, adopt: Adopt<'_>) -> Result<Config, ConfigError> {
        let env: Vec<(String, String)> = std::env::vars().collect();
        let places = Self::places(path, &env)?;
        Self::load_with(path, env, &places, adopt)
    }

    /// Like [`Config::load`], with the environment given explicitly so
    /// tests don't depend on the process's.
    pub fn load_from(
        path: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config, ConfigError> {
        let env: Vec<(String, String)> = env.into_iter().collect();
        let places = Self::places(path, &env)?;
        Self::load_in(path, env, &places)
    }

    fn places(path: Option<&Path>, env: &[(String, String)]) -> Result<Places, ConfigError> {
        let cwd = std::env::current_dir()
            .map_err(|e| ConfigError::Invalid(vec![format!("the working directory: {e}")]))?;
        Ok(Places::new(cwd, path.is_some(), env))
    }

    /// Like [`Config::load_from`], relative paths resolved against
    /// `places`.
    pub fn load_in(
        path: Option<&Path>,
        env: Vec<(String, String)>,
        places: &Places,
    ) -> Result<Config, ConfigError> {
        Self::load_with(path, env, places, &|_| Ok(()))
    }

    /// Like [`Config::load_in`], `adopt` filling in the GitHub section
    /// before validation.
    pub fn load_with(
        path: Option<&Path>,
        env: Vec<(String, String)>,
        places: &Places,
        adopt: Adopt<'_>,
    ) -> Result<Config, ConfigError> {
        let mut builder = config::Config::builder();
        let mut unknown = Vec::new();
        if let Some(p) = path {
            if !p.exists() {
                return Err(ConfigError::MissingFile(p.to_owned()));
            }
            if let Ok(text) = std::fs::read_to_string(p) {
                unknown.extend(keys::in_file(p, &text));
            }
            builder = builder.add_source(config::File::from(p).format(config::FileFormat::Toml));
        }
        unknown.extend(keys::in_variables(env.iter().map(|(k, _)| k.as_str())));
        if !unknown.is_empty() {
            return Err(ConfigError::Invalid(unknown));
        }
        let overlay: config::Map<String, String> = env
            .into_iter()
            // Every key lives in a section, so only FORGEHAND_<SECTION>__<KEY>
            // is configuration; FORGEHAND_CONFIG and other FORGEHAND_*
            // variables of the operator's scripts are left alone.
            .filter(|(k, _)| {
                k.strip_prefix(ENV_PREFIX)
                    .is_some_and(|key| key.contains("__"))
            })
            .collect();
        builder = builder.add_source(
            config::Environment::with_prefix("FORGEHAND")
                .prefix_separator("_")
                .separator("__")
                .source(Some(overlay)),
        );
        let built = builder.build()?;
        // What was written, numbers as written: the typed read rounds a
        // fraction given for a whole number (0.4 hours became 0, "never").
        let written: serde_json::Value = built.clone().try_deserialize()?;
        let mut config: Config = built.try_deserialize()?;
        let typed = serde_json::to_value(&config)
            .map_err(|e| ConfigError::Invalid(vec![format!("the configuration: {e}")]))?;
        let rounded = whole_numbers_refused(&written, &typed);
        if !rounded.is_empty() {
            return Err(ConfigError::Invalid(rounded));
        }
        config.anchor_paths(&written, places);
        // A GitHub App that `forgehand setup github` created and stored is
        // used when the configuration names no other credential.
        adopt(&mut config.github).map_err(|problem| ConfigError::Invalid(vec![problem]))?;
        config.validate()?;
        Ok(config)
    }

    /// Checks what types alone cannot, naming each offending key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut problems = Vec::new();
        self.server.problems(&mut problems);
        self.database.problems(&mut problems);
        let username = self.bot.username.trim();
        if username.is_empty()
            || username.contains(char::is_whitespace)
            || username.starts_with('@')
        {
            problems.push(format!(
                "bot.username: `{}` must be the bot's login on the forge, without `@` or spaces",
                self.bot.username
            ));
        }
        if self.bot.label.trim().is_empty() {
            problems.push("bot.label: must not be empty".into());
        }
        if self.queue.max_attempts == 0 {
            problems.push("queue.max_attempts: must be at least 1".into());
        }
        if self.queue.lease_secs < 2 {
            problems.push(
                "queue.lease_secs: must be at least 2 (heartbeats come every third of it)".into(),
            );
        }
        if self.queue.retry_base_secs > self.queue.retry_max_secs {
            problems.push("queue.retry_base_secs: must not exceed queue.retry_max_secs".into());
        }
        if self.queue.poll_interval_ms == 0 {
            problems.push("queue.poll_interval_ms: must be at least 1".into());
        }
        if tracing_subscriber::EnvFilter::try_new(&self.log.level).is_err() {
            problems.push(format!(
                "log.level: `{}` is not a tracing filter",
                self.log.level
            ));
        }
        self.sandbox.problems(&mut problems);
        self.git.problems(&mut problems);
        self.gate.problems(&mut problems);
        self.model.problems(&mut problems);
        self.agent.problems(&mut problems);
        self.environment.problems(&mut problems);
        self.github.problems(&mut problems);
        self.gitea.problems(&mut problems);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(problems))
        }
    }

    pub fn listen_addr(&self) -> Result<SocketAddr, std::net::AddrParseError> {
        self.server.listen.parse()
    }

    /// Things that are valid but probably not what the operator wants.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if self.github.webhook_secret.is_empty() && self.gitea.webhook_secret.is_empty() {
            warnings.push(
                "neither github.webhook_secret nor gitea.webhook_secret is set: every webhook will be refused".into(),
            );
        }
        if self.api.token.is_none() {
            warnings.push("api.token is not set: the operator API (/api/*) is off".into());
        }
        if self.model.price().is_none() {
            warnings.push(format!(
                "model.prices.\"{}\" is not set: the model is unpriced — what runs cost is not shown (\"unpriced\") and agent.max_dollars does not hold them",
                self.model.name
            ));
        }
        warnings
    }

    /// The effective configuration as TOML, secrets replaced by a marker.
    pub fn to_redacted_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_else(|e| format!("# cannot render: {e}\n"))
    }
}

const REDACTED: &str = "<redacted>";

/// What is wrong with `url` as a base address (`https://host[/path]`):
/// another scheme, credentials, a query or a fragment.
fn base_url_problem(url: &str) -> Result<(), &'static str> {
    let parsed = reqwest::Url::parse(url).map_err(|_| "is not a URL")?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err("is not an http(s) URL with a host");
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("must not hold credentials");
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err("must not have a query or a fragment");
    }
    Ok(())
}

/// `url` with its credentials (user and password) replaced by a marker.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    // The last `@` ends the credentials (a password may hold one).
    match rest.rsplit_once('@') {
        Some((_, host)) => format!("{scheme}<credentials redacted>@{host}"),
        None => url.to_owned(),
    }
}

fn redact_database_url<S: Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&redact_url(url))
}

fn redact_list<S: Serializer>(list: &[SecretString], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(|_| REDACTED))
}

/// A set secret as a marker; an unset one as nothing (TOML leaves the
/// key out: `check-config` showed `token = ""`, which reads as set).
fn redact_option<S: Serializer>(v: &Option<SecretString>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(_) => s.serialize_str(REDACTED),
        None => s.serialize_none(),
    }
}

use forgehand_types::config::string_list;

/// [`string_list`], held as secrets.
fn secret_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<SecretString>, D::Error> {
    Ok(string_list(d)?
        .into_iter()
        .map(SecretString::from)
        .collect())
}

fn optional_secret<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SecretString>, D::Error> {
    let raw = Option::<String>::deserialize(d)?;
    Ok(raw
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .map(SecretString::from))
}

#[cfg(test)]
mod tests;
