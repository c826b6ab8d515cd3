//! Logical backups of a server's [`MYSQL_DATABASE`]: a dump made with `mariadb-dump` and restored
//! with the `mariadb` client, as an operator restores an older backup.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::servers::process;

use super::*;

/// How long a dump or a restore of a test's small database may take.
const DUMP_TIMEOUT: Duration = Duration::from_secs(60);

impl MysqlServer {
    /// Dumps [`MYSQL_DATABASE`] (tables, rows and stored routines, one consistent snapshot of a
    /// running server) to `<dir>/<name>.sql` with `mariadb-dump`, and returns its path;
    /// [`restore_dump`](Self::restore_dump) loads it back.
    ///
    /// # Panics
    ///
    /// If `mariadb-dump` cannot be run, fails, or takes more than 60 s.
    pub async fn dump(&self, name: &str) -> PathBuf {
        let path = self.dir().join(format!("{name}.sql"));
        let file = std::fs::File::create(&path)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
        let mut cmd = self.client("mariadb-dump");
        cmd.args([
            "--single-transaction",
            "--routines",
            "--skip-comments",
            "--databases",
            MYSQL_DATABASE,
        ])
        .stdout(file);
        self.run_client(cmd, "mariadb-dump").await;
        path
    }

    /// Replaces [`MYSQL_DATABASE`] with what the dump at `path` holds: the database is dropped and
    /// made again (the user's grants on it stay), then the dump is loaded, as after restoring an
    /// older backup. Everything committed since the dump is gone. The server keeps running;
    /// sessions of its clients stay open.
    ///
    /// # Panics
    ///
    /// If the database cannot be dropped, or the `mariadb` client fails or takes more than 60 s.
    pub async fn restore_dump(&self, path: &std::path::Path) {
        self.execute(&format!("DROP DATABASE {MYSQL_DATABASE}"))
            .await
            .unwrap_or_else(|e| panic!("cannot drop {MYSQL_DATABASE} on {}: {e}", self.describe()));
        let file = std::fs::File::open(path)
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
        let mut cmd = self.client("mariadb");
        cmd.stdin(file);
        self.run_client(cmd, "mariadb").await;
    }

    /// Runs `sql` with the `mariadb` command-line client as `root` in [`MYSQL_DATABASE`], as an
    /// operator applies a schema file (the client reads `DELIMITER` lines, which a driver's
    /// query does not).
    ///
    /// # Panics
    ///
    /// If the client cannot be run, a statement fails, or it takes more than 60 s.
    pub async fn apply_with_client(&self, sql: &str) {
        let path = self.dir().join("applied.sql");
        std::fs::write(&path, sql)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        let file = std::fs::File::open(&path)
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
        let mut cmd = self.client("mariadb");
        cmd.arg(format!("--database={MYSQL_DATABASE}")).stdin(file);
        self.run_client(cmd, "mariadb").await;
    }

    /// A client program of Debian's `mariadb-client` connecting as `root` over the socket.
    fn client(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.arg("--no-defaults")
            .arg(format!("--socket={}", self.socket_path().display()))
            .arg("--user=root")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .env("LC_ALL", "C");
        cmd
    }

    async fn run_client(&self, mut cmd: Command, program: &str) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", self.log_path().display()));
        cmd.stderr(log);
        let mut child = process::spawn(cmd, self.dir().to_owned()).unwrap_or_else(|e| {
            panic!(
                "cannot run {program} for {}: {e} (run scripts/ensure-mysql)",
                self.describe()
            )
        });
        let Some(status) = process::finish(&mut child, DUMP_TIMEOUT).await else {
            panic!(
                "{program} for {} did not finish within {DUMP_TIMEOUT:?}\n{}",
                self.describe(),
                self.log_tail()
            );
        };
        assert!(
            status.success(),
            "{program} for {} exited with {status}\n{}",
            self.describe(),
            self.log_tail()
        );
    }
}
