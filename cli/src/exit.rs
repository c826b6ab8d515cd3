//! Exit statuses and [`Failure`], the one error type of the tool: a status and a message that
//! says what went wrong and what to do, printed as `error: ...` and never as a panic.

use std::process::ExitCode;

use leasehold::LockError;

use crate::display::redact_url;

/// Success; also `show` of a free lock and `list` with no match, which are answers.
pub(crate) const OK: u8 = 0;
/// `release` deleted nothing: no lock was held, or the confirmation was not given.
pub(crate) const NOTHING_DONE: u8 = 1;
/// A usage or configuration error: unknown command or option, a missing or bad value, an
/// invalid `--config` file or `LEASEHOLD_*` variable, `release` without `--force`.
pub(crate) const USAGE: u8 = 2;
/// The engine could not be used (Redis, ZooKeeper, etcd, PostgreSQL or MySQL): unreachable, too slow,
/// refused the credentials or a command, or its URL does not parse.
pub(crate) const ENGINE: u8 = 3;

/// How a command ended, when not with [`OK`]: an exit status and what to tell the operator.
#[derive(Debug)]
pub(crate) struct Failure {
    /// The exit status.
    pub(crate) code: u8,
    /// One or more lines, without the leading `error: `.
    pub(crate) message: String,
}

impl Failure {
    /// A usage or configuration error (status [`USAGE`]).
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Failure {
            code: USAGE,
            message: message.into(),
        }
    }

    /// A failure of the tool itself rather than of its input or of the engine (status
    /// [`ENGINE`], the closest: nothing could be asked).
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Failure {
            code: ENGINE,
            message: message.into(),
        }
    }

    /// Connecting to `url` failed: an unusable URL or an unreachable server (status
    /// [`ENGINE`]). The URL is shown without its password.
    pub(crate) fn connect(e: LockError, url: &str) -> Self {
        match e {
            LockError::Config { message, .. } => Failure {
                code: ENGINE,
                message: format!("cannot use the URL {:?}: {message}", redact_url(url)),
            },
            other => Failure::lock(other),
        }
    }

    /// A call on a connected locker failed.
    pub(crate) fn lock(e: LockError) -> Self {
        let code = match &e {
            LockError::InvalidKey { .. } | LockError::Config { .. } => USAGE,
            _ => ENGINE,
        };
        let message = match &e {
            LockError::Unavailable { message, .. } if message.to_lowercase().contains("noperm") => {
                format!(
                    "{message}\nThe Redis user lacks a permission this tool needs, or the \
                     prefix is outside its key patterns; see the ACL in the leasehold-cli \
                     README"
                )
            }
            LockError::Unavailable { message, source } => {
                unreachable_message(message, source.as_deref())
            }
            other => other.to_string(),
        };
        Failure { code, message }
    }

    /// Prints the message to stderr and gives the status to exit with.
    pub(crate) fn report(self) -> ExitCode {
        eprintln!("error: {}", self.message);
        ExitCode::from(self.code)
    }
}

/// How the runtime's messages name each engine: "<name> at <servers> <what happened>".
const ENGINE_NAMES: [&str; 5] = ["redis", "zookeeper", "etcd", "PostgreSQL", "MySQL"];

/// What the runtime says of servers it could not reach, after "<name> at <servers> ".
const UNREACHED: [&str; 3] = [
    "refused the connection",
    "could not be reached",
    "did not answer within",
];

