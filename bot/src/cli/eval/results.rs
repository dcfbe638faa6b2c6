//! What an evaluation writes: a line per instance and run as each one
//! ends (`results.jsonl`, the record a resumed evaluation starts from),
//! and the summary over all of them (`summary.json`).

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use forgehand_model::Usage;
use forgehand_types::reason::Reason;

/// Why an instance's run was not resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unresolved {
    /// The scored tree's `FAIL_TO_PASS` or `PASS_TO_PASS` did not all
    /// pass (or the command did not end in time).
    TestsFailed,
    /// The row's gold patch does not apply to its base.
    PatchDoesNotApply,
    /// The row's test patch does not apply over what is scored.
    TestPatchDoesNotApply,
    /// The run ended without a commit to score, or the gate held or
    /// refused it: the run's own reason.
    Run(Reason),
}

impl Unresolved {
    pub fn code(self) -> &'static str {
        match self {
            Unresolved::TestsFailed => "tests_failed",
            Unresolved::PatchDoesNotApply => "patch_does_not_apply",
            Unresolved::TestPatchDoesNotApply => "test_patch_does_not_apply",
            Unresolved::Run(reason) => reason.code(),
        }
    }
}

impl std::fmt::Display for Unresolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

impl Serialize for Unresolved {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.code())
    }
}

impl<'de> Deserialize<'de> for Unresolved {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let code = String::deserialize(deserializer)?;
        let own = [
            Unresolved::TestsFailed,
            Unresolved::PatchDoesNotApply,
            Unresolved::TestPatchDoesNotApply,
        ];
        if let Some(found) = own.into_iter().find(|u| u.code() == code) {
            return Ok(found);
        }
        code.parse()
            .map(Unresolved::Run)
            .map_err(serde::de::Error::custom)
    }
}

/// One instance's run, as `results.jsonl` holds it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InstanceRun {
    pub instance_id: String,
    /// From 1 to `--runs`.
    pub run: u32,
    pub resolved: bool,
    pub reason: Option<Unresolved>,
    /// What the reason leaves out: the run's message, the test command's
    /// exit.
    pub message: Option<String>,
    /// The four token counts, as the provider billed them (flattened:
    /// `input_tokens`, `output_tokens`, `cache_read_tokens`,
    /// `cache_write_tokens`).
    #[serde(flatten)]
    pub usage: Usage,
    /// `null` when the model has no price.
    pub cost_usd: Option<f64>,
    pub turns: u32,
    pub wall_secs: f64,
    /// The agent's transcript (none for `--patch`).
    pub transcript: Option<PathBuf>,
    /// The scored tests' output.
    pub test_log: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}, line {line}: {message} (the directory holds another evaluation's results, or a damaged file: use another --out)")]
    Damaged {
        path: String,
        line: usize,
        message: String,
    },
}

/// `results.jsonl`, appended to a whole line at a time.
pub struct ResultsFile {
    path: PathBuf,
    file: std::fs::File,
}

impl ResultsFile {
    /// Opens (or makes) `dir/results.jsonl` and reads what an earlier
    /// evaluation in `dir` finished. A last line cut short (the process
    /// killed while writing it) is dropped: that run is done again.
    pub fn open(
        dir: &Path,
        known: &HashSet<&str>,
    ) -> Result<(ResultsFile, Vec<InstanceRun>), ResultsError> {
        let path = dir.join("results.jsonl");
        let shown = path.display().to_string();
        let io = |source| ResultsError::Io {
            path: shown.clone(),
            source,
        };
        let text = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io(e)),
        };
        // Only whole lines count: what follows the last newline was being
        // written when the process died.
        let whole = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let mut done = Vec::new();
        for (n, line) in text[..whole].split(|&b| b == b'\n').enumerate() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let damaged = |message: String| ResultsError::Damaged {
                path: shown.clone(),
                line: n + 1,
                message,
            };
            let run: InstanceRun =
                serde_json::from_slice(line).map_err(|e| damaged(e.to_string()))?;
            if done
                .iter()
                .any(|d: &InstanceRun| d.instance_id == run.instance_id && d.run == run.run)
            {
                return Err(damaged(format!(
                    "run {} of `{}` is there twice",
                    run.run, run.instance_id
                )));
            }
            if !known.contains(run.instance_id.as_str()) {
                return Err(damaged(format!(
                    "instance `{}` is not in the dataset",
                    run.instance_id
                )));
            }
            done.push(run);
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io)?;
        file.set_len(whole as u64).map_err(io)?;
        let mut file = file;
        use std::io::Seek;
        file.seek(std::io::SeekFrom::End(0)).map_err(io)?;
        Ok((ResultsFile { path, file }, done))
    }

    /// Appends `run` as one line, on disk before this returns.
    pub fn append(&mut self, run: &InstanceRun) -> Result<(), ResultsError> {
        let mut line = serde_json::to_vec(run).expect("a result serializes");
        line.push(b'\n');
        let io = |source| ResultsError::Io {
            path: self.path.display().to_string(),
            source,
        };
        self.file.write_all(&line).map_err(io)?;
        self.file.sync_data().map_err(io)
    }
}

/// `summary.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub instances: usize,
    /// Runs per instance (`--runs`).
    pub runs: u32,
    /// Instance-runs done (less than instances × runs when stopped).
    pub done: usize,
    /// Resolved instance-runs.
    pub resolved: usize,
    pub resolved_rate: f64,
    /// The 95% Wilson score interval of the rate.
    pub interval: [f64; 2],
    /// `null` when any run's model had no price.
    pub cost_usd: Option<f64>,
    #[serde(flatten)]
    pub usage: Usage,
    /// Unresolved instance-runs by reason.
    pub reasons: BTreeMap<String, usize>,
    /// Why the evaluation ended before every run was done.
    pub stopped: Option<String>,
}

