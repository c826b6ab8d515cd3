//! The command line: seven subcommands and a handful of options, parsed by hand (options may
//! come before or after the subcommand; `--` ends them), and the help texts.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::exit;
use crate::top::Sort;

/// `leasehold --help`.
pub(crate) const HELP: &str = "\
leasehold: inspect and manage the locks that leasehold applications hold in Redis,
ZooKeeper, etcd, PostgreSQL or MySQL

Usage: leasehold [OPTIONS] <COMMAND>

Commands:
  list [PATTERN]         held locks whose keys match PATTERN (* and ?; default *)
  show KEY               one lock: held or free, remaining lease, last fence, waiters,
                         processes queued
  release KEY --force    delete a lock whoever holds it (asks to confirm, unless --yes)
  semaphore KEY          a semaphore's holders: limit, permits in use, each holder's
                         permits and remaining lease
  watch KEY              print acquisitions and releases of a lock as they happen
  top [PATTERN]          a live view of the held locks: holder, age, lease, fence,
                         waiters, acquisitions per second; the engine's health and round trip
  fences [--above N]     the fence ceiling: above every fence handed out so far; with
                         --above, the fence_offset that puts this deployment's fences
                         above another's ceiling N (for moving locks between engines)
  help [COMMAND]         this text, or a command's

