//! The tools that run programs: inside the sandbox, in /workspace.

use std::time::Duration;

use forgehand_sandbox::{ExecRequest, ExitStatus, Sandbox};

use super::schema::{BashArgs, GrepArgs};

/// Runs the command; its report for the model, and how it ended.
pub async fn bash(
    sandbox: &dyn Sandbox,
    args: BashArgs,
    max_time: Duration,
) -> Result<(String, ExitStatus), String> {
    let timeout = args
        .timeout_secs
        .map(Duration::from_secs)
        .unwrap_or(max_time)
        .min(max_time);
    let mut request = ExecRequest::new(["bash", "-c", &args.command]);
    request.timeout = Some(timeout);
    let output = sandbox
        .exec(request)
        .await
        .map_err(|e| format!("the sandbox could not run the command: {e}"))?;
    let mut out = format!("{}\n", output.status);
    if output.status == ExitStatus::TimedOut {
        out.push_str(&format!(
            "(the command and everything it started were killed after {} s)\n",
            timeout.as_secs()
        ));
    }
    out.push_str("--- stdout ---\n");
    out.push_str(&output.stdout.to_text());
    out.push_str("--- stderr ---\n");
    out.push_str(&output.stderr.to_text());
    Ok((out, output.status))
}

pub async fn grep(sandbox: &dyn Sandbox, args: GrepArgs) -> Result<String, String> {
    let mut argv = vec![
        "rg".to_owned(),
        "--line-number".into(),
        "--no-heading".into(),
        "--color=never".into(),
        "--max-columns=400".into(),
    ];
    if args.ignore_case == Some(true) {
        argv.push("--ignore-case".into());
    }
    argv.push("-e".into());
    argv.push(args.pattern.clone());
    argv.push("--".into());
    argv.push(args.path.unwrap_or_else(|| ".".into()));
    let output = sandbox
        .exec(ExecRequest::new(argv))
        .await
        .map_err(|e| format!("the sandbox could not run ripgrep: {e}"))?;
    match output.status {
        ExitStatus::Exited(0) => Ok(output.stdout.to_text()),
        ExitStatus::Exited(1) => Ok(format!("no match for {}\n", args.pattern)),
        status => Err(format!(
            "ripgrep failed ({status}): {}",
            output.stderr.to_text().trim()
        )),
    }
}
