//! Fuzzing the key-template grammar (the `leasehold-template` crate, behind both
//! `#[distributed_lock(key = ...)]` and the route rules' key templates) with arbitrary strings,
//! in the default test run: it never panics, every error points inside the template at
//! character boundaries, and every accepted template round-trips. The same properties run
//! under libFuzzer in `fuzz/` (see RELIABILITY.md).

use leasehold_template::{parse, parse_recovering, Segment};
use proptest::prelude::*;

/// Writes segments back as a template: `<` and `>` in literals doubled, placeholders as
/// written.
fn render(segments: &[Segment]) -> String {
    let mut out = String::new();
    for s in segments {
        match s {
            Segment::Literal(text) => out.push_str(&text.replace('<', "<<").replace('>', ">>")),
            Segment::Placeholder(p) => out.push_str(&p.text()),
        }
    }
    out
}

/// Spans are ignored when comparing segments of two different spellings.
fn shape(segments: &[Segment]) -> Vec<String> {
    segments
        .iter()
        .map(|s| match s {
            Segment::Literal(t) => format!("L{t}"),
            Segment::Placeholder(p) => format!("P{}", p.text()),
        })
        .collect()
}

fn check(template: &str) -> Result<(), TestCaseError> {
    let (recovered, recovered_errors) = parse_recovering(template);
    match parse(template) {
        Ok(segments) => {
            prop_assert!(!template.is_empty());
            for pair in segments.windows(2) {
                prop_assert!(
                    !matches!(pair, [Segment::Literal(_), Segment::Literal(_)]),
                    "adjacent literals are merged"
                );
            }
            for s in &segments {
                match s {
                    Segment::Literal(t) => prop_assert!(!t.is_empty()),
                    Segment::Placeholder(p) => {
                        let written = template.get(p.span.clone()).map(str::to_owned);
                        prop_assert_eq!(written, Some(p.text()));
                    }
                }
            }
            prop_assert_eq!(&recovered, &segments);
            prop_assert!(recovered_errors.is_empty());
            let again = parse(&render(&segments));
            prop_assert!(again.is_ok(), "a rendered template must parse: {again:?}");
            prop_assert_eq!(shape(&again.unwrap()), shape(&segments));
        }
        Err(errors) => {
            prop_assert!(!errors.is_empty());
            prop_assert_eq!(&recovered_errors, &errors);
            prop_assert!(errors
                .windows(2)
                .all(|w| w[0].span.start <= w[1].span.start));
            for e in &errors {
                prop_assert!(e.span.start <= e.span.end && e.span.end <= template.len());
                prop_assert!(template.is_char_boundary(e.span.start));
                prop_assert!(template.is_char_boundary(e.span.end));
                let message = e.to_string();
                prop_assert!(!message.is_empty());
            }
        }
    }
    Ok(())
}

/// Strings made mostly of the characters the grammar cares about.
fn grammar_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("<".to_owned()),
            Just(">".to_owned()),
            Just("<<".to_owned()),
            Just(">>".to_owned()),
            Just(".".to_owned()),
            Just("r#".to_owned()),
            Just("self".to_owned()),
            Just("0".to_owned()),
            Just("01".to_owned()),
            Just("99999999999".to_owned()),
            Just("_".to_owned()),
            Just("header".to_owned()),
            Just("-".to_owned()),
            Just("X-Tenant".to_owned()),
            Just("é".to_owned()),
            Just("🔒".to_owned()),
            Just("\u{0}".to_owned()),
            "[a-z]{1,3}",
            "[ :{}%]",
        ],
        0..24,
    )
    .prop_map(|parts| parts.concat())
}

/// `PROPTEST_CASES` if set (`scripts/reliability` raises it), else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(3000).max(3000)))]

    #[test]
    fn arbitrary_strings_never_panic(template in any::<String>()) {
        check(&template)?;
    }

    #[test]
    fn grammar_like_strings_never_panic_and_round_trip(template in grammar_soup()) {
        check(&template)?;
    }

    #[test]
    fn valid_templates_round_trip(
        parts in prop::collection::vec(
            prop_oneof![
                "[a-z:{}%<> é-]{1,6}".prop_map(|t| t.replace('<', "<<").replace('>', ">>")),
                "(r#)?([a-z]|_[a-z0-9])[a-z0-9_]{0,4}(\\.(([a-z]|_[a-z0-9])[a-z0-9_]{0,3}|[1-9][0-9]{0,2}|0)){0,3}"
                    .prop_filter("not a reserved raw identifier", |p| !p.starts_with("r#self"))
                    .prop_map(|p| format!("<{p}>")),
                // Header names: HTTP tokens after a `header` root.
                "header(\\.[A-Za-z0-9!#$%&'*+^_`|~-]{1,6}){1,2}".prop_map(|p| format!("<{p}>")),
            ],
            1..8,
        )
    ) {
        let template = parts.concat();
        let parsed = parse(&template);
        prop_assert!(parsed.is_ok(), "{template:?}: {parsed:?}");
        check(&template)?;
    }
}
