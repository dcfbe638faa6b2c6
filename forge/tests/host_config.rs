//! The host's own git configuration (here a `~/.gitconfig` with a
//! redirect and a credential helper) is not read by host-side git. A test
//! binary of its own: it sets HOME for the whole process.

#[test]
fn the_hosts_global_git_config_is_not_read() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join(".gitconfig"),
        "[user]\n\tname = from-the-host\n[url \"https://evil.invalid/\"]\n\tinsteadOf = https://github.com/\n[credential]\n\thelper = !touch /tmp/forgehand-canary-helper\n",
    )
    .unwrap();
    // SAFETY: the only test in this binary; nothing else reads the
    // environment concurrently.
    unsafe {
        std::env::set_var("HOME", home.path());
        std::env::set_var("XDG_CONFIG_HOME", home.path().join(".config"));
    }
    // Without isolation libgit2 reads it (this is what the test guards).
    let before = git2::Config::open_default().unwrap();
    assert_eq!(before.get_string("user.name").unwrap(), "from-the-host");

    forgehand_forge::git::transport::isolate_from_host_config();
    let after = git2::Config::open_default().unwrap();
    assert!(
        after.get_string("user.name").is_err(),
        "the host's ~/.gitconfig is still read"
    );
    assert!(after
        .get_string("url.https://evil.invalid/.insteadof")
        .is_err());
    assert!(after.get_string("credential.helper").is_err());
}
