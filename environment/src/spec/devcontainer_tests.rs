use super::*;

const PATH: DevcontainerPath = DevcontainerPath::Folder;

fn setup(text: &str) -> Option<String> {
    match parse(PATH, text.as_bytes().to_vec()) {
        Ok(setup) => setup,
        Err(error) => panic!("{text}: {error}"),
    }
}

fn error(text: &str) -> (Location, String) {
    match parse(PATH, text.as_bytes().to_vec()) {
        Err(error @ DeclareError::Invalid { at, .. }) => (at, error.to_string()),
        other => panic!("expected an error at a line, got {other:?}"),
    }
}

#[test]
fn a_string_is_the_setup_as_written() {
    assert_eq!(
        setup(r#"{ "image": "x", "postCreateCommand": "npm ci && npm run build # once" }"#)
            .as_deref(),
        Some("npm ci && npm run build # once")
    );
}

#[test]
fn an_array_is_one_program_quoted_for_sh() {
    assert_eq!(
        setup(r#"{ "postCreateCommand": ["pip", "install", "-r", "requirements.txt"] }"#)
            .as_deref(),
        Some("pip install -r requirements.txt")
    );
    // Words the shell would split, expand or take for an assignment are
    // quoted, a single quote included.
    assert_eq!(
        setup(r#"{ "postCreateCommand": ["A=1", "echo", "it's $HOME; rm -rf /", "", "*"] }"#)
            .as_deref(),
        Some(r#"'A=1' echo 'it'\''s $HOME; rm -rf /' '' '*'"#)
    );
}

#[test]
fn the_quoted_words_reach_the_program_unchanged() {
    let words = [
        "printf", "%s|", "it's", "$HOME", "a b", "", "`id`", "\\n", "x=y",
    ];
    let json = serde_json::to_string(&words).unwrap();
    let line = setup(&format!("{{ \"onCreateCommand\": {json} }}")).unwrap();
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(&line)
        .env("HOME", "/nowhere")
        .output()
        .expect("sh runs");
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        "it's|$HOME|a b||`id`|\\n|x=y|"
    );
}

#[test]
fn an_object_runs_its_commands_in_order() {
    let line = setup(
        r#"{ "postCreateCommand": { "server": "npm ci", "docs": ["make", "-C", "docs", "deps"], "empty": "" } }"#,
    );
    assert_eq!(line.as_deref(), Some("sh -c 'npm ci' && make -C docs deps"));
}

#[test]
fn the_three_commands_join_in_lifecycle_order() {
    let line = setup(
        r#"{
            "postCreateCommand": "echo post # a comment",
            "onCreateCommand": "cd sub; echo create",
            "updateContentCommand": ["echo", "update"]
        }"#,
    )
    .unwrap();
    assert_eq!(
        line,
        "sh -c 'cd sub; echo create' && echo update && sh -c 'echo post # a comment'"
    );
    // Each string in its own shell: the `cd` and the comment stay there.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(&line)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        "create\nupdate\npost\n"
    );
}

#[test]
fn comments_and_trailing_commas_are_read() {
    let text = r#"// The project's container.
{
  /* the image
     is not used */
  "image": "base-image", // trailing
  "url": "https://example.invalid/a//b/*c*/", // slashes inside a string stay
  "postCreateCommand": [
    "echo",
    "a // b, /* c */",
  ],
  "customizations": { "vscode": { "extensions": ["a", "b",], }, },
}
"#;
    assert_eq!(setup(text).as_deref(), Some("echo 'a // b, /* c */'"));
    assert_eq!(
        setup("\u{feff}{\"postCreateCommand\":\"make\",}").as_deref(),
        Some("make")
    );
}

#[test]
fn escaped_quotes_do_not_end_a_string() {
    let text = r#"{ "postCreateCommand": ["echo", "say \"hi // no comment, ]", "\\"], }"#;
    assert_eq!(
        setup(text).as_deref(),
        Some(r#"echo 'say "hi // no comment, ]' '\'"#)
    );
}

#[test]
fn no_commands_declare_no_setup() {
    assert_eq!(setup(r#"{ "image": "x" }"#), None);
    assert_eq!(
        setup(r#"{ "postCreateCommand": null, "onCreateCommand": "  " }"#),
        None
    );
    assert_eq!(setup(r#"{ "postCreateCommand": {} }"#), None);
}

#[test]
fn errors_name_their_line_and_what_was_expected() {
    let (at, message) = error("{\n  \"image\": \"x\",\n  \"postCreateCommand\": 3\n}\n");
    assert_eq!(at.line, 3);
    assert!(
        message.starts_with(".devcontainer/devcontainer.json, line 3, column ")
            && message.ends_with(
                ": postCreateCommand: expected a command: a string (a shell line), an array of strings (a program and its arguments) or an object of named commands, found a number"
            ),
        "{message}"
    );
    let (at, message) = error("{\n\"onCreateCommand\": [\n  \"echo\",\n  true\n]}");
    assert_eq!(at.line, 4);
    assert!(
        message.ends_with(
            "onCreateCommand[1]: expected a string (one word of the command), found a boolean"
        ),
        "{message}"
    );
    let (at, message) =
        error("{\n\"postCreateCommand\": {\n  \"a\": \"x\",\n  \"b\": { \"c\": 1 }\n}}");
    assert_eq!(at.line, 4);
    assert!(
        message.contains(
            "postCreateCommand.b: expected a string (a shell line) or an array of strings"
        ),
        "{message}"
    );
    let (at, message) = error("{\n\"updateContentCommand\": []\n}");
    assert_eq!(at.line, 2);
    assert!(
        message.ends_with("updateContentCommand: expected a command's words, found an empty array"),
        "{message}"
    );
    let (at, message) = error("{\n\"postCreateCommand\": \"a\",\n\"postCreateCommand\": \"b\"\n}");
    assert_eq!(at.line, 3);
    assert!(
        message.ends_with("postCreateCommand is given twice"),
        "{message}"
    );
}

#[test]
fn unparseable_json_is_an_error_at_its_line() {
    let (at, message) = error("{\n  \"image\": \"x\"\n  \"postCreateCommand\": \"y\"\n}");
    assert_eq!(at.line, 3);
    assert!(message.contains("expected `,` or `}`"), "{message}");
    assert!(!message.contains(" at line "), "{message}");
    let (at, message) = error("{\n  /* open\n  \"postCreateCommand\": \"y\"\n}");
    assert_eq!((at.line, at.column), (2, 3));
    assert!(message.ends_with("a comment opened here is never closed"));
    let (at, _) = error("[\"postCreateCommand\"]");
    assert_eq!(at.line, 1);
}

#[test]
fn the_joined_line_is_bounded() {
    let long = "x".repeat(crate::spec::MAX_COMMAND_BYTES);
    let (_, message) = error(&format!(
        "{{\"onCreateCommand\": \"{long}\", \"postCreateCommand\": \"y\"}}"
    ));
    assert!(message.contains("together: the command is"), "{message}");
    let (_, message) = error("{\"postCreateCommand\": \"a\\u0000b\"}");
    assert!(message.contains("cannot contain a NUL"), "{message}");
}

#[test]
fn deep_nesting_neither_crashes_nor_hides_a_command() {
    let depth = 20_000;
    let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    // Skipped without recursion where it is not read...
    let text = format!("{{\"customizations\": {nested}, \"postCreateCommand\": \"make\"}}");
    assert_eq!(setup(&text).as_deref(), Some("make"));
    // ...and a wrong type where it is.
    let (_, message) = error(&format!("{{\"postCreateCommand\": {{\"a\": {nested}}}}}"));
    assert!(
        message.contains(
            "postCreateCommand.a[0]: expected a string (one word of the command), found an array"
        ),
        "{message}"
    );
}
