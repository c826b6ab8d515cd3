//! The harness's own sessions on a server (`connect`, `execute`), and the database and
//! least-privilege user every server is made with.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder, Row, Value};

use super::*;

impl MysqlServer {
    /// A new session as `root` over the server's Unix socket (which needs no TLS, also on a
    /// server started with [`MysqlOptions::tls_only`]), in [`MYSQL_DATABASE`].
    ///
    /// # Errors
    ///
    /// If the server refuses or fails the connection (down, starting up).
    ///
    /// # Panics
    ///
    /// If the server does not answer within 30 s (it is paused: bound the call more tightly with
    /// `tokio::time::timeout` to see that).
    pub async fn connect(&self) -> Result<Conn, mysql_async::Error> {
        self.connect_with(self.admin_opts().db_name(Some(MYSQL_DATABASE)))
            .await
    }

    /// A new session as [`MYSQL_USER`] over TCP, as a lock store's own sessions are (no TLS), in
    /// [`MYSQL_DATABASE`].
    ///
    /// # Errors
    ///
    /// If the server refuses or fails the connection.
    ///
    /// # Panics
    ///
    /// If the server does not answer within 30 s.
    pub async fn connect_as_user(&self) -> Result<Conn, mysql_async::Error> {
        let opts = OptsBuilder::default()
            .ip_or_hostname(Ipv4Addr::LOCALHOST.to_string())
            .tcp_port(self.port)
            .user(Some(MYSQL_USER))
            .pass(Some(MYSQL_PASSWORD))
            .db_name(Some(MYSQL_DATABASE))
            .prefer_socket(false);
        self.connect_with(opts).await
    }

    async fn connect_with(&self, opts: OptsBuilder) -> Result<Conn, mysql_async::Error> {
        match tokio::time::timeout(QUERY_TIMEOUT, Conn::new(opts)).await {
            Ok(connected) => connected,
            Err(_) => panic!(
                "{} did not accept a connection within {QUERY_TIMEOUT:?}\n{}",
                self.describe(),
                self.log_tail()
            ),
        }
    }

    /// Runs `sql` (one or more statements, `;`-separated) as `root` in [`MYSQL_DATABASE`] on a session
    /// of its own, and returns the rows of all statements, each value as text (`None` for NULL):
    /// `execute("SELECT 1")` gives `[[Some("1")]]`.
    ///
    /// # Errors
    ///
    /// If the connection fails or a statement fails (the statements before it stay done: each
    /// commits on its own).
    ///
    /// # Panics
    ///
    /// If the server does not answer within 30 s (see [`connect`](Self::connect)).
    pub async fn execute(&self, sql: &str) -> Result<Vec<Vec<Option<String>>>, mysql_async::Error> {
        let mut conn = self.connect().await?;
        let rows = match tokio::time::timeout(QUERY_TIMEOUT, rows_of(&mut conn, sql)).await {
            Ok(rows) => rows?,
            Err(_) => panic!(
                "{} did not answer `{sql}` within {QUERY_TIMEOUT:?}\n{}",
                self.describe(),
                self.log_tail()
            ),
        };
        let _ = conn.disconnect().await;
        Ok(rows)
    }

    /// Where the harness's own sessions connect: `root` over the Unix socket.
    pub(super) fn admin_opts(&self) -> OptsBuilder {
        OptsBuilder::default()
            .socket(Some(self.socket_path().display().to_string()))
            .user(Some("root"))
    }

    /// Creates [`MYSQL_DATABASE`] and [`MYSQL_USER`] with [`MYSQL_GRANTS`] on it, from 127.0.0.1 (the engine's
    /// TCP connections) and `localhost` (the socket).
    ///
    /// # Panics
    ///
    /// If a statement fails.
    pub(super) async fn create_database_and_user(&self) {
        let mut sql = format!("CREATE DATABASE IF NOT EXISTS {MYSQL_DATABASE};");
        for host in ["127.0.0.1", "localhost"] {
            sql.push_str(&format!(
                "CREATE USER IF NOT EXISTS '{MYSQL_USER}'@'{host}' IDENTIFIED BY '{MYSQL_PASSWORD}';\
                 GRANT {MYSQL_GRANTS} ON {MYSQL_DATABASE}.* TO '{MYSQL_USER}'@'{host}';"
            ));
        }
        let made = async {
            let mut conn = self.connect_with(self.admin_opts()).await?;
            rows_of(&mut conn, &sql).await?;
            conn.disconnect().await
        };
        if let Err(e) = made.await {
            panic!(
                "cannot create the database and user on {}: {e}\n{}",
                self.describe(),
                self.log_tail()
            );
        }
    }

    /// Runs `during` with the server's log of every statement it receives on (the
    /// `mysql.general_log` table, cleared first), and returns what it logged in that time of
    /// the statements whose text starts with `like` (an SQL `LIKE` pattern without its
    /// trailing `%`; `_` must be escaped), not those starting with `unlike` (when given): each
    /// executed statement as the server logged it, a prepared one with its parameters (its
    /// preparation is left out).
    ///
    /// # Panics
    ///
    /// If a statement about the log fails.
    pub async fn statements_logged<F: std::future::Future<Output = ()>>(
        &self,
        like: &str,
        unlike: Option<&str>,
        during: F,
    ) -> Vec<String> {
        self.execute(
            "SET GLOBAL log_output = 'TABLE'; SET GLOBAL general_log = 'ON'; \
             TRUNCATE TABLE mysql.general_log",
        )
        .await
        .expect("the statement log on");
        during.await;
        let unlike = unlike.map_or(String::new(), |u| {
            format!("AND CAST(argument AS CHAR) NOT LIKE '{u}%'")
        });
        let logged = self
            .execute(&format!(
                "SELECT CAST(argument AS CHAR) FROM mysql.general_log \
                 WHERE command_type <> 'Prepare' AND CAST(argument AS CHAR) LIKE '{like}%' \
                 {unlike} ORDER BY event_time"
            ))
            .await
            .expect("the log");
        self.execute("SET GLOBAL general_log = 'OFF'")
            .await
            .expect("the statement log off");
        logged.into_iter().flatten().flatten().collect()
    }
}

/// The rows of every statement of `sql` (the text protocol), each value as text.
pub(super) async fn rows_of(
    conn: &mut Conn,
    sql: &str,
) -> Result<Vec<Vec<Option<String>>>, mysql_async::Error> {
    let mut result = conn.query_iter(sql).await?;
    let mut rows = Vec::new();
    while !result.is_empty() {
        let set: Vec<Row> = result.collect().await?;
        rows.extend(
            set.into_iter()
                .map(|row| row.unwrap().into_iter().map(text).collect()),
        );
    }
    Ok(rows)
}

/// A value as the text protocol gives it (`None` for NULL).
fn text(value: Value) -> Option<String> {
    match value {
        Value::NULL => None,
        Value::Bytes(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
        Value::Int(v) => Some(v.to_string()),
        Value::UInt(v) => Some(v.to_string()),
        Value::Float(v) => Some(v.to_string()),
        Value::Double(v) => Some(v.to_string()),
        other => Some(other.as_sql(true).trim_matches('\'').to_owned()),
    }
}
