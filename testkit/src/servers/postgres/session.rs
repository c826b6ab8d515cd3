//! The harness's own sessions on a server (`connect`, `execute`) and copies of its data
//! directory (`save_data`, `restore_data`).

use std::fs;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use tokio_postgres::{Client, Config, NoTls, SimpleQueryMessage};

use super::*;

impl PgServer {
    /// A new session as `postgres`, its connection driven by a task spawned on the current tokio
    /// runtime (it ends when the client is dropped). Over TCP without TLS; over the Unix socket
    /// for a server started with TLS ([`PgOptions::tls`]), which may refuse TCP without it.
    ///
    /// # Errors
    ///
    /// If the server refuses or fails the connection (down, starting up, in recovery).
    ///
    /// # Panics
    ///
    /// If the server does not answer within 30 s (it is paused: bound the call more tightly with
    /// `tokio::time::timeout` to see that).
    pub async fn connect(&self) -> Result<Client, tokio_postgres::Error> {
        let (client, connection) =
            match tokio::time::timeout(QUERY_TIMEOUT, self.admin_config().connect(NoTls)).await {
                Ok(connected) => connected?,
                Err(_) => panic!(
                    "{} did not accept a connection within {QUERY_TIMEOUT:?}\n{}",
                    self.describe(),
                    self.log_tail()
                ),
            };
        tokio::spawn(async move {
            // Its error reaches the client's next call, which is where a test looks.
            let _ = connection.await;
        });
        Ok(client)
    }

    /// Runs `sql` (one or more statements, `;`-separated) on a session of its own with the
    /// simple query protocol, and returns the rows of all statements, each value as text (`None`
    /// for NULL): `execute("SELECT 1")` gives `[[Some("1")]]`.
    ///
    /// # Errors
    ///
    /// If the connection fails or a statement fails (then the statements before it in a
    /// multi-statement `sql` are rolled back, as one implicit transaction).
    ///
    /// # Panics
    ///
    /// If the server does not answer within 30 s (see [`connect`](Self::connect)).
    pub async fn execute(
        &self,
        sql: &str,
    ) -> Result<Vec<Vec<Option<String>>>, tokio_postgres::Error> {
        let client = self.connect().await?;
        let messages = match tokio::time::timeout(QUERY_TIMEOUT, client.simple_query(sql)).await {
            Ok(messages) => messages?,
            Err(_) => panic!(
                "{} did not answer `{sql}` within {QUERY_TIMEOUT:?}\n{}",
                self.describe(),
                self.log_tail()
            ),
        };
        Ok(messages
            .iter()
            .filter_map(|message| match message {
                SimpleQueryMessage::Row(row) => Some(
                    (0..row.len())
                        .map(|i| row.get(i).map(str::to_owned))
                        .collect(),
                ),
                _ => None,
            })
            .collect())
    }

    /// Copies the stopped server's cluster (`data/`) to `<dir>/<name>`, owner and modes kept, as
    /// an operator's file-level backup would; [`restore_data`](Self::restore_data) puts it back.
    ///
    /// # Panics
    ///
    /// If the server runs (stop it first: a copy of a running cluster is not consistent), or
    /// the copy fails.
    pub fn save_data(&self, name: &str) -> PathBuf {
        assert!(
            self.pid().is_none(),
            "{}: stop the server before saving its data",
            self.describe()
        );
        let saved = self.dir().join(name);
        let _ = fs::remove_dir_all(&saved);
        copy_tree(&self.data_dir(), &saved);
        saved
    }

    /// Replaces the stopped server's cluster with a copy [`save_data`](Self::save_data) made:
    /// everything committed since the copy is gone, as after restoring an older backup (or
    /// promoting a standby that had not received it). Start it again with
    /// [`start_again`](Self::start_again).
    ///
    /// # Panics
    ///
    /// If the server runs, or the copy fails.
    pub fn restore_data(&self, saved: &Path) {
        assert!(
            self.pid().is_none(),
            "{}: stop the server before restoring its data",
            self.describe()
        );
        let data = self.data_dir();
        fs::remove_dir_all(&data)
            .unwrap_or_else(|e| panic!("cannot remove {}: {e}", data.display()));
        copy_tree(saved, &data);
    }

    pub(super) fn describe(&self) -> &str {
        self.process.label()
    }

    /// Where the harness's own sessions connect: TCP without TLS, or the Unix socket of a
    /// server started with TLS.
    pub(super) fn admin_config(&self) -> Config {
        let mut config = Config::new();
        config.user("postgres").dbname("postgres").port(self.port);
        match self.options.tls {
            Some(_) => config.host_path(self.dir()),
            None => config.host(Ipv4Addr::LOCALHOST.to_string()),
        };
        config
    }
}
