//! What the CLI's test binaries share: the binary, a command for it that cannot read the
//! test's own `LEASEHOLD_*` environment, and the bound on a whole test.

use std::future::Future;
use std::process::Command;
use std::time::Duration;

/// The `leasehold` binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_leasehold");

/// Removes every `LEASEHOLD_*` variable of this process's environment from `cmd`'s: the
/// tool reads them (and new ones come with new settings), so the test's own environment must
/// not leak in. Derived from the environment rather than listed, so that no list falls behind.
pub fn without_leasehold_env(cmd: &mut Command) -> &mut Command {
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("LEASEHOLD_") {
            cmd.env_remove(name);
        }
    }
    cmd
}

/// How a run of the tool ended.
#[derive(Debug)]
pub struct Output {
    /// Its exit status; `None` when a signal ended it.
    pub code: Option<i32>,
    /// What it printed on standard output.
    pub stdout: String,
    /// What it printed on standard error.
    pub stderr: String,
}

impl Output {
    /// Checks that the tool exited with `code` and did not panic.
    pub fn assert_code(&self, code: i32) -> &Self {
        assert_eq!(self.code, Some(code), "unexpected exit status: {self:#?}");
        assert!(
            !self.stderr.contains("panicked") && !self.stderr.contains("RUST_BACKTRACE"),
            "the tool panicked: {self:#?}"
        );
        self
    }
}

/// `leasehold ARGS`, without the test's `LEASEHOLD_*` environment.
pub fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    without_leasehold_env(&mut cmd);
    cmd
}

/// `test`, which must finish within `limit`.
pub async fn within<F: Future>(limit: Duration, test: F) -> F::Output {
    tokio::time::timeout(limit, test)
        .await
        .expect("the test finished within its time limit")
}
