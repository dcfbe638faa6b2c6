use crate::secrets::*;
use secrecy::SecretString;

/// Format-valid but made-up values, built here so that no token-shaped
/// literal sits in the repository.
fn chars(n: usize, alphabet: &str, seed: u64) -> String {
    let alphabet: Vec<char> = alphabet.chars().collect();
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            alphabet[(x >> 33) as usize % alphabet.len()]
        })
        .collect()
}
const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// A repository whose last commit holds `files`, changed in the working
/// tree by `change`; what the scan finds in the diff, as text.
struct Work {
    dir: tempfile::TempDir,
    repo: git2::Repository,
}

impl Work {
    fn new(files: &[(&str, &[u8])]) -> Work {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        let work = Work { dir, repo };
        for (path, content) in files {
            work.write(path, content);
        }
        let mut index = work.repo.index().unwrap();
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        index.write().unwrap();
        let tree = work.repo.find_tree(index.write_tree().unwrap()).unwrap();
        let who = git2::Signature::now("t", "t@example.invalid").unwrap();
        work.repo
            .commit(Some("HEAD"), &who, &who, "seed", &tree, &[])
            .unwrap();
        drop(tree);
        work
    }

    fn write(&self, path: &str, content: &[u8]) {
        let path = self.dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    fn scan(&self) -> Vec<Finding> {
        let diff = crate::check::working_diff(&self.repo, crate::integrity::TreeLimits::default())
            .unwrap();
        scanner().scan_diff(&diff).unwrap()
    }
}

/// Ten committed lines, then `added` appended: the first added line is
/// line 11.
fn scan_added(file: &str, added: &[&str]) -> Vec<Finding> {
    let base: String = (1..=10).map(|n| format!("line {n}\n")).collect();
    let work = Work::new(&[(file, base.as_bytes())]);
    let mut text = base;
    for line in added {
        text.push_str(line);
        text.push('\n');
    }
    work.write(file, text.as_bytes());
    work.scan()
}

fn shown(findings: &[Finding]) -> Vec<String> {
    findings.iter().map(ToString::to_string).collect()
}

fn scanner() -> SecretScanner {
    SecretScanner::new([(
        "github.token".to_owned(),
        SecretString::from("host-token-value-1234567".to_owned()),
    )])
}

#[test]
fn every_listed_format_is_found_with_file_and_line() {
    let cases: Vec<(String, SecretKind)> = vec![
        (
            format!("-----BEGIN OPENSSH {}-----", "PRIVATE KEY"),
            SecretKind::PrivateKey,
        ),
        (
            format!("-----BEGIN RSA {}-----", "PRIVATE KEY"),
            SecretKind::PrivateKey,
        ),
        (
            format!("-----BEGIN {}-----", "PRIVATE KEY"),
            SecretKind::PrivateKey,
        ),
        (
            format!("token = \"ghp_{}\"", chars(36, ALNUM, 1)),
            SecretKind::GitHubToken,
        ),
        (
            format!("GH=ghs_{}", chars(36, ALNUM, 2)),
            SecretKind::GitHubToken,
        ),
        (
            format!("github_pat_{}", chars(82, ALNUM, 3)),
            SecretKind::GitHubToken,
        ),
        (
            format!("gitlab: glpat-{}", chars(20, ALNUM, 4)),
            SecretKind::GitLabToken,
        ),
        (
            format!("AKIA{}", chars(16, UPPER, 5)),
            SecretKind::AwsAccessKeyId,
        ),
        (
            format!(
                "aws_secret_access_key = {}",
                chars(
                    40,
                    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+",
                    6
                )
            ),
            SecretKind::AwsSecretAccessKey,
        ),
        (
            format!(
                "SLACK=xoxb-{}-{}",
                chars(12, "0123456789", 7),
                chars(24, ALNUM, 8)
            ),
            SecretKind::SlackToken,
        ),
        (
            format!(
                "url: https://hooks.slack.com/services/T{}/B{}/{}",
                chars(8, UPPER, 9),
                chars(8, UPPER, 10),
                chars(24, ALNUM, 11)
            ),
            SecretKind::SlackWebhook,
        ),
        (
            format!("OPENAI_API_KEY=sk-proj-{}", chars(48, ALNUM, 12)),
            SecretKind::OpenAiKey,
        ),
        (
            format!("key: sk-{}", chars(48, ALNUM, 13)),
            SecretKind::OpenAiKey,
        ),
        (
            format!("ANTHROPIC_API_KEY=sk-ant-api03-{}", chars(80, ALNUM, 14)),
            SecretKind::AnthropicKey,
        ),
        (
            format!("db_password: \"{}\"", chars(32, ALNUM, 15)),
            SecretKind::HighEntropyAssignment,
        ),
        (
            format!("\"client_secret\": \"{}\"", chars(40, ALNUM, 16)),
            SecretKind::HighEntropyAssignment,
        ),
    ];
    for (line, kind) in cases {
        let findings = scan_added("src/config.py", &["x = 1", &line]);
        assert_eq!(
            findings,
            vec![Finding {
                place: Place::Line {
                    file: "src/config.py".into(),
                    line: 12
                },
                kind: kind.clone()
            }],
            "{kind:?} in {line:?}"
        );
        // What is reported never holds the value.
        let shown = findings[0].to_string();
        assert!(!shown.contains(&line[line.len() - 12..]), "{shown}");
    }
}

#[test]
fn the_hosts_own_token_is_found_wherever_it_appears() {
    for line in [
        "host-token-value-1234567",
        "curl -H 'Authorization: token host-token-value-1234567' https://api",
        "https://x-access-token:host-token-value-1234567@github.com/o/r.git",
        "# host-token-value-1234567 in a comment",
    ] {
        let findings = scan_added("notes.md", &[line]);
        assert_eq!(
            findings.iter().map(|f| &f.kind).collect::<Vec<_>>(),
            vec![&SecretKind::HostCredential("github.token".into())],
            "{line}"
        );
        assert!(!findings[0].to_string().contains("host-token-value"));
    }
    assert!(!format!("{:?}", scanner()).contains("host-token-value"));
}

#[test]
fn ordinary_code_is_not_flagged() {
    for line in [
        "password = os.environ[\"DB_PASSWORD\"]",
        "token: ${{ secrets.GITHUB_TOKEN }}",
        "api_key = \"your_api_key_here_xxxxxxxx\"",
        "secret = \"changeme-changeme-changeme\"",
        "let token_count = tokens.iter().filter(|t| t.is_word()).count();",
        "sha = \"3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39\"",
        "See https://docs.github.com/en/authentication for a personal token.",
        "sk-learn is a library",
        "password_hash_function = argon2",
    ] {
        assert_eq!(scanner().scan_line(line), None, "{line}");
    }
}

#[test]
fn only_added_lines_count_and_line_numbers_follow_the_new_file() {
    let token = format!("ghp_{}", chars(36, ALNUM, 20));
    let forty: String = (1..=42).map(|n| format!("{n}\n")).collect();
    let work = Work::new(&[
        ("a.txt", format!("one\n{token}\nthree\n").as_bytes()),
        ("b.txt", forty.as_bytes()),
        ("gone.txt", format!("{token}\n").as_bytes()),
    ]);
    work.write("a.txt", b"one\ntwo\nthree\n");
    let mut b = forty.clone();
    b.insert_str(b.find("41\n").unwrap(), &format!("{token}\n"));
    work.write("b.txt", b.as_bytes());
    std::fs::remove_file(work.dir.path().join("gone.txt")).unwrap();
    work.write("new.txt", format!("fine\n{token}\n").as_bytes());
    assert_eq!(
        shown(&work.scan()),
        ["b.txt:41: a GitHub token", "new.txt:2: a GitHub token"]
    );
}

/// What a file says is content, whatever it looks like: a line reading
/// `++ /dev/null` (added, it is `+++ /dev/null` in a diff) used to end the
/// scan of its file.
#[test]
fn diff_syntax_inside_a_file_is_only_content() {
    let key = format!("ANTHROPIC_API_KEY=sk-ant-api03-{}", chars(80, ALNUM, 30));
    let token = format!("ghp_{}", chars(36, ALNUM, 31));
    let aws = format!("AKIA{}", chars(16, UPPER, 32));
    let text = format!(
        "intro\n++ /dev/null\n{key}\n+++ b/other.txt\n@@ -1 +1 @@\n{token}\ndiff --git a/x b/x\n--- a/x\n-----BEGIN {} KEY-----\n\\ No newline at end of file\n{aws}\n",
        "PRIVATE"
    );
    let work = Work::new(&[("README.md", b"# readme\n")]);
    work.write("notes.txt", text.as_bytes());
    work.write("README.md", format!("# readme\n{text}").as_bytes());
    assert_eq!(
        shown(&work.scan()),
        [
            "README.md:4: an Anthropic API key",
            "README.md:7: a GitHub token",
            "README.md:10: a private key",
            "README.md:12: an AWS access key id",
            "notes.txt:3: an Anthropic API key",
            "notes.txt:6: a GitHub token",
            "notes.txt:9: a private key",
            "notes.txt:11: an AWS access key id",
        ]
    );
}

#[test]
fn a_secret_in_a_file_name_is_found_and_never_shown() {
    let token = format!("ghp_{}", chars(36, ALNUM, 40));
    let work = Work::new(&[(&format!("old-{token}"), b"x\n")]);
    std::fs::remove_file(work.dir.path().join(format!("old-{token}"))).unwrap();
    work.write(
        &format!("keys/{token}/host-token-value-1234567.txt"),
        format!("{token}\n").as_bytes(),
    );
    let found = shown(&work.scan());
    assert_eq!(
        found,
        [
            "file name keys/[secret]/[secret].txt: the host's own credential github.token",
            "keys/[secret]/[secret].txt:1: a GitHub token",
        ],
        "a deleted file's name was in the repository already"
    );
    for line in &found {
        assert!(
            !line.contains(&token[4..]) && !line.contains("host-token"),
            "{line}"
        );
    }
}

#[test]
fn binary_files_are_scanned_as_text() {
    let aws = format!("AKIA{}", chars(16, UPPER, 50));
    let work = Work::new(&[("README.md", b"x\n")]);
    let mut blob = b"\x7fELF\x00\x01\x02\x00\n".to_vec();
    blob.extend_from_slice(aws.as_bytes());
    blob.extend_from_slice(b"\x00\xff");
    work.write("tool.bin", &blob);
    work.write(".gitattributes", b"*.bin binary -diff\n");
    assert_eq!(shown(&work.scan()), ["tool.bin:2: an AWS access key id"]);
}

#[test]
fn the_commit_message_is_scanned_line_by_line() {
    let token = format!("ghp_{}", chars(36, ALNUM, 60));
    let message = format!("Fix the build\n\nUsed {token} to test.\nhost-token-value-1234567\n");
    assert_eq!(
        shown(&scanner().scan_message(&message)),
        [
            "commit message line 3: a GitHub token",
            "commit message line 4: the host's own credential github.token",
        ]
    );
    assert!(scanner()
        .scan_message("Fix the build\n\nAll tests pass.")
        .is_empty());
}

#[test]
fn short_host_secrets_are_not_searched_for() {
    let s = SecretScanner::new([("x".to_owned(), SecretString::from("abc".to_owned()))]);
    assert_eq!(s.scan_line("abc abc abc"), None);
}
