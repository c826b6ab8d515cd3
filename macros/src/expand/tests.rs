use super::*;

#[test]
fn edit_distances() {
    assert_eq!(edit_distance("idd", "id"), 1);
    assert_eq!(edit_distance("shop", "sohp"), 2);
    assert_eq!(edit_distance("", "ab"), 2);
}

#[test]
fn types_read_like_source() {
    let text = |s: &str| type_text(&syn::parse_str(s).unwrap());
    assert_eq!(text("Vec<(u8, &'a str)>"), "Vec<(u8, &'a str)>");
    assert_eq!(text("std::string::String"), "std::string::String");
    assert_eq!(
        text("Option < Box < dyn Error > >"),
        "Option<Box<dyn Error>>"
    );
}

fn expand_str(args: &str, item: &str) -> String {
    expand(args.parse().unwrap(), item.parse().unwrap()).to_string()
}

#[test]
fn errors_keep_the_function() {
    let out = expand_str("lease = \"0s\"", "fn buy(id: u64) {}");
    assert!(out.contains("compile_error"), "{out}");
    assert!(out.contains("fn buy"), "{out}");
    // missing key, zero lease, not async, not Result: all at once.
    assert_eq!(out.matches("compile_error").count(), 4, "{out}");
}

#[test]
fn unknown_placeholder_suggests() {
    let out = expand_str(
        "key = \"order:<idd>\"",
        "async fn buy(id: u64, shop: u8) -> Result<(), E> { Ok(()) }",
    );
    assert!(
        out.contains(
            "no parameter `idd` in `buy`; did you mean `<id>`? the key can use: `id`, `shop`"
        ),
        "{out}"
    );
}

#[test]
fn skip_tries_the_lock_and_returns_the_skipped_value() {
    let out = expand_str(
        "key = \"job\", on_busy = \"skip\", hold_at_least = \"30s\"",
        "async fn job() -> Result<Option<u8>, E> { Ok(Some(1)) }",
    );
    assert!(out.contains("try_acquire"), "{out}");
    assert!(out.contains("Skipped :: skipped ()"), "{out}");
    assert!(out.contains("hold_at_least"), "{out}");
    let out = expand_str(
        "key = \"job\", on_busy = \"wait\"",
        "async fn job() -> Result<u8, E> { Ok(1) }",
    );
    assert!(!out.contains("try_acquire"), "{out}");
}

#[test]
fn unfenced_locks_take_no_token() {
    let item = "async fn job() -> Result<(), E> { Ok(()) }";
    let out = expand_str("key = \"job\", fencing = false, guard = g", item);
    assert!(
        out.contains("__private :: acquire :: < :: leasehold :: UnfencedGuard > ("),
        "{out}"
    );
    assert!(
        out.contains("let g : & :: leasehold :: UnfencedGuard"),
        "{out}"
    );
    assert!(!out.contains("LockGuard"), "{out}");
    let out = expand_str("key = \"job\", fencing = false, on_busy = \"skip\"", item);
    assert!(
        out.contains("__private :: try_acquire :: < :: leasehold :: UnfencedGuard > ("),
        "{out}"
    );
    // `true` is the default: the same fenced lock as without it.
    let out = expand_str("key = \"job\", fencing = true, guard = g", item);
    assert!(
        out.contains("__private :: acquire :: < :: leasehold :: LockGuard > ("),
        "{out}"
    );
    assert!(!out.contains("Unfenced"), "{out}");
    assert!(out.contains("let g : & :: leasehold :: LockGuard"), "{out}");
    assert_eq!(out, expand_str("key = \"job\", guard = g", item));
}

#[test]
fn reads_refuse_fair() {
    let item = "async fn show() -> Result<(), E> { Ok(()) }";
    let out = expand_str("key = \"a\", mode = \"read\", fair = true", item);
    assert!(
        out.contains("`mode = \\\"read\\\"` cannot be combined with `fair = true`"),
        "{out}"
    );
    assert_eq!(out.matches("compile_error").count(), 1, "{out}");
    for args in [
        "key = \"a\", mode = \"read\", fair = false",
        "key = \"a\", mode = \"write\", fair = true",
    ] {
        assert!(!expand_str(args, item).contains("compile_error"), "{args}");
    }
}

#[test]
fn unfenced_locks_refuse_keys_permits_and_reads() {
    let item = "async fn job() -> Result<(), E> { Ok(()) }";
    for (args, message) in [
        (
            "keys = [\"a\", \"b\"], fencing = false",
            "`fencing = false` cannot be combined with `keys`",
        ),
        (
            "key = \"a\", permits = 4, fencing = false",
            "`fencing = false` cannot be combined with `permits`",
        ),
        (
            "key = \"a\", mode = \"read\", fencing = false",
            "`fencing = false` cannot be combined with `mode = \\\"read\\\"`",
        ),
        (
            "key = \"a\", fencing = \"no\"",
            "`fencing` takes `true` or `false`, without quotes",
        ),
        (
            "key = \"a\", fencing = false, fencing = false",
            "`fencing` is given twice",
        ),
    ] {
        let out = expand_str(args, item);
        assert!(out.contains(message), "{message} not in {out}");
        assert_eq!(out.matches("compile_error").count(), 1, "{args}: {out}");
    }
    // The fenced default goes with all three.
    for args in [
        "keys = [\"a\", \"b\"], fencing = true",
        "key = \"a\", permits = 4, fencing = true",
        "key = \"a\", mode = \"read\", fencing = true",
        "key = \"a\", mode = \"write\", fencing = false",
    ] {
        let out = expand_str(args, item);
        assert!(!out.contains("compile_error"), "{args}: {out}");
    }
}

#[test]
fn job_options_conflicts_are_all_reported() {
    let out = expand_str(
        "key = \"job\", on_busy = \"skip\", wait = \"1s\", hold_at_most = \"1m\", \
         lease = \"5s\", hold_at_least = \"2m\"",
        "async fn job() -> Result<u8, E> { Ok(1) }",
    );
    for message in [
        "`on_busy = \\\"skip\\\"` never waits",
        "`hold_at_most` is the job's lease, never renewed, so `lease` cannot be given",
        "is longer than `hold_at_most",
        "so `u8` cannot be its `Ok` value: write `Result<Option<u8>, E>`",
    ] {
        assert!(out.contains(message), "{message} not in {out}");
    }
    assert_eq!(out.matches("compile_error").count(), 4, "{out}");
}

#[test]
fn hold_at_most_is_a_lease_without_watchdog() {
    let out = expand_str(
        "key = \"job\", hold_at_most = \"10m\"",
        "async fn job() -> Result<(), E> { Ok(()) }",
    );
    assert!(out.contains("Duration :: new (600u64"), "{out}");
    assert!(
        out.contains("watchdog : :: core :: option :: Option :: Some (false)"),
        "{out}"
    );
}

#[test]
fn key_escapes_braces() {
    let out = expand_str(
        "key = \"{a}:<id>\"",
        "async fn buy(id: u64) -> Result<(), E> { Ok(()) }",
    );
    assert!(out.contains("\"{{a}}:{}\""), "{out}");
    let out = expand_str(
        "key = \"{a}\"",
        "async fn buy() -> Result<(), E> { Ok(()) }",
    );
    assert!(out.contains("String :: from (\"{a}\")"), "{out}");
}
