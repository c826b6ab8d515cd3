//! Redis's own counters (CPU, commands, script calls), read with `INFO` over a connection of
//! its own: what the held-locks workers and `--profile` report per renewal and per cycle.

/// Redis's CPU and command counters, read with `INFO cpu stats commandstats` on a connection
/// of its own.
pub(crate) struct Info {
    conn: redis::aio::MultiplexedConnection,
}

impl Info {
    pub(crate) async fn connect(url: &str) -> Info {
        let client = redis::Client::open(url).expect("url");
        Info {
            conn: client
                .get_multiplexed_async_connection()
                .await
                .expect("connect"),
        }
    }

    /// `(used_cpu_sys + used_cpu_user in seconds, total_commands_processed, script calls)`,
    /// in one command.
    pub(crate) async fn read(&mut self) -> (f64, u64, u64) {
        let text: String = redis::cmd("INFO")
            .arg("cpu")
            .arg("stats")
            .arg("commandstats")
            .query_async(&mut self.conn)
            .await
            .expect("INFO");
        let field = |name: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("no {name} in INFO"))
        };
        // `cmdstat_evalsha:calls=N,usec=...`; absent when never called.
        let calls = |name: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(":calls="))
                .and_then(|v| v.split(',').next()?.parse().ok())
                .unwrap_or(0)
        };
        (
            field("used_cpu_sys") + field("used_cpu_user"),
            field("total_commands_processed") as u64,
            calls("cmdstat_evalsha") + calls("cmdstat_eval"),
        )
    }
}
