//! What a server runs with: the binaries found, the unprivileged user they run as, and the
//! directories and copies it owns.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::servers::server;

use super::*;

/// A uid and gid to run the server as.
#[derive(Clone, Copy, Debug)]
pub(super) struct User {
    pub(super) uid: u32,
    pub(super) gid: u32,
}

/// Where `initdb` and `postgres` are.
#[derive(Debug)]
pub(super) struct Binaries {
    pub(super) initdb: PathBuf,
    pub(super) postgres: PathBuf,
}

/// Finds `initdb` and `postgres` once per test binary.
///
/// # Panics
///
/// If they cannot be found, saying where they were looked for.
pub(super) fn binaries() -> &'static Binaries {
    static BINARIES: OnceLock<Result<Binaries, String>> = OnceLock::new();
    match BINARIES.get_or_init(find_binaries) {
        Ok(binaries) => binaries,
        Err(why) => panic!("{why}"),
    }
}

/// `$LEASEHOLD_PG_BIN`, else `PATH`, else the highest major version under `/usr/lib/postgresql`.
pub(super) fn find_binaries() -> Result<Binaries, String> {
    let in_dir = |dir: &Path| {
        let binaries = Binaries {
            initdb: dir.join("initdb"),
            postgres: dir.join("postgres"),
        };
        (binaries.initdb.is_file() && binaries.postgres.is_file()).then_some(binaries)
    };
    if let Some(dir) = std::env::var_os(BIN_VAR) {
        return in_dir(Path::new(&dir)).ok_or_else(|| {
            format!(
                "{BIN_VAR}={} holds no initdb and postgres (it names their directory, such as \
                 {DEBIAN_LIB}/15/bin)",
                Path::new(&dir).display()
            )
        });
    }
    let on_path = |name: &str| {
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|dir| dir.join(name))
            .find(|path| path.is_file())
    };
    if let (Some(initdb), Some(postgres)) = (on_path("initdb"), on_path("postgres")) {
        return Ok(Binaries { initdb, postgres });
    }
    let mut versions: Vec<(Vec<u32>, PathBuf)> = fs::read_dir(DEBIAN_LIB)
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            let entry = entry.ok()?;
            // "15", or "9.6" before PostgreSQL 10.
            let version = entry
                .file_name()
                .to_str()?
                .split('.')
                .map(|part| part.parse().ok())
                .collect::<Option<Vec<u32>>>()?;
            Some((version, entry.path().join("bin")))
        })
        .collect();
    versions.sort();
    versions
        .iter()
        .rev()
        .find_map(|(_, dir)| in_dir(dir))
        .ok_or_else(|| {
            format!(
                "no initdb and postgres in {BIN_VAR}, on PATH, or in {DEBIAN_LIB}/*/bin: run \
                 scripts/ensure-postgres, or name their directory in {BIN_VAR}"
            )
        })
}

/// The user to run the server as: `nobody` when the test binary is root, whom PostgreSQL
/// refuses; `None` (the binary's own user) otherwise.
pub(super) fn unprivileged_user() -> Option<User> {
    // SAFETY: a plain syscall.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    static NOBODY: OnceLock<User> = OnceLock::new();
    Some(*NOBODY.get_or_init(|| {
        look_up_user(c"nobody").unwrap_or(User {
            uid: 65534,
            gid: 65534,
        })
    }))
}

/// The uid and primary gid of `name` in the user database.
pub(super) fn look_up_user(name: &std::ffi::CStr) -> Option<User> {
    // SAFETY: `passwd` is plain data (integers and pointers), for which all zeroes is valid.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call, `buf` for `buf.len()` bytes; the reentrant
    // variant writes only into `entry` and `buf`.
    let rc = unsafe {
        libc::getpwnam_r(
            name.as_ptr(),
            &mut entry,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        )
    };
    (rc == 0 && !found.is_null()).then_some(User {
        uid: entry.pw_uid,
        gid: entry.pw_gid,
    })
}

/// A new, empty directory for one server under the system's temporary directory, owned by the
/// server's user.
///
/// # Panics
///
/// If it cannot be made, or no temporary directory is reachable by that user.
pub(super) fn fresh_dir(run_as: Option<User>) -> PathBuf {
    let dir = server::fresh_dir(&base_dir(run_as), "pg");
    if let Some(user) = run_as {
        std::os::unix::fs::chown(&dir, Some(user.uid), Some(user.gid))
            .unwrap_or_else(|e| panic!("cannot give {} to uid {}: {e}", dir.display(), user.uid));
    }
    dir
}

/// The system's temporary directory, or `/tmp` when the server runs as another user who could
/// not reach the former (a `TMPDIR` under `/root`).
pub(super) fn base_dir(run_as: Option<User>) -> PathBuf {
    let tmp = std::env::temp_dir();
    if run_as.is_none() || traversable(&tmp) {
        return tmp;
    }
    let fallback = PathBuf::from("/tmp");
    if traversable(&fallback) {
        return fallback;
    }
    panic!(
        "neither {} nor /tmp can be entered by other users, and postgres runs as uid {}: set \
         TMPDIR to a directory whose every parent is world-executable",
        tmp.display(),
        run_as.map_or(0, |user| user.uid)
    );
}

/// Whether any user may enter `dir` and every directory above it.
pub(super) fn traversable(dir: &Path) -> bool {
    dir.ancestors().all(|d| {
        fs::metadata(d).is_ok_and(|meta| meta.is_dir() && meta.permissions().mode() & 0o001 != 0)
    })
}

/// Copies the directory `from` to `to` (which must not exist) with `cp -a`, which keeps owners
/// and modes: the server refuses a data directory that is not its user's with mode 0700.
pub(super) fn copy_tree(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap_or_else(|e| panic!("cannot run cp: {e}"));
    assert!(
        status.success(),
        "cp -a {} {} failed: {status}",
        from.display(),
        to.display()
    );
}