impl Summary {
    pub fn of(instances: usize, runs: u32, results: &[InstanceRun]) -> Summary {
        let resolved = results.iter().filter(|r| r.resolved).count();
        let done = results.len();
        let mut reasons = BTreeMap::new();
        for reason in results.iter().filter_map(|r| r.reason) {
            *reasons.entry(reason.code().to_owned()).or_default() += 1;
        }
        let cost_usd = results
            .iter()
            .try_fold(0.0, |sum, r| r.cost_usd.map(|c| sum + c));
        let mut usage = Usage::default();
        for r in results {
            usage += r.usage;
        }
        Summary {
            instances,
            runs,
            done,
            resolved,
            resolved_rate: if done == 0 {
                0.0
            } else {
                resolved as f64 / done as f64
            },
            interval: wilson(resolved, done),
            cost_usd,
            usage,
            reasons,
            stopped: None,
        }
    }
}

/// The 95% Wilson score interval for `k` successes in `n` trials: unlike
/// the normal approximation it stays within [0, 1] and says something at
/// 0 and at n, which is where a small evaluation often lands.
pub fn wilson(k: usize, n: usize) -> [f64; 2] {
    if n == 0 {
        return [0.0, 1.0];
    }
    let z = 1.959_963_984_540_054_f64;
    let (k, n) = (k as f64, n as f64);
    let p = k / n;
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = z / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    [(centre - half).max(0.0), (centre + half).min(1.0)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 5e-4
    }

    /// Worked values (Wilson 1927; the same as statsmodels'
    /// `proportion_confint(k, n, method="wilson")`).
    #[test]
    fn the_wilson_interval_matches_worked_values() {
        let [lo, hi] = wilson(5, 5);
        assert!(close(lo, 0.5655) && hi == 1.0, "{lo} {hi}");
        let [lo, hi] = wilson(0, 5);
        assert!(lo == 0.0 && close(hi, 0.4345), "{lo} {hi}");
        let [lo, hi] = wilson(50, 100);
        assert!(close(lo, 0.4038) && close(hi, 0.5962), "{lo} {hi}");
        let [lo, hi] = wilson(73, 100);
        assert!(close(lo, 0.6357) && close(hi, 0.8073), "{lo} {hi}");
        assert_eq!(wilson(0, 0), [0.0, 1.0]);
    }

    fn run(id: &str, resolved: bool, reason: Option<Unresolved>, cost: Option<f64>) -> InstanceRun {
        InstanceRun {
            instance_id: id.into(),
            run: 1,
            resolved,
            reason,
            message: None,
            usage: Usage {
                input_tokens: 100,
                output_tokens: 10,
                cache_read_tokens: 1,
                cache_write_tokens: 2,
            },
            cost_usd: cost,
            turns: 3,
            wall_secs: 1.0,
            transcript: None,
            test_log: None,
        }
    }

    #[test]
    fn reasons_are_codes_and_read_back() {
        for reason in [
            Unresolved::TestsFailed,
            Unresolved::PatchDoesNotApply,
            Unresolved::TestPatchDoesNotApply,
            Unresolved::Run(Reason::NoChanges),
            Unresolved::Run(Reason::Gate(
                forgehand_types::reason::RefusalReason::Destructive,
            )),
        ] {
            let text = serde_json::to_string(&reason).unwrap();
            assert_eq!(text, format!("\"{}\"", reason.code()));
            assert_eq!(serde_json::from_str::<Unresolved>(&text).unwrap(), reason);
        }
        assert!(serde_json::from_str::<Unresolved>("\"nonsense\"").is_err());
    }

    #[test]
    fn the_summary_counts_reasons_and_says_unpriced() {
        let results = [
            run("a", true, None, Some(0.5)),
            run("b", false, Some(Unresolved::TestsFailed), Some(0.25)),
            run("c", false, Some(Unresolved::TestsFailed), Some(0.25)),
        ];
        let summary = Summary::of(3, 1, &results);
        assert_eq!(summary.resolved, 1);
        assert_eq!(summary.cost_usd, Some(1.0));
        assert_eq!(summary.usage.input_tokens, 300);
        assert_eq!(summary.reasons["tests_failed"], 2);
        let unpriced = [run("a", true, None, None), run("b", true, None, Some(1.0))];
        assert_eq!(Summary::of(2, 1, &unpriced).cost_usd, None);
    }

    #[test]
    fn a_line_cut_short_is_dropped_and_written_again() {
        let dir = tempfile::tempdir().unwrap();
        let known: HashSet<&str> = ["a", "b"].into();
        let (mut file, done) = ResultsFile::open(dir.path(), &known).unwrap();
        assert!(done.is_empty());
        file.append(&run("a", true, None, Some(1.0))).unwrap();
        drop(file);
        let path = dir.path().join("results.jsonl");
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{\"instance_id\":\"b\",\"ru");
        std::fs::write(&path, &text).unwrap();
        let (mut file, done) = ResultsFile::open(dir.path(), &known).unwrap();
        assert_eq!(done.len(), 1);
        file.append(&run("b", false, Some(Unresolved::TestsFailed), None))
            .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(text
            .lines()
            .all(|l| serde_json::from_str::<InstanceRun>(l).is_ok()));

        let other: HashSet<&str> = ["z"].into();
        let error = ResultsFile::open(dir.path(), &other)
            .err()
            .unwrap()
            .to_string();
        assert!(
            error.contains("line 1: instance `a` is not in the dataset"),
            "{error}"
        );
    }
}
