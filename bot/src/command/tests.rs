//! What counts as a command, and what does not.

use super::*;

fn parse(body: &str) -> Vec<Addressed> {
    parse_comment(body, "forgehand").unwrap_or_else(|e| panic!("{body:?} failed:\n{e}"))
}

fn fix(instructions: &str) -> Addressed {
    Addressed::Command(Command::Fix {
        instructions: Some(instructions.to_string()),
    })
}

fn request(text: &str) -> Addressed {
    Addressed::Request {
        text: text.to_string(),
    }
}

// --- the slash commands ---

#[test]
fn a_bare_fix_asks_for_a_pull_request_without_instructions() {
    assert_eq!(
        parse("/forgehand fix"),
        vec![Addressed::Command(Command::Fix { instructions: None })]
    );
}

#[test]
fn words_after_fix_become_its_instructions() {
    assert_eq!(
        parse("/forgehand fix but keep the public API unchanged"),
        vec![fix("but keep the public API unchanged")]
    );
}

#[test]
fn instructions_go_on_until_the_paragraph_ends() {
    let body =
        "/forgehand fix\nUse the new retry helper.\n  Add a regression test.\n\nThanks a lot!";
    assert_eq!(
        parse(body),
        vec![fix("Use the new retry helper.\n  Add a regression test.")]
    );
}

#[test]
fn plan_takes_instructions_too() {
    assert_eq!(
        parse("/forgehand plan"),
        vec![Addressed::Command(Command::Plan { instructions: None })]
    );
    assert_eq!(
        parse("/forgehand plan: keep it small"),
        vec![Addressed::Command(Command::Plan {
            instructions: Some("keep it small".into())
        })]
    );
}

#[test]
fn each_command_without_arguments_is_recognised() {
    assert_eq!(
        parse("/forgehand retry"),
        vec![Addressed::Command(Command::Retry)]
    );
    assert_eq!(
        parse("/forgehand stop"),
        vec![Addressed::Command(Command::Stop)]
    );
    assert_eq!(
        parse("/forgehand go"),
        vec![Addressed::Command(Command::Go)]
    );
    assert_eq!(
        parse("/forgehand help"),
        vec![Addressed::Command(Command::Help)]
    );
}

#[test]
fn case_does_not_matter() {
    assert_eq!(
        parse("/FORGEHAND RETRY"),
        vec![Addressed::Command(Command::Retry)]
    );
    assert_eq!(parse("/ForgeHand Fix Now"), vec![fix("Now")]);
    assert_eq!(
        parse("@ForgeHand STOP"),
        vec![Addressed::Command(Command::Stop)]
    );
}

#[test]
fn leading_whitespace_before_the_slash_is_fine() {
    assert_eq!(
        parse("   /forgehand go"),
        vec![Addressed::Command(Command::Go)]
    );
    assert_eq!(
        parse("Thanks.\n\t/forgehand go"),
        vec![Addressed::Command(Command::Go)]
    );
    // ... but four columns at the start of a paragraph make a code block.
    assert_eq!(parse("\t/forgehand go"), vec![]);
}

#[test]
fn a_slash_command_in_the_middle_of_a_sentence_is_just_prose() {
    assert_eq!(
        parse("You can say /forgehand retry when CI is green."),
        vec![]
    );
}

#[test]
fn the_prefix_must_be_a_whole_word() {
    assert_eq!(
        parse("/forgehandx retry\n/forgehand-ci retry\n/forgehand/retry"),
        vec![]
    );
}

#[test]
fn trailing_punctuation_and_emoji_after_a_command_are_tolerated() {
    assert_eq!(
        parse("/forgehand stop.\n/forgehand go 🚀\n/forgehand retry !"),
        vec![
            Addressed::Command(Command::Stop),
            Addressed::Command(Command::Go),
            Addressed::Command(Command::Retry)
        ]
    );
}

#[test]
fn a_command_without_arguments_ignores_the_lines_after_it() {
    assert_eq!(
        parse("/forgehand retry\nthe runner was flaky, sorry"),
        vec![Addressed::Command(Command::Retry)]
    );
}

// --- mentions ---

#[test]
fn a_mention_with_plain_words_is_a_request() {
    assert_eq!(
        parse("@forgehand please rename `Foo` to `Bar` everywhere"),
        vec![request("please rename `Foo` to `Bar` everywhere")]
    );
}

