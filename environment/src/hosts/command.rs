//! Asking a package manager: run it with the host's environment (its
//! configuration is what is wanted), no input, a time limit, and only the
//! first bytes of what it prints.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::Command;

const TIMEOUT: Duration = Duration::from_secs(30);
const MAX_OUTPUT: u64 = 64 * 1024;

/// What the command printed, or a note saying why there is nothing
/// ("npm is not installed", "… exited with 1: first line of stderr").
pub(crate) async fn output(program: &str, args: &[&str]) -> Result<String, String> {
    let shown = std::iter::once(program)
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    let mut child = match Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("{program} is not installed (not on PATH)"));
        }
        Err(e) => return Err(format!("`{shown}`: {e}")),
    };
    let mut stdout = child.stdout.take().expect("piped").take(MAX_OUTPUT);
    let mut stderr = child.stderr.take().expect("piped").take(MAX_OUTPUT);
    let run = async {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let (read_out, read_err) =
            tokio::join!(stdout.read_to_end(&mut out), stderr.read_to_end(&mut err),);
        read_out.and(read_err)?;
        // What is left beyond the cap is not read: stop the program
        // rather than let it block on a full pipe.
        drop(stdout);
        drop(stderr);
        let status = child.wait().await?;
        std::io::Result::Ok((status, out, err))
    };
    let (status, out, err) = match tokio::time::timeout(TIMEOUT, run).await {
        Ok(Ok(done)) => done,
        Ok(Err(e)) => return Err(format!("`{shown}`: {e}")),
        Err(_) => {
            return Err(format!(
                "`{shown}` did not finish in {}s",
                TIMEOUT.as_secs()
            ))
        }
    };
    if !status.success() {
        let first_line: String = String::from_utf8_lossy(&err)
            .lines()
            .find(|line| !line.trim().is_empty())
            .unwrap_or_default()
            .chars()
            .take(200)
            .collect();
        return Err(format!("`{shown}` failed ({status}): {first_line}"));
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}
