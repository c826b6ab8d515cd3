//! Lookup of binaries built into the same target directory as the running test, for tests that
//! run a server or demo as a child process.

use std::path::{Path, PathBuf};

/// The path of the binary (or example) `name` built with the same profile as the running test.
///
/// Uses `CARGO_BIN_EXE_<name>` when Cargo set it at run time (only for binaries of the test's own
/// package), and otherwise looks in `target/<profile>/` and `target/<profile>/examples/`, found
/// from the test executable's own path. Builds nothing: build the binary first.
///
/// ```no_run
/// let shop = leasehold_tests::harness::cargo_bin("shop");
/// let child = std::process::Command::new(shop).spawn();
/// # drop(child);
/// ```
///
/// # Panics
///
/// If no such binary has been built, with the command that would build it.
pub fn cargo_bin(name: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(format!("CARGO_BIN_EXE_{name}")) {
        return path.into();
    }
    let exe = std::env::current_exe()
        .unwrap_or_else(|e| panic!("cannot find the running test executable: {e}"));
    let profile_dir = profile_dir(&exe);
    let file = format!("{name}{}", std::env::consts::EXE_SUFFIX);
    let candidates = [
        profile_dir.join(&file),
        profile_dir.join("examples").join(&file),
    ];
    if let Some(found) = candidates.iter().find(|path| path.is_file()) {
        return found.clone();
    }
    panic!(
        "no binary `{name}` in {} nor {}: build it with the tests' profile first, e.g. \
         `cargo build -p leasehold-examples --bin {name}` (or `--example {name}`)",
        candidates[0].display(),
        candidates[1].display(),
    );
}

/// `target/<profile>` for an executable in it or in its `deps/` or `examples/`.
fn profile_dir(exe: &Path) -> PathBuf {
    let dir = exe.parent().unwrap_or(Path::new("."));
    match dir.file_name().and_then(|n| n.to_str()) {
        Some("deps" | "examples") => dir.parent().unwrap_or(dir).to_owned(),
        _ => dir.to_owned(),
    }
}