Options (before or after the command):
      --url URL        where the locks are: a Redis server as redis://host:port, a
                       ZooKeeper ensemble as zookeeper://host:port,host:port, an etcd
                       cluster as etcd://host:port,host:port, a PostgreSQL database as
                       postgres://user:password@host:port/db, or a MySQL (MariaDB)
                       database as mysql://user:password@host:port/db
                       [env: LEASEHOLD_URL]
                       [default: redis://127.0.0.1:6379]
      --prefix PREFIX  the key prefix the applications use [env: LEASEHOLD_PREFIX]
                       [default: leasehold]
      --config FILE    a leasehold TOML config (leasehold::LockConfig): its url (or
                       zookeeper, etcd, postgres or mysql; redlock, cluster or [sentinel] are
                       refused: give one server's --url),
                       prefix, op_timeout, connect_timeout, fence_offset; the environment
                       and options win
      --timeout DUR    bound on connecting and on each call to the engine, e.g. 500ms
                       [env: LEASEHOLD_OP_TIMEOUT] [default: 2s]
  -h, --help           print help (`leasehold COMMAND --help` for a command's)
  -V, --version        print the version

Exit status:
  0  done; also `show` of a free lock and `list` with no match, and `top` when quit
  1  `release` deleted nothing: no lock held, no confirmation, or it changed hands
  2  usage or configuration error: unknown command or option, missing or bad value,
     invalid --config file or LEASEHOLD_* variable, `release` without --force
  3  the engine unreachable or too slow, credentials or a command refused, or a bad URL
     (`top` shows these and goes on; with --once or --count, 3 when its last reading failed)

Owner tokens are never shown. Keys' control characters are printed escaped (\\n, \\u{1b}).
";

const USAGE: &str = "Usage: leasehold [OPTIONS] <COMMAND>  (list, show, release, semaphore, \
                     watch, top, fences, help)";

/// `leasehold list --help`.
const LIST_HELP: &str = "\
leasehold list: the locks held now, as a table of key, remaining lease, last fence and
whether anyone waited for the lock during the current hold

Usage: leasehold list [OPTIONS] [PATTERN]

Arguments:
  [PATTERN]  a glob over lock keys (as given to Locker::lock): * any run of characters,
             ? one character [default: *]

On Redis, keys are found with SCAN (never KEYS), so a large keyspace is walked in steps
rather than blocking the server; on the other engines, by listing the prefix's locks. Prints
nothing on stdout when no lock matches (and says so on stderr).
The fence is the lock's fence counter: the holder's fencing token is at most this.

Global options: --url, --prefix, --config, --timeout (see `leasehold --help`).
";

/// `leasehold show --help`.
const SHOW_HELP: &str = "\
leasehold show: one lock's state: held or free, remaining lease, last fence, and whether
anyone waited for it during the current hold

Usage: leasehold show [OPTIONS] KEY

Arguments:
  KEY  the lock key, as given to Locker::lock (without the prefix)

A free lock is an answer too: exit status 0.

Global options: --url, --prefix, --config, --timeout (see `leasehold --help`).
";

/// `leasehold semaphore --help`.
const SEMAPHORE_HELP: &str = "\
leasehold semaphore: the holders of a semaphore's permits: the limit they agreed on, the
permits in use, and a table of each holder's permits and remaining lease

Usage: leasehold semaphore [OPTIONS] KEY

Arguments:
  KEY  the semaphore's key, as given to Locker::semaphore (without the prefix)

A semaphore nobody holds a permit of is an answer too: exit status 0. Holders are told
apart by their place only; their owner tokens are never shown.

Global options: --url, --prefix, --config, --timeout (see `leasehold --help`).
";

/// `leasehold release --help`.
const RELEASE_HELP: &str = "\
leasehold release: delete a lock whoever holds it, and wake its waiters

Usage: leasehold release [OPTIONS] KEY --force

Arguments:
  KEY  the lock key, as given to Locker::lock (without the prefix)

Options:
      --force  required: this bypasses the owner token that protects every other release
  -y, --yes    do not ask for confirmation (for scripts)

The holder will NOT be told: it keeps running until its next lease renewal fails, and may
write meanwhile; fenced resources reject its writes (the next holder's fence is larger).
Use it for a holder that is stuck with a long lease, not to break a live one.

Without --yes, asks to type the key on stdin, and deletes nothing if the key changed hands
meanwhile. Exit status 1 when nothing was deleted.

Global options: --url, --prefix, --config, --timeout (see `leasehold --help`).
";

/// `leasehold watch --help`.
const WATCH_HELP: &str = "\
leasehold watch: follow one lock live, one timestamped line (UTC) per change:
  acquired (fence N, lease 10.0s)   a new hold; the lease is what remained when first seen
  released                          gone before its lease ran out
  expired or released               gone at about the end of its lease
  waiters appeared                  someone started waiting for the current hold

Usage: leasehold watch [OPTIONS] KEY

Arguments:
  KEY  the lock key, as given to Locker::lock (without the prefix)

Options:
      --interval DUR  how often to read the lock [default: 100ms]
      --for DUR       stop after watching this long [default: until Ctrl-C]
                      (exit status 0 either way)

Changes shorter than the interval can be missed, and a hand-over between two tasks of one
process may show as no change. On ZooKeeper and etcd, where the holder's session rather than
an expiry of the lock's own ends a hold, a lease shows as `session` and every end as
`released`. Read errors are reported on stderr and watching goes on.

Global options: --url, --prefix, --config, --timeout (see `leasehold --help`).
";

/// `leasehold top --help`.
const TOP_HELP: &str = "\
leasehold top: a live view of the locks held now, refreshed every interval, with a line
about the engine at the top

Usage: leasehold top [OPTIONS] [PATTERN]

Arguments:
  [PATTERN]  a glob over lock keys, as for `list` [default: *]

Options:
      --interval DUR  how often to read the locks [default: 1s]
      --sort ORDER    age (held longest first), waiters (most processes waiting first) or
                      key [default: age]; on the screen, the keys a, w and k
      --plain         print a table every interval instead of drawing the screen; the
                      default when standard output is not a terminal
      --once          print one table and exit (plain)
      --count N       print N tables, one every interval, and exit (plain)

The top line: the engine and its servers, the prefix, the health (the locker's state:
connected, suspended, lost, reconnected; `reads failing` when the last reading failed), the
round trip of one read of a lock, the locks held, and the rates below for all of them.
On the screen: q, Esc or Ctrl-C quits; a, w and k sort; rows that do not fit are counted
at the bottom.

Columns:
  KEY      the lock key (control characters escaped)
  AGE      how long the holder has held it, from its own clock (`>12s`: no time stored,
           at least since this view first saw the hold)
  LEASE    the holder's remaining lease (`session` on ZooKeeper and etcd)
  FENCE    the lock's fence counter
  WAITING  processes queued for the lock (contenders, on ZooKeeper and etcd)
  ACQ/S    acquisitions per second over the last 10s: new holds seen from one reading to
           the next (a new fence, or a lock that was free). No engine counts them, so this
           is a lower bound: a hold that begins and ends between two readings is missed, and
           so is all but the last of several
  CONT/S   of those, contended ones per second: a new hold of a lock that had someone
           waiting at the reading before (a hand-over to a process that waited)
  LABEL    the holder's label
  HOLDER   service@host pid of the holder's locker, `+N` for other readers

Reading errors show in the top line and reading goes on, also while the engine cannot be
reached at start. Every reading lists the held locks as `list` does (on Redis with SCAN).

Global options: --url, --prefix, --config, --timeout (see `leasehold --help`).
";

/// What the command line asks for.
#[derive(Debug)]
pub(crate) enum Parsed {
    /// Print this help text and exit 0.
    Help(&'static str),
    /// Print the version and exit 0.
    Version,
    /// Run a command.
    Run(Invocation),
}

/// A command and the options that say where the locks are.
#[derive(Debug)]
pub(crate) struct Invocation {
    /// Where the locks are.
    pub(crate) global: Global,
    /// What to do.
    pub(crate) command: Command,
}

/// The options of every command: where the locks are and how long to wait for the engine.
/// `None` when not given, so that the environment and the config file can fill them in.
#[derive(Debug, Default)]
pub(crate) struct Global {
    /// `--url`.
    pub(crate) url: Option<String>,
    /// `--prefix`.
    pub(crate) prefix: Option<String>,
    /// `--config`.
    pub(crate) config: Option<PathBuf>,
    /// `--timeout`.
    pub(crate) timeout: Option<Duration>,
}

/// One subcommand with its arguments.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Command {
    /// `list [PATTERN]`.
    List {
        /// The glob over keys; `*` by default.
        pattern: String,
    },
    /// `show KEY`.
    Show {
        /// The lock key.
        key: String,
    },
    /// `semaphore KEY`.
    Semaphore {
        /// The semaphore's key.
        key: String,
    },
    /// `release KEY --force [--yes]`; only made when `--force` was given.
    Release {
        /// The lock key.
        key: String,
        /// Skip the confirmation.
        yes: bool,
    },
    /// `watch KEY [--interval DUR] [--for DUR]`.
    Watch {
        /// The lock key.
        key: String,
        /// How often to read the lock.
        interval: Duration,
        /// When to stop; `None`: at Ctrl-C.
        stop_after: Option<Duration>,
    },
    /// `top [PATTERN] [--interval DUR] [--sort ORDER] [--plain] [--once | --count N]`.
    Top(crate::top::Options),
    /// `fences [--above CEILING]`.
    Fences {
        /// The ceiling of the deployment the locks move from: print the offset that puts
        /// this deployment's fences above it, instead of this deployment's ceiling.
        above: Option<u64>,
    },
}

/// The default `--interval` of `watch` (`top`'s is its own).
const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);

/// A command line that cannot be run: what is wrong, and the usage to show with it.
#[derive(Debug)]
pub(crate) struct UsageError {
    /// What is wrong and how to fix it.
    pub(crate) message: String,
    /// The usage line of the command concerned.
    usage: &'static str,
}

impl UsageError {
    fn new(usage: &'static str, message: impl Into<String>) -> Self {
        UsageError {
            message: message.into(),
            usage,
        }
    }

    /// Prints the error and the usage to stderr, and gives exit status 2.
    pub(crate) fn report(self) -> ExitCode {
        eprintln!(
            "error: {}\n\n{}\n\nFor more information, try 'leasehold --help'.",
            self.message, self.usage
        );
        ExitCode::from(exit::USAGE)
    }
}

/// `leasehold fences --help`.
const FENCES_HELP: &str = "\
leasehold fences: the fence ceiling of this deployment, a number above every fence and
leader term it handed out so far, on every key; printed alone on stdout

Usage: leasehold fences [--above CEILING] [OPTIONS]

Moving locks to another engine (say from Redis to etcd, whose fences are on another
scale): stop the old deployment's lock holders, run this against the old deployment (with
its --config, so that its own fence_offset counts), then run it again against the new
deployment with --above <the number>, and give every process of the new one fence_offset =
<the second number> (LEASEHOLD_FENCE_OFFSET). Without it, fenced storage that saw the old
fences refuses the new holders' writes until the new fences pass them: for good, from
Redis or PostgreSQL (clock microseconds) to ZooKeeper or etcd (transaction counts).

Options:
      --above CEILING  print the fence_offset that puts every fence this deployment hands
                       out from now on above CEILING (the old deployment's ceiling): the
                       ceiling less what this engine hands out now, plus a margin; 0 when
                       it hands out more already. Unlike the ceiling itself as the offset,
                       it does not grow by a clock's worth on every move.

It takes and releases a lock of its own (leasehold:fence-ceiling:...) to read the engine's
fence rule: exact on PostgreSQL, ZooKeeper and etcd, the server clock plus a margin on Redis.

Global options: --url, --prefix, --config, --timeout (see `leasehold --help`).
";

/// The subcommands, with their help texts and usage lines.
const COMMANDS: [(&str, &str, &str); 7] = [
    (
        "list",
        LIST_HELP,
        "Usage: leasehold list [OPTIONS] [PATTERN]",
    ),
    ("show", SHOW_HELP, "Usage: leasehold show [OPTIONS] KEY"),
    (
        "semaphore",
        SEMAPHORE_HELP,
        "Usage: leasehold semaphore [OPTIONS] KEY",
    ),
    (
        "release",
        RELEASE_HELP,
        "Usage: leasehold release [OPTIONS] KEY --force",
    ),
    ("watch", WATCH_HELP, "Usage: leasehold watch [OPTIONS] KEY"),
    ("top", TOP_HELP, "Usage: leasehold top [OPTIONS] [PATTERN]"),
    (
        "fences",
        FENCES_HELP,
        "Usage: leasehold fences [--above CEILING] [OPTIONS]",
    ),
];

/// Options seen on the command line, before the subcommand is known to check them against.
#[derive(Default)]
struct Seen {
    global: Global,
    force: bool,
    yes: bool,
    interval: Option<Duration>,
    stop_after: Option<Duration>,
    sort: Option<Sort>,
    plain: bool,
    count: Option<u64>,
    above: Option<u64>,
    help: bool,
    version: bool,
    /// Command-specific options in the order given, to refuse those the command lacks.
    specific: Vec<&'static str>,
}

/// Parses the arguments after the program name.
///
/// # Errors
/// A [`UsageError`] naming the argument and what would be right.
pub(crate) fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Parsed, UsageError> {
    let mut args = args
        .into_iter()
        .map(|a| {
            a.into_string()
                .map_err(|a| UsageError::new(USAGE, format!("argument {a:?} is not valid UTF-8")))
        })
        .collect::<Result<Vec<_>, _>>()?
        .into_iter();
    let mut seen = Seen::default();
    let mut positional = Vec::new();
    while let Some(arg) = args.next() {
        if arg == "--" {
            positional.extend(args.by_ref());
            break;
        }
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) if arg.starts_with("--") => (name.to_owned(), Some(value)),
            _ => (arg.clone(), None),
        };
        let mut value = |what: &str| -> Result<String, UsageError> {
            match inline {
                Some(v) => Ok(v.to_owned()),
                None => args.next().ok_or_else(|| {
                    UsageError::new(USAGE, format!("{name} needs a value: {name} {what}"))
                }),
            }
        };
        match name.as_str() {
            "-h" | "--help" => seen.help = true,
            "-V" | "--version" => seen.version = true,
            "--url" => set(&mut seen.global.url, &name, value("URL")?)?,
            "--prefix" => set(&mut seen.global.prefix, &name, value("PREFIX")?)?,
            "--config" => set(&mut seen.global.config, &name, value("FILE")?.into())?,
            "--timeout" => {
                let d = duration(&name, &value("DURATION")?)?;
                set(&mut seen.global.timeout, &name, d)?;
            }
            "--interval" => {
                let d = duration(&name, &value("DURATION")?)?;
                set(&mut seen.interval, &name, d)?;
                seen.specific.push("--interval");
            }
            "--for" => {
                let d = duration(&name, &value("DURATION")?)?;
                set(&mut seen.stop_after, &name, d)?;
                seen.specific.push("--for");
            }
            "--sort" => {
                let order = value("ORDER")?;
                let sort = Sort::parse(&order).ok_or_else(|| {
                    UsageError::new(
                        USAGE,
                        format!(
                            "--sort {:?} is not an order; write age, waiters or key",
                            crate::display::key(&order)
                        ),
                    )
                })?;
                set(&mut seen.sort, &name, sort)?;
                seen.specific.push("--sort");
            }
            "--plain" => {
                seen.plain = true;
                seen.specific.push("--plain");
            }
            "--once" => {
                set(&mut seen.count, "--once or --count", 1)?;
                seen.specific.push("--once");
            }
            "--count" => {
                let text = value("N")?;
                let count = text.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    UsageError::new(
                        USAGE,
                        format!(
                            "--count {:?} is not a number of tables; write one above zero, \
                             e.g. --count 3",
                            crate::display::key(&text)
                        ),
                    )
                })?;
                set(&mut seen.count, "--once or --count", count)?;
                seen.specific.push("--count");
            }
            "--above" => {
                let text = value("CEILING")?;
                let ceiling = text.parse::<u64>().map_err(|_| {
                    UsageError::new(
                        USAGE,
                        format!(
                            "--above {:?} is not a fence ceiling; give the number `leasehold \
                             fences` printed for the deployment the locks move from",
                            crate::display::key(&text)
                        ),
                    )
                })?;
                set(&mut seen.above, &name, ceiling)?;
                seen.specific.push("--above");
            }
            "--force" => {
                seen.force = true;
                seen.specific.push("--force");
            }
            "-y" | "--yes" => {
                seen.yes = true;
                seen.specific.push("--yes");
            }
            _ if inline.is_some() || (name.starts_with('-') && name.len() > 1) => {
                return Err(UsageError::new(
                    USAGE,
                    format!(
                        "unknown option {name}; put `--` before a key or pattern that starts \
                         with `-`"
                    ),
                ));
            }
            _ => positional.push(arg),
        }
    }
    command(seen, positional)
}

