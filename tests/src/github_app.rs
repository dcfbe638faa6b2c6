//! A GitHub App's identity for the tests: an RSA key pair made with the
//! openssl command, as GitHub hands an App its private key.

use std::path::Path;
use std::process::Command;

/// An RSA key pair made with the openssl command: (private PEM, public PEM).
pub fn key_pair(dir: &Path, name: &str) -> (String, String) {
    let private = dir.join(format!("{name}.pem"));
    let public = dir.join(format!("{name}.pub.pem"));
    let ok = Command::new("openssl")
        .args(["genrsa", "-out"])
        .arg(&private)
        .arg("2048")
        .output()
        .expect("the openssl command (Debian package openssl; tests/run.sh installs it)")
        .status
        .success();
    assert!(ok, "openssl genrsa failed");
    let ok = Command::new("openssl")
        .args(["rsa", "-pubout", "-in"])
        .arg(&private)
        .arg("-out")
        .arg(&public)
        .output()
        .unwrap()
        .status
        .success();
    assert!(ok, "openssl rsa -pubout failed");
    (
        std::fs::read_to_string(private).unwrap(),
        std::fs::read_to_string(public).unwrap(),
    )
}