#[test]
fn a_mention_starting_with_a_command_word_is_that_command() {
    assert_eq!(
        parse("@forgehand fix the flaky login test"),
        vec![fix("the flaky login test")]
    );
    assert_eq!(
        parse("@forgehand retry"),
        vec![Addressed::Command(Command::Retry)]
    );
    assert_eq!(
        parse("@forgehand: plan"),
        vec![Addressed::Command(Command::Plan { instructions: None })]
    );
}

#[test]
fn the_mention_is_case_insensitive() {
    assert_eq!(
        parse("@Forgehand go"),
        vec![Addressed::Command(Command::Go)]
    );
    assert_eq!(
        parse("@FORGEHAND what broke?"),
        vec![request("what broke?")]
    );
}

#[test]
fn a_mention_may_come_mid_sentence_and_punctuation_after_it_is_skipped() {
    assert_eq!(
        parse("Hey @forgehand, why is CI red?"),
        vec![request("why is CI red?")]
    );
    assert_eq!(
        parse("Thanks (@forgehand): please add docs"),
        vec![request("please add docs")]
    );
}

#[test]
fn a_request_goes_on_over_the_rest_of_its_paragraph() {
    let body = "@forgehand the parser chokes on CRLF.\nCan you add a test for it?\n\nunrelated";
    assert_eq!(
        parse(body),
        vec![request(
            "the parser chokes on CRLF.\nCan you add a test for it?"
        )]
    );
}

#[test]
fn a_mention_alone_on_its_line_takes_its_request_from_the_next_line() {
    assert_eq!(
        parse("@forgehand\nfix the typo in README"),
        vec![fix("the typo in README")]
    );
    assert_eq!(parse("@forgehand\nwhy?"), vec![request("why?")]);
}

#[test]
fn email_addresses_and_words_containing_the_name_are_not_mentions() {
    assert_eq!(
        parse("Mail me@forgehand.dev or foo@forgehand about it"),
        vec![]
    );
    assert_eq!(parse("see https://example.com/@forgehand fix"), vec![]);
}

#[test]
fn longer_names_teams_domains_and_possessives_are_not_mentions() {
    let body = "@forgehand-ci fix\n@forgehandbot fix\n@forgehand/team fix\n@forgehand.dev\n@forgehand's output";
    assert_eq!(parse(body), vec![]);
}

#[test]
fn a_backslash_escaped_mention_is_not_a_mention() {
    assert_eq!(parse(r"write \@forgehand fix to ask it"), vec![]);
}

#[test]
fn only_the_first_mention_on_a_line_counts() {
    assert_eq!(
        parse("@forgehand ask @forgehand twice"),
        vec![request("ask @forgehand twice")]
    );
}

// --- what is skipped ---

#[test]
fn commands_inside_a_backtick_fence_are_ignored() {
    let body = "Try this:\n```sh\n/forgehand retry\n@forgehand fix\n```\n/forgehand go";
    assert_eq!(parse(body), vec![Addressed::Command(Command::Go)]);
}

#[test]
fn commands_inside_a_tilde_fence_with_an_info_string_are_ignored() {
    let body = "~~~markdown title=\"x\"\n/forgehand stop\n~~~\n/forgehand go";
    assert_eq!(parse(body), vec![Addressed::Command(Command::Go)]);
}

#[test]
fn a_fence_closes_only_with_its_own_kind_and_length() {
    let body = "````\n```\n/forgehand stop\n~~~~\n````\n/forgehand go";
    assert_eq!(parse(body), vec![Addressed::Command(Command::Go)]);
}

#[test]
fn an_unclosed_fence_runs_to_the_end_of_the_comment() {
    assert_eq!(parse("```\n/forgehand stop\n\n@forgehand fix"), vec![]);
}

#[test]
fn an_indented_code_block_is_ignored() {
    let body = "Example:\n\n    /forgehand stop\n\n    @forgehand fix\n\n/forgehand go";
    assert_eq!(parse(body), vec![Addressed::Command(Command::Go)]);
}

#[test]
fn an_indented_line_inside_a_paragraph_is_not_code() {
    let body = "/forgehand fix\n    keep the indentation";
    assert_eq!(parse(body), vec![fix("keep the indentation")]);
}

#[test]
fn inline_code_hides_commands_but_stays_in_request_text() {
    assert_eq!(
        parse("`/forgehand retry` restarts it, and ``@forgehand ` fix`` too"),
        vec![]
    );
    assert_eq!(
        parse("@forgehand explain `/forgehand retry`"),
        vec![request("explain `/forgehand retry`")]
    );
}

