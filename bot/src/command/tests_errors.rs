//! Mistakes, and the replies that explain them.

use super::parse::did_you_mean;
use super::*;

fn error(body: &str) -> CommandError {
    match parse_comment(body, "forgehand") {
        Ok(commands) => panic!("{body:?} parsed as {commands:?}"),
        Err(e) => e,
    }
}

// --- exact replies ---

#[test]
fn a_typo_gets_a_did_you_mean_reply() {
    assert_eq!(
        error("Thanks!\n/forgehand retyr").to_string(),
        "I could not understand `/forgehand retyr` (line 2, column 12): unknown command `retyr`. \
         Did you mean `/forgehand retry`?\n\
         Say `/forgehand help` to see what I understand."
    );
}

#[test]
fn a_missing_command_lists_the_commands() {
    assert_eq!(
        error("/forgehand").to_string(),
        "I could not understand `/forgehand` (line 1, column 1): a command is missing after `/forgehand`. \
         The commands are `fix`, `plan`, `go`, `stop`, `retry`, `allow-sensitive`, `allow-destructive` and `help`.\n\
         Say `/forgehand help` to see what I understand."
    );
}

#[test]
fn an_unknown_word_far_from_any_command_lists_the_commands() {
    assert_eq!(
        error("  /forgehand deploy to prod").to_string(),
        "I could not understand `/forgehand deploy to prod` (line 1, column 14): unknown command `deploy`. \
         The commands are `fix`, `plan`, `go`, `stop`, `retry`, `allow-sensitive`, `allow-destructive` and `help`.\n\
         Say `/forgehand help` to see what I understand."
    );
}

#[test]
fn arguments_to_a_command_that_takes_none_are_named() {
    assert_eq!(
        error("/forgehand retry now please").to_string(),
        "I could not understand `/forgehand retry now please` (line 1, column 18): \
         `retry` takes nothing after it, but I found `now please`. Write just `/forgehand retry`.\n\
         Say `/forgehand help` to see what I understand."
    );
}

#[test]
fn a_mention_starting_with_a_bare_command_explains_how_to_ask_instead() {
    assert_eq!(
        error("@forgehand help me with the login bug").to_string(),
        "I could not understand `@forgehand help me with the login bug` (line 1, column 17): \
         `help` takes nothing after it, but I found `me with the login bug`. Write just `@forgehand help`. \
         To ask for something in plain words, do not start with `help`.\n\
         Say `/forgehand help` to see what I understand."
    );
}

#[test]
fn an_empty_mention_asks_what_to_do() {
    assert_eq!(
        error("Over to you, @forgehand!").to_string(),
        "I could not understand `@forgehand!` (line 1, column 14): you mentioned me without saying what to do. \
         Write your request after the mention, for example `@forgehand fix the failing test`.\n\
         Say `/forgehand help` to see what I understand."
    );
}

#[test]
fn a_lone_typo_after_a_mention_is_caught_rather_than_sent_as_a_request() {
    assert_eq!(
        error("@Forgehand stpo").to_string(),
        "I could not understand `@Forgehand stpo` (line 1, column 12): unknown command `stpo`. \
         Did you mean `@forgehand stop`?\n\
         Say `/forgehand help` to see what I understand."
    );
}

// --- did you mean ---

#[test]
fn common_typos_suggest_the_intended_command() {
    for (typo, meant) in [
        ("retyr", "retry"),
        ("stpo", "stop"),
        ("hlep", "help"),
        ("fxi", "fix"),
        ("pln", "plan"),
        ("og", "go"),
        ("rerty", "retry"),
        ("retrying", "retry"),
        ("RETYR", "retry"),
    ] {
        let e = error(&format!("/forgehand {typo}"));
        let CommandErrorKind::UnknownSubcommand { word, suggestion } = &e.kind else {
            panic!("{typo}: {e:?}");
        };
        assert_eq!(word, typo);
        assert_eq!(suggestion.map(Subcommand::name), Some(meant), "{typo}");
    }
}

#[test]
fn words_unlike_any_command_get_no_suggestion() {
    for word in ["deploy", "merge", "review", "lgtm", "x"] {
        assert_eq!(did_you_mean(word, true), None, "{word}");
    }
}

#[test]
fn a_one_word_request_that_is_no_typo_stays_a_request() {
    assert_eq!(
        parse_comment("@forgehand rebase", "forgehand").unwrap(),
        vec![Addressed::Request {
            text: "rebase".into()
        }]
    );
    // Two edits away is a different word, not a typo, after a mention.
    assert_eq!(
        parse_comment("@forgehand ready", "forgehand").unwrap(),
        vec![Addressed::Request {
            text: "ready".into()
        }]
    );
}

// --- where, and what ---

#[test]
fn errors_point_at_line_and_character_column() {
    let e = error("first\n\nÜber-Fix 🙂\n  /forgehand stop — please");
    assert_eq!((e.line, e.column), (4, 19));
    assert_eq!(e.line_text, "  /forgehand stop — please");
    assert_eq!(e.snippet, "/forgehand stop — please");
    assert_eq!(
        e.kind,
        CommandErrorKind::UnexpectedArguments {
            subcommand: Subcommand::Stop,
            text: "— please".into()
        }
    );
}

#[test]
fn columns_count_characters_not_bytes() {
    let e = error("¿Qué? @forgehand");
    assert_eq!((e.line, e.column), (1, 7));
    assert_eq!(e.kind, CommandErrorKind::EmptyMention);
}

#[test]
fn an_error_on_a_windows_line_has_no_carriage_return() {
    let e = error("ok\r\n/forgehand hlep\r\n");
    assert_eq!(
        (e.line, e.column, e.line_text.as_str()),
        (2, 12, "/forgehand hlep")
    );
}

#[test]
fn a_request_typo_on_the_line_below_the_mention_points_there() {
    let e = error("@forgehand\n  retyr");
    assert_eq!(
        (e.line, e.column, e.snippet.as_str()),
        (2, 3, "@forgehand retyr")
    );
}

#[test]
fn one_bad_command_fails_the_whole_comment() {
    let e = error("/forgehand fix\n/forgehand stpo\n/forgehand go");
    assert_eq!(e.line, 2);
}

#[test]
fn the_reply_uses_the_prefix_that_was_written() {
    let e = parse_comment("/acme retyr", "acme").unwrap_err();
    assert!(e.to_string().contains("Did you mean `/acme retry`?"), "{e}");
    let e = parse_comment("/forgehand retyr", "acme").unwrap_err();
    assert!(
        e.to_string().contains("Did you mean `/forgehand retry`?"),
        "{e}"
    );
}

#[test]
fn quoted_text_with_backticks_stays_readable_markdown() {
    let e = error("/forgehand go `now`");
    assert!(
        e.to_string()
            .starts_with("I could not understand `` /forgehand go `now` `` "),
        "{e}"
    );
    assert!(e.to_string().contains("but I found `` `now` ``."), "{e}");
}

#[test]
fn long_commands_are_shortened_in_the_reply() {
    let body = format!("/forgehand stop {}", "very ".repeat(30));
    let e = error(&body);
    assert_eq!(e.snippet.chars().count(), 60);
    assert!(e.snippet.ends_with('…'));
}

#[test]
fn a_command_error_is_a_std_error() {
    let e: Box<dyn std::error::Error> = Box::new(error("/forgehand"));
    assert!(e
        .to_string()
        .ends_with("Say `/forgehand help` to see what I understand."));
}
