//! `forgehand serve` logs colour codes only to a terminal: a log file (or
//! the journal, or a container's log) gets plain text. The terminal is a
//! real pseudo-terminal made by `script` (util-linux).

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ESC: char = '\u{1b}';

fn env(dir: &std::path::Path) -> Vec<(&'static str, String)> {
    vec![
        ("FORGEHAND_SERVER__LISTEN", "127.0.0.1:0".into()),
        (
            "FORGEHAND_DATABASE__URL",
            format!("sqlite://{}", dir.join("f.db").display()),
        ),
        ("FORGEHAND_QUEUE__WORKERS", "0".into()),
        ("PATH", std::env::var("PATH").unwrap_or_default()),
    ]
}

/// Waits until `read` returns text containing `needle`, or 30 s.
fn wait_for(mut read: impl FnMut() -> String, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = read();
        if text.contains(needle) || Instant::now() > deadline {
            return text;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_log_written_to_a_file_has_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("serve.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_forgehand"))
        .arg("serve")
        .env_clear()
        .envs(env(dir.path()))
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let text = wait_for(
        || std::fs::read_to_string(&log_path).unwrap_or_default(),
        "forgehand is serving",
    );
    let _ = child.kill();
    let _ = child.wait();
    assert!(text.contains("forgehand is serving"), "{text}");
    assert!(!text.contains(ESC), "escape codes in a log file:\n{text:?}");
}

#[test]
fn a_log_on_a_terminal_is_coloured_unless_no_color_is_set() {
    for (no_color, coloured) in [(None, true), (Some("1"), false)] {
        let dir = tempfile::tempdir().unwrap();
        let transcript = dir.path().join("typescript");
        // `script` runs the command on a new pseudo-terminal and copies
        // what it writes there to the transcript. The command runs in a
        // session of its own, which killing `script` does not end: it
        // says its pid (`exec` keeps the shell's) so that the test stops
        // the server itself (every run left two serving).
        let pid_file = dir.path().join("serve.pid");
        let mut command = Command::new("script");
        command
            .args(["--quiet", "--flush", "--command"])
            .arg(format!(
                "echo $$ > '{}'; exec '{}' serve",
                pid_file.display(),
                env!("CARGO_BIN_EXE_forgehand")
            ))
            .arg(&transcript)
            .env_clear()
            .envs(env(dir.path()))
            .current_dir(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(value) = no_color {
            command.env("NO_COLOR", value);
        }
        let mut child = command
            .spawn()
            .expect("the script command (Debian package bsdutils, always installed)");
        let text = wait_for(
            || std::fs::read_to_string(&transcript).unwrap_or_default(),
            "is serving",
        );
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let stopped = Command::new("kill")
            .args(["-KILL", pid.trim()])
            .status()
            .unwrap();
        assert!(stopped.success(), "the server (pid {pid}) was not there");
        let _ = child.kill();
        let _ = child.wait();
        let mut rest = String::new();
        let _ = child.stdout.take().unwrap().read_to_string(&mut rest);
        assert!(text.contains("is serving"), "{text:?}");
        assert_eq!(
            text.contains(ESC),
            coloured,
            "NO_COLOR={no_color:?}: {text:?}"
        );
    }
}
