use super::*;

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

fn diff(file: &str, added: &[&str]) -> String {
    let mut d = format!(
        "diff --git a/{file} b/{file}\n--- a/{file}\n+++ b/{file}\n@@ -10,2 +10,{} @@\n unchanged line\n",
        added.len() + 2
    );
    for line in added {
        d.push('+');
        d.push_str(line);
        d.push('\n');
    }
    d.push_str(" another unchanged line\n");
    d
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
        let findings = scanner().scan_diff(&diff("src/config.py", &["x = 1", &line]));
        assert_eq!(
            findings,
            vec![Finding {
                file: "src/config.py".into(),
                line: 12,
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
        let findings = scanner().scan_diff(&diff("notes.md", &[line]));
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
        assert_eq!(
            scanner().scan_diff(&diff("app.py", &[line])),
            vec![],
            "{line}"
        );
    }
}

#[test]
fn only_added_lines_count_and_line_numbers_follow_the_new_file() {
    let token = format!("ghp_{}", chars(36, ALNUM, 20));
    let d = format!(
        "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-{token}\n+two\n three\n\
         @@ -40,2 +40,3 @@\n forty\n+{token}\n forty-one\n\
         diff --git a/gone.txt b/gone.txt\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-{token}\n\
         diff --git a/new.txt b/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+fine\n+{token}\n"
    );
    let found: Vec<String> = scanner()
        .scan_diff(&d)
        .iter()
        .map(|f| f.to_string())
        .collect();
    assert_eq!(
        found,
        ["a.txt:41: a GitHub token", "new.txt:2: a GitHub token"]
    );
}

#[test]
fn short_host_secrets_are_not_searched_for() {
    let s = SecretScanner::new([("x".to_owned(), SecretString::from("abc".to_owned()))]);
    assert_eq!(s.scan_line("abc abc abc"), None);
}