/// Rephrases the runtime's "redis at HOST:PORT refused the connection" (or "PostgreSQL at
/// ... could not be reached: ...", and so on for every engine) as "cannot reach redis at
/// HOST:PORT: refused the connection", the form operators grep for; other messages (an
/// error answer, say) are kept as they are.
fn unreachable_message(
    message: &str,
    source: Option<&(dyn std::error::Error + Send + Sync)>,
) -> String {
    for name in ENGINE_NAMES {
        let Some(rest) = message
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(" at "))
        else {
            continue;
        };
        let found = UNREACHED
            .iter()
            .filter_map(|what| rest.find(&format!(" {what}")))
            .min();
        let Some(at) = found else {
            return message.to_owned();
        };
        let (servers, what) = (&rest[..at], &rest[at + 1..]);
        // Servers are named without ": "; text after one is an error answer's.
        if servers.contains(": ") {
            return message.to_owned();
        }
        return match source {
            // "could not be reached" alone does not say whether the name or the route is wrong.
            Some(cause) if what == "could not be reached" => {
                format!("cannot reach {name} at {servers}: {what} ({cause})")
            }
            _ => format!("cannot reach {name} at {servers}: {what}"),
        };
    }
    message.to_owned()
}

/// The engine and its servers, for messages, never with credentials: `redis 127.0.0.1:6379`
/// (`redis h:6380 (TLS)`, `redis /run/redis.sock`), `zookeeper h1:2181,h2:2181/chroot`,
/// `etcd h1:2379,h2:2379`, `postgres h:5432`, `mysql h:3306`.
pub(crate) fn endpoint(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("redis", url));
    if scheme == "zookeeper" {
        // Credentials go before the servers, TLS files after them: neither is shown.
        let servers = rest.rsplit_once('@').map_or(rest, |(_, servers)| servers);
        let servers = servers.split('?').next().unwrap_or(servers);
        return format!("zookeeper {servers}");
    }
    if scheme == "postgres" || scheme == "postgresql" {
        let authority = rest.split(['/', '?']).next().unwrap_or(rest);
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        return format!("postgres {host_port}");
    }
    if scheme == "mysql" || scheme == "mariadb" {
        let authority = rest.split(['/', '?']).next().unwrap_or(rest);
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        return format!("mysql {host_port}");
    }
    if scheme == "etcd" {
        // Each endpoint may carry its own scheme and credentials; only host:port is shown.
        let hosts: Vec<&str> = rest
            .split(',')
            .map(|e| e.split_once("://").map_or(e, |(_, hp)| hp))
            .map(|e| e.rsplit_once('@').map_or(e, |(_, hp)| hp))
            .collect();
        return format!("etcd {}", hosts.join(","));
    }
    if scheme.ends_with("unix") {
        return format!("redis {}", rest.split('?').next().unwrap_or(rest));
    }
    let authority = rest.split(['/', '?']).next().unwrap_or(rest);
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let has_port = match host_port.rsplit_once(':') {
        // An IPv6 literal without a port, `[::1]`, has colons inside its brackets.
        Some((_, port)) => !port.contains(']'),
        None => false,
    };
    let host_port = if has_port {
        host_port.to_owned()
    } else {
        format!("{host_port}:6379")
    };
    let host_port = host_port.replacen(['[', ']'], "", 2);
    if scheme == "rediss" {
        format!("redis {host_port} (TLS)")
    } else {
        format!("redis {host_port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_name_the_engine_and_its_servers_without_credentials() {
        assert_eq!(endpoint("redis://127.0.0.1:1"), "redis 127.0.0.1:1");
        assert_eq!(endpoint("redis://u:pw@cache:6380/2"), "redis cache:6380");
        assert_eq!(endpoint("redis://cache"), "redis cache:6379");
        assert_eq!(endpoint("rediss://cache:6380"), "redis cache:6380 (TLS)");
        assert_eq!(
            endpoint("redis+unix:///run/redis.sock"),
            "redis /run/redis.sock"
        );
        assert_eq!(
            endpoint("zookeeper://zk1:2181,zk2:2181"),
            "zookeeper zk1:2181,zk2:2181"
        );
        assert_eq!(
            endpoint("zookeeper://shop:s3cret@zk1:2181,zk2:2181/app?ca=/etc/ca.pem"),
            "zookeeper zk1:2181,zk2:2181/app"
        );
        assert_eq!(
            endpoint("etcd://e1:2379,http://root:s3cret@e2:2379,https://e3:2379"),
            "etcd e1:2379,e2:2379,e3:2379"
        );
        assert_eq!(
            endpoint("postgres://u:s3cret@127.0.0.1:55432/db?sslmode=disable"),
            "postgres 127.0.0.1:55432"
        );
        assert_eq!(
            endpoint("mysql://u:s3cret@127.0.0.1:3307/db?ssl-mode=REQUIRED"),
            "mysql 127.0.0.1:3307"
        );
        assert_eq!(
            endpoint("mariadb://u@db.internal/shop"),
            "mysql db.internal"
        );
    }

    #[test]
    fn refusals_read_as_cannot_reach() {
        let e = LockError::Unavailable {
            message: "redis at 127.0.0.1:1 refused the connection (is redis-server running \
                      there?)"
                .to_owned(),
            source: None,
        };
        let f = Failure::lock(e);
        assert_eq!(f.code, ENGINE);
        assert_eq!(
            f.message,
            "cannot reach redis at 127.0.0.1:1: refused the connection (is redis-server \
             running there?)"
        );
        let e = LockError::Unavailable {
            message: "redis at h:1 answered with an error: WRONGTYPE".to_owned(),
            source: None,
        };
        assert_eq!(
            Failure::lock(e).message,
            "redis at h:1 answered with an error: WRONGTYPE"
        );
        let e = LockError::Unavailable {
            message: "redis at h:1 answered with an error: NoPerm: no permissions".to_owned(),
            source: None,
        };
        let message = Failure::lock(e).message;
        assert!(message.starts_with("redis at h:1 answered with an error: NoPerm"));
        assert!(message.contains("see the ACL in the leasehold-cli README"));
    }

    #[test]
    fn every_engine_reads_as_cannot_reach_that_engine() {
        let unavailable = |message: &str| LockError::Unavailable {
            message: message.to_owned(),
            source: None,
        };
        let cases = [
            (
                "PostgreSQL at postgres://u:***@127.0.0.1:1/db could not be reached: error \
                 connecting to server",
                "cannot reach PostgreSQL at postgres://u:***@127.0.0.1:1/db: could not be \
                 reached: error connecting to server",
            ),
            (
                "etcd at http://e1:2379 did not answer within 2s",
                "cannot reach etcd at http://e1:2379: did not answer within 2s",
            ),
            (
                "zookeeper at zk1:2181/app (TLS) did not answer within 2s",
                "cannot reach zookeeper at zk1:2181/app (TLS): did not answer within 2s",
            ),
            (
                "redis at cache:6380 (TLS) did not answer within 1s",
                "cannot reach redis at cache:6380 (TLS): did not answer within 1s",
            ),
        ];
        for (message, expected) in cases {
            let f = Failure::lock(unavailable(message));
            assert_eq!(f.code, ENGINE);
            assert_eq!(f.message, expected);
        }
        // An answer that is not about reaching the server is kept as it is, even when its
        // text happens to contain such words.
        let refused = "etcd at http://e1:2379 refused a read: the peer could not be reached";
        assert_eq!(Failure::lock(unavailable(refused)).message, refused);
        let other = "a message of no engine";
        assert_eq!(Failure::lock(unavailable(other)).message, other);
    }

    #[test]
    fn unusable_urls_are_named_without_their_password() {
        let e = LockError::Config {
            message: "the etcd endpoints mix http:// and https://; use one for all".to_owned(),
            source: None,
        };
        let f = Failure::connect(
            e,
            "etcd://e1:2379,http://root:s3cret@e2:2379,https://e3:2379",
        );
        assert_eq!(f.code, ENGINE);
        assert!(
            f.message.starts_with("cannot use the URL \"etcd://"),
            "{}",
            f.message
        );
        assert!(!f.message.contains("s3cret"), "{}", f.message);
    }
}
