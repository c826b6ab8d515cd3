use super::*;

fn run(args: &[&str]) -> Result<Invocation, String> {
    match parse(args.iter().map(OsString::from)) {
        Ok(Parsed::Run(inv)) => Ok(inv),
        Ok(other) => Err(format!("not a run: {other:?}")),
        Err(e) => Err(e.message),
    }
}

#[test]
fn commands_and_their_arguments() {
    assert_eq!(
        run(&["list"]).unwrap().command,
        Command::List {
            pattern: "*".into()
        }
    );
    let inv = run(&["--url", "redis://h:1", "show", "order:1", "--prefix=shop"]).unwrap();
    assert_eq!(
        inv.command,
        Command::Show {
            key: "order:1".into()
        }
    );
    assert_eq!(inv.global.url.as_deref(), Some("redis://h:1"));
    assert_eq!(inv.global.prefix.as_deref(), Some("shop"));
    assert_eq!(
        run(&["release", "k", "--force", "-y"]).unwrap().command,
        Command::Release {
            key: "k".into(),
            yes: true
        }
    );
    assert_eq!(
        run(&["watch", "k", "--for", "1500ms", "--interval=50ms"])
            .unwrap()
            .command,
        Command::Watch {
            key: "k".into(),
            interval: Duration::from_millis(50),
            stop_after: Some(Duration::from_millis(1500)),
        }
    );
    assert_eq!(
        run(&["show", "--", "-odd"]).unwrap().command,
        Command::Show { key: "-odd".into() }
    );
    assert_eq!(
        run(&["semaphore", "partner-api"]).unwrap().command,
        Command::Semaphore {
            key: "partner-api".into()
        }
    );
    assert_eq!(
        run(&["--timeout", "500ms", "list"]).unwrap().global.timeout,
        Some(Duration::from_millis(500))
    );
}

#[test]
fn fences_and_the_offset_above_a_ceiling() {
    assert_eq!(
        run(&["fences"]).unwrap().command,
        Command::Fences { above: None }
    );
    assert_eq!(
        run(&["fences", "--above", "1790000000000000"])
            .unwrap()
            .command,
        Command::Fences {
            above: Some(1_790_000_000_000_000)
        }
    );
    let e = run(&["fences", "--above", "-3"]).unwrap_err();
    assert!(
        e.contains("--above") && e.contains("not a fence ceiling"),
        "{e}"
    );
    let e = run(&["show", "k", "--above", "3"]).unwrap_err();
    assert!(e.contains("has no option --above"), "{e}");
}

#[test]
fn top_and_its_options() {
    use crate::top::{Options, Sort, DEFAULT_INTERVAL};
    assert_eq!(
        run(&["top"]).unwrap().command,
        Command::Top(Options {
            pattern: "*".into(),
            interval: DEFAULT_INTERVAL,
            sort: Sort::Age,
            plain: false,
            count: None,
        })
    );
    let inv = run(&[
        "top",
        "stock:*",
        "--sort",
        "waiters",
        "--interval=250ms",
        "--plain",
        "--count",
        "3",
    ])
    .unwrap();
    assert_eq!(
        inv.command,
        Command::Top(Options {
            pattern: "stock:*".into(),
            interval: Duration::from_millis(250),
            sort: Sort::Waiters,
            plain: true,
            count: Some(3),
        })
    );
    let Command::Top(once) = run(&["top", "--once", "--sort=key"]).unwrap().command else {
        panic!("not top");
    };
    assert_eq!((once.count, once.sort), (Some(1), Sort::Key));
    let e = run(&["top", "--sort", "size"]).unwrap_err();
    assert!(e.contains("write age, waiters or key"), "{e}");
    let e = run(&["top", "--once", "--count", "2"]).unwrap_err();
    assert!(e.contains("--once or --count is given twice"), "{e}");
    let e = run(&["top", "--count", "x"]).unwrap_err();
    assert!(e.contains("--count \"x\" is not a number"), "{e}");
    let e = run(&["watch", "k", "--plain"]).unwrap_err();
    assert!(e.contains("`watch` has no option --plain"), "{e}");
}

#[test]
fn mistakes_say_what_would_be_right() {
    let e = run(&["release", "k"]).unwrap_err();
    assert!(e.contains("add --force"), "{e}");
    let e = run(&["frob"]).unwrap_err();
    assert!(e.contains("unknown command \"frob\""), "{e}");
    let e = run(&[]).unwrap_err();
    assert!(e.contains("no command"), "{e}");
    let e = run(&["show"]).unwrap_err();
    assert!(e.contains("needs the lock KEY"), "{e}");
    let e = run(&["show", "a", "b"]).unwrap_err();
    assert!(e.contains("one KEY, got 2"), "{e}");
    let e = run(&["list", "--force"]).unwrap_err();
    assert!(e.contains("`list` has no option --force"), "{e}");
    let e = run(&["list", "--bogus"]).unwrap_err();
    assert!(e.contains("unknown option --bogus"), "{e}");
    let e = run(&["watch", "k", "--for", "soon"]).unwrap_err();
    assert!(e.contains("--for \"soon\" is not a duration"), "{e}");
    let e = run(&["watch", "k", "--interval", "0s"]).unwrap_err();
    assert!(e.contains("more than zero"), "{e}");
    let e = run(&["list", "--url"]).unwrap_err();
    assert!(e.contains("--url needs a value"), "{e}");
    let e = run(&["--url", "a", "--url", "b", "list"]).unwrap_err();
    assert!(e.contains("twice"), "{e}");
}

#[test]
fn help_for_the_tool_and_each_command() {
    let help = |args: &[&str]| match parse(args.iter().map(OsString::from)) {
        Ok(Parsed::Help(text)) => text,
        other => panic!("{other:?}"),
    };
    assert_eq!(help(&["--help"]), HELP);
    assert_eq!(help(&["help"]), HELP);
    assert_eq!(help(&["release", "--help"]), RELEASE_HELP);
    assert_eq!(help(&["help", "watch"]), WATCH_HELP);
    assert_eq!(help(&["top", "-h"]), TOP_HELP);
    assert!(help(&["-h", "list"]).starts_with("leasehold list"));
    assert!(HELP.contains("Exit status:"));
}
