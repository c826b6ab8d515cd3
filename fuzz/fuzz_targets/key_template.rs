//! Fuzzes the key-template grammar (the `leasehold-template` crate, behind both
//! `#[distributed_lock(key = "...")]` and the route rules' key templates) with libFuzzer: it
//! never panics, every error points inside the template at character boundaries, and every
//! accepted template round-trips. The same properties run in the default test run as a
//! proptest (`tests/tests/integration/hostile/template.rs`).
#![no_main]

use leasehold_template::{parse, parse_recovering, Segment};
use libfuzzer_sys::fuzz_target;

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

fn shape(segments: &[Segment]) -> Vec<String> {
    segments
        .iter()
        .map(|s| match s {
            Segment::Literal(t) => format!("L{t}"),
            Segment::Placeholder(p) => format!("P{}", p.text()),
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Ok(template) = std::str::from_utf8(data) else {
        return;
    };
    let (recovered, recovered_errors) = parse_recovering(template);
    match parse(template) {
        Ok(segments) => {
            assert!(!template.is_empty());
            assert_eq!(recovered, segments);
            assert!(recovered_errors.is_empty());
            for pair in segments.windows(2) {
                assert!(!matches!(pair, [Segment::Literal(_), Segment::Literal(_)]));
            }
            for s in &segments {
                match s {
                    Segment::Literal(t) => assert!(!t.is_empty()),
                    Segment::Placeholder(p) => {
                        assert_eq!(template.get(p.span.clone()), Some(p.text().as_str()));
                    }
                }
            }
            let again = parse(&render(&segments)).expect("a rendered template parses");
            assert_eq!(shape(&again), shape(&segments));
        }
        Err(errors) => {
            assert!(!errors.is_empty());
            assert_eq!(recovered_errors, errors);
            assert!(errors.windows(2).all(|w| w[0].span.start <= w[1].span.start));
            for e in &errors {
                assert!(e.span.start <= e.span.end && e.span.end <= template.len());
                assert!(template.is_char_boundary(e.span.start));
                assert!(template.is_char_boundary(e.span.end));
                assert!(!e.to_string().is_empty());
            }
        }
    }
});
