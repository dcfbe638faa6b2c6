//! Edits checked as they are made: a Python file that parsed before a
//! `write_file` or `edit_file` and would not after it is put back as it
//! was, and the agent is shown why. Compiled in the sandbox (the host
//! never runs the repository's code), from standard input (nothing is
//! written: `py_compile` would leave `__pycache__` in the tree).

use std::time::Duration;

use forgehand_sandbox::{ExecRequest, ExitStatus, Sandbox};

use super::files::snippet;

/// Compiles standard input as the file named by the first argument;
/// prints the line and the message of a syntax error.
const PYTHON: &str = r#"import sys
src = sys.stdin.buffer.read()
try:
    compile(src, sys.argv[1], "exec", dont_inherit=True)
except SyntaxError as e:
    print(f"{e.lineno or 0}\t{e.msg}")
    sys.exit(1)
except ValueError as e:
    print(f"0\t{e}")
    sys.exit(1)
"#;

/// How long one check may take.
const CHECK_TIME: Duration = Duration::from_secs(30);

/// What a checker said of a file's text.
#[derive(Debug, PartialEq, Eq)]
pub enum Checked {
    Parses,
    /// A syntax error: its line (0 when it names none) and message.
    Fails {
        line: usize,
        message: String,
    },
    /// No checker for this kind of file, or none in the environment.
    Unchecked,
}

/// Checks `text`, the content of `path`, in the sandbox.
pub async fn check(sandbox: &dyn Sandbox, path: &str, text: &str) -> Checked {
    if !path.ends_with(".py") {
        return Checked::Unchecked;
    }
    let mut request = ExecRequest::new(["python3", "-c", PYTHON, path]);
    request.stdin = Some(text.as_bytes().to_vec());
    request.timeout = Some(CHECK_TIME);
    let Ok(output) = sandbox.exec(request).await else {
        return Checked::Unchecked;
    };
    match output.status {
        ExitStatus::Exited(0) => Checked::Parses,
        ExitStatus::Exited(1) => {
            let said = output.stdout.to_text();
            let (line, message) = said.trim().split_once('\t').unwrap_or(("0", said.trim()));
            Checked::Fails {
                line: line.parse().unwrap_or(0),
                message: message.chars().take(500).collect(),
            }
        }
        // No python3 here (127), killed, timed out: nothing is known.
        _ => Checked::Unchecked,
    }
}

/// What the agent is told when its change is refused: the error, and the
/// lines it points at in the text the change would have made.
pub fn refusal(path: &str, attempted: &str, line: usize, message: &str) -> String {
    let at = if line > 0 {
        format!(" (line {line})")
    } else {
        String::new()
    };
    let shown = if line > 0 {
        format!(
            "\nThe change would have made these lines:\n{}",
            snippet(attempted, line, line)
        )
    } else {
        String::new()
    };
    format!(
        "refused: {path} compiled as Python before this change and would not after it: {message}{at}. The file is as it was.{shown}"
    )
}
