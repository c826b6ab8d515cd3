//! Bounded one-off commands for the cluster and sentinel harnesses, which need replies (arrays,
//! integers) that the minimal RESP probe does not parse, and must not panic while a node is down.

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use redis::FromRedisValue;

/// How long one probe (connect and one command) may take.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// How often a wait re-checks its condition.
const POLL: Duration = Duration::from_millis(50);

/// Sends `cmd` to `addr` on a connection of its own, within [`PROBE_TIMEOUT`]; the error says why
/// not.
pub(crate) async fn query<T: FromRedisValue>(
    addr: SocketAddr,
    cmd: &redis::Cmd,
) -> Result<T, String> {
    let exchange = async {
        let client = redis::Client::open(format!("redis://{addr}")).map_err(|e| e.to_string())?;
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        cmd.query_async::<T>(&mut conn)
            .await
            .map_err(|e| e.to_string())
    };
    match tokio::time::timeout(PROBE_TIMEOUT, exchange).await {
        Ok(result) => result,
        Err(_) => Err(format!("no answer within {PROBE_TIMEOUT:?}")),
    }
}

/// Polls `check` until it returns `Ok`, for at most `within`; otherwise the last `Err`, which
/// says what was still missing.
pub(crate) async fn wait_until<T, F, Fut>(within: Duration, mut check: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + within;
    loop {
        let last = match check().await {
            Ok(value) => return Ok(value),
            Err(why) => why,
        };
        if Instant::now() >= deadline {
            return Err(last);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Polls `check` until it returns `true`.
///
/// # Panics
///
/// When it still returns `false` after `within`, naming `what` did not happen.
pub async fn eventually<F, Fut>(what: &str, within: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let found = wait_until(within, || {
        let check = check();
        async move {
            if check.await {
                Ok(())
            } else {
                Err(String::new())
            }
        }
    })
    .await;
    if found.is_err() {
        panic!("{what}: not within {within:?}");
    }
}

/// The value of `name` in an `INFO` reply.
pub(crate) fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim())
}