/// Checks the subcommand against its arguments and options.
fn command(seen: Seen, positional: Vec<String>) -> Result<Parsed, UsageError> {
    let mut positional = positional.into_iter();
    let Some(name) = positional.next() else {
        if seen.help {
            return Ok(Parsed::Help(HELP));
        }
        if seen.version {
            return Ok(Parsed::Version);
        }
        return Err(UsageError::new(USAGE, "no command given"));
    };
    if name == "help" {
        return match positional.next() {
            None => Ok(Parsed::Help(HELP)),
            Some(topic) => match COMMANDS.iter().find(|(n, _, _)| *n == topic) {
                Some((_, help, _)) => Ok(Parsed::Help(help)),
                None => Err(unknown_command(&topic)),
            },
        };
    }
    let Some(&(name, help, usage)) = COMMANDS.iter().find(|(n, _, _)| *n == name) else {
        return Err(unknown_command(&name));
    };
    if seen.help {
        return Ok(Parsed::Help(help));
    }
    if seen.version {
        return Ok(Parsed::Version);
    }
    let allowed: &[&str] = match name {
        "release" => &["--force", "--yes"],
        "watch" => &["--interval", "--for"],
        "top" => &["--interval", "--sort", "--plain", "--once", "--count"],
        "fences" => &["--above"],
        _ => &[],
    };
    if let Some(option) = seen.specific.iter().find(|o| !allowed.contains(o)) {
        return Err(UsageError::new(
            usage,
            format!("`{name}` has no option {option}"),
        ));
    }
    let rest: Vec<String> = positional.collect();
    let command = match name {
        "list" => {
            if rest.len() > 1 {
                return Err(UsageError::new(
                    usage,
                    format!(
                        "`list` takes one pattern, got {}; quote a pattern with spaces, and \
                         write it without the prefix",
                        rest.len()
                    ),
                ));
            }
            Command::List {
                pattern: rest.into_iter().next().unwrap_or_else(|| "*".to_owned()),
            }
        }
        "top" => {
            if rest.len() > 1 {
                return Err(UsageError::new(
                    usage,
                    format!(
                        "`top` takes one pattern, got {}; quote a pattern with spaces, and \
                         write it without the prefix",
                        rest.len()
                    ),
                ));
            }
            Command::Top(crate::top::Options {
                pattern: rest.into_iter().next().unwrap_or_else(|| "*".to_owned()),
                interval: seen.interval.unwrap_or(crate::top::DEFAULT_INTERVAL),
                sort: seen.sort.unwrap_or_default(),
                plain: seen.plain,
                count: seen.count,
            })
        }
        "fences" => {
            if !rest.is_empty() {
                return Err(UsageError::new(
                    usage,
                    format!("`fences` takes no argument, got {}", rest.len()),
                ));
            }
            Command::Fences { above: seen.above }
        }
        _ => {
            let key = one_key(name, usage, rest)?;
            match name {
                "show" => Command::Show { key },
                "semaphore" => Command::Semaphore { key },
                "release" if !seen.force => {
                    return Err(UsageError::new(
                        usage,
                        "`release` deletes the lock whoever holds it, bypassing its owner; \
                         add --force to do that (and --yes to skip the confirmation)",
                    ));
                }
                "release" => Command::Release { key, yes: seen.yes },
                _ => {
                    let interval = seen.interval.unwrap_or(DEFAULT_INTERVAL);
                    Command::Watch {
                        key,
                        interval,
                        stop_after: seen.stop_after,
                    }
                }
            }
        }
    };
    Ok(Parsed::Run(Invocation {
        global: seen.global,
        command,
    }))
}