#[test]
fn a_command_after_inline_code_is_not_at_the_start_of_the_line() {
    assert_eq!(parse("`x` /forgehand retry"), vec![]);
}

#[test]
fn quoted_lines_are_ignored() {
    let body = "> /forgehand stop\n   > @forgehand fix it\n>> /forgehand go\n\n/forgehand retry";
    assert_eq!(parse(body), vec![Addressed::Command(Command::Retry)]);
}

#[test]
fn html_comments_hide_commands_even_over_several_lines() {
    let body =
        "<!-- /forgehand stop -->\n<!--\n@forgehand fix\n/forgehand stop\n-->\n/forgehand go";
    assert_eq!(parse(body), vec![Addressed::Command(Command::Go)]);
}

#[test]
fn html_comments_are_dropped_from_instructions() {
    assert_eq!(
        parse("/forgehand fix the <!-- secret --> bug"),
        vec![fix("the  bug")]
    );
    assert_eq!(
        parse("<!-- template --> /forgehand go"),
        vec![Addressed::Command(Command::Go)]
    );
}

// --- whole comments ---

#[test]
fn several_commands_come_back_in_order() {
    let body = "/forgehand stop\nLooks wrong.\n\n@forgehand plan smaller steps\n/forgehand go";
    assert_eq!(
        parse(body),
        vec![
            Addressed::Command(Command::Stop),
            Addressed::Command(Command::Plan {
                instructions: Some("smaller steps".into())
            }),
            Addressed::Command(Command::Go)
        ]
    );
}

#[test]
fn a_comment_without_commands_gives_nothing() {
    assert_eq!(parse("LGTM, thanks!"), vec![]);
    assert_eq!(parse(""), vec![]);
}

#[test]
fn windows_line_endings_are_understood() {
    let body = "Hi\r\n/forgehand fix\r\nmind the tests\r\n\r\n/forgehand retry\r\n";
    assert_eq!(
        parse(body),
        vec![fix("mind the tests"), Addressed::Command(Command::Retry)]
    );
}

#[test]
fn a_bot_with_another_name_answers_to_both_slashes_and_its_own_mention() {
    let body = "/acme-bot retry\n/forgehand stop\n@Acme-Bot go\n@forgehand fix";
    assert_eq!(
        parse_comment(body, "acme-bot").unwrap(),
        vec![
            Addressed::Command(Command::Retry),
            Addressed::Command(Command::Stop),
            Addressed::Command(Command::Go)
        ]
    );
}

#[test]
fn a_github_app_username_is_mentioned_without_its_bot_suffix() {
    let body = "@forgehand fix\n@forgehand[bot] retry\n/forgehand go";
    assert_eq!(
        parse_comment(body, "forgehand[bot]").unwrap(),
        vec![
            Addressed::Command(Command::Fix { instructions: None }),
            Addressed::Command(Command::Retry),
            Addressed::Command(Command::Go)
        ]
    );
}

#[test]
fn commands_have_names_for_logs() {
    assert_eq!(request("x").name(), "request");
    assert_eq!(fix("x").name(), "fix");
    assert_eq!(Addressed::Command(Command::Retry).name(), "retry");
}

#[test]
fn help_text_lists_every_command_and_the_bots_name() {
    let help = help_text("acme-bot[bot]");
    for sub in Subcommand::ALL {
        assert!(
            help.contains(&format!("`/forgehand {}", sub.name())),
            "{help}"
        );
    }
    assert!(
        help.contains("`/acme-bot` works as well as `/forgehand`"),
        "{help}"
    );
    assert!(
        help.contains("`@acme-bot fix the flaky login test`"),
        "{help}"
    );
    assert!(!help_text("forgehand").contains("works as well as"));
}

#[test]
fn a_maintainer_allows_sensitive_changes() {
    assert_eq!(
        parse("/forgehand allow-sensitive"),
        vec![Addressed::Command(Command::AllowSensitive)]
    );
    assert_eq!(
        parse("Looks right to me.\n@forgehand Allow-Sensitive"),
        vec![Addressed::Command(Command::AllowSensitive)]
    );
    assert_eq!(
        Addressed::Command(Command::AllowSensitive).name(),
        "allow-sensitive"
    );
    let error = parse_comment("/forgehand allow-sensitve", "forgehand").unwrap_err();
    assert!(
        error.to_string().contains("allow-sensitive"),
        "a near miss suggests the command: {error}"
    );
}
