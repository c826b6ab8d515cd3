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
/// Redis could not be used: unreachable, too slow, refused the credentials or a command, or
/// its URL does not parse.
pub(crate) const REDIS: u8 = 3;

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

    /// A failure of the tool itself rather than of its input or of Redis (status [`REDIS`],
    /// the closest: nothing could be asked).
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Failure {
            code: REDIS,
            message: message.into(),
        }
    }

    /// Connecting to `url` failed: an unusable URL or an unreachable server (status [`REDIS`]).
    /// The URL is shown without its password.
    pub(crate) fn connect(e: LockError, url: &str) -> Self {
        match e {
            LockError::Config { message, .. } => Failure {
                code: REDIS,
                message: format!("cannot use the redis URL {:?}: {message}", redact_url(url)),
            },
            other => Failure::lock(other, url),
        }
    }

    /// A call on a connected locker failed.
    pub(crate) fn lock(e: LockError, url: &str) -> Self {
        let code = match &e {
            LockError::InvalidKey { .. } | LockError::Config { .. } => USAGE,
            _ => REDIS,
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
                unreachable_message(message, &endpoint(url), source.as_deref())
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

/// Rephrases the runtime's "redis at HOST:PORT refused the connection" as "cannot reach redis
/// at HOST:PORT: refused the connection", the form operators grep for; other messages (an
/// error answer, say) are kept as they are.
fn unreachable_message(
    message: &str,
    endpoint: &str,
    source: Option<&(dyn std::error::Error + Send + Sync)>,
) -> String {
    let Some(what) = message.strip_prefix(&format!("redis at {endpoint} ")) else {
        return message.to_owned();
    };
    if what.starts_with("answered with an error") {
        return message.to_owned();
    }
    match source {
        // "could not be reached" alone does not say whether the name or the route is wrong.
        Some(cause) if what == "could not be reached" => {
            format!("cannot reach redis at {endpoint}: {what} ({cause})")
        }
        _ => format!("cannot reach redis at {endpoint}: {what}"),
    }
}

/// `host:port` (or the socket path) of a Redis URL, as the runtime names it in messages.
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
        return rest.split('?').next().unwrap_or(rest).to_owned();
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
        format!("{host_port} (TLS)")
    } else {
        host_port
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_host_and_port_without_credentials() {
        assert_eq!(endpoint("redis://127.0.0.1:1"), "127.0.0.1:1");
        assert_eq!(endpoint("redis://u:pw@cache:6380/2"), "cache:6380");
        assert_eq!(endpoint("redis://cache"), "cache:6379");
        assert_eq!(endpoint("rediss://cache:6380"), "cache:6380 (TLS)");
        assert_eq!(endpoint("redis+unix:///run/redis.sock"), "/run/redis.sock");
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
    }

    #[test]
    fn refusals_read_as_cannot_reach() {
        let e = LockError::Unavailable {
            message: "redis at 127.0.0.1:1 refused the connection (is redis-server running \
                      there?)"
                .to_owned(),
            source: None,
        };
        let f = Failure::lock(e, "redis://127.0.0.1:1");
        assert_eq!(f.code, REDIS);
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
            Failure::lock(e, "redis://h:1").message,
            "redis at h:1 answered with an error: WRONGTYPE"
        );
        let e = LockError::Unavailable {
            message: "redis at h:1 answered with an error: NoPerm: no permissions".to_owned(),
            source: None,
        };
        let message = Failure::lock(e, "redis://h:1").message;
        assert!(message.starts_with("redis at h:1 answered with an error: NoPerm"));
        assert!(message.contains("see the ACL in the leasehold-cli README"));
    }
}