/// The one KEY argument of `show`, `release` and `watch`.
fn one_key(name: &str, usage: &'static str, rest: Vec<String>) -> Result<String, UsageError> {
    let n = rest.len();
    let mut rest = rest.into_iter();
    match (rest.next(), n) {
        (Some(key), 1) => Ok(key),
        (None, _) => Err(UsageError::new(
            usage,
            format!("`{name}` needs the lock KEY, as given to Locker::lock"),
        )),
        _ => Err(UsageError::new(
            usage,
            format!("`{name}` takes one KEY, got {n}; quote a key with spaces"),
        )),
    }
}

/// A subcommand that does not exist, named safely.
fn unknown_command(name: &str) -> UsageError {
    UsageError::new(
        USAGE,
        format!(
            "unknown command {:?}; the commands are list, show, semaphore, release, watch, \
             top, fences and help",
            crate::display::key(name)
        ),
    )
}

/// Stores an option's value, refusing a second one rather than guessing which one was meant.
fn set<T>(slot: &mut Option<T>, name: &str, value: T) -> Result<(), UsageError> {
    if slot.is_some() {
        return Err(UsageError::new(USAGE, format!("{name} is given twice")));
    }
    *slot = Some(value);
    Ok(())
}

/// A duration option, as humantime writes it (`500ms`, `2s`); zero is refused.
fn duration(name: &str, text: &str) -> Result<Duration, UsageError> {
    let d = humantime::parse_duration(text).map_err(|e| {
        UsageError::new(
            USAGE,
            format!(
                "{name} {text:?} is not a duration ({e}); write a number and a unit, e.g. \
                 500ms, 2s, 1m"
            ),
        )
    })?;
    if d.is_zero() {
        return Err(UsageError::new(
            USAGE,
            format!("{name} must be more than zero"),
        ));
    }
    Ok(d)
}

#[cfg(test)]
mod tests;
