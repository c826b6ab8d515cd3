//! Who holds a lock: each locker describes itself once in the engine (service, host, pid,
//! start, version, a short locker id), and every owner token it writes carries that locker id,
//! the time of the acquisition and its label in front of the random secret, so that a lock
//! points to its holder's description at no extra round trip.
//!
//! An owner token (see [`token`](super::token)) is `h1.<locker>.<ms>.<label>.<secret>`: the
//! version mark `h1.`, the locker id (16 hex digits), the holder's wall clock in milliseconds
//! since the Unix epoch when the acquisition was sent, the label (empty when none; printable
//! ASCII, so never a line break or an escape sequence), and the 32 hex digits of the secret,
//! always last. Everything before the secret is public ([`Stamp`]); the secret never leaves the
//! token: inspection reads only what is before it. A value without the mark (the bare 32 hex
//! digits an earlier version wrote) has no public part: its holder shows as unknown.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::LockError;
use crate::inspect::{Holder, LockerDescription, Waiter};
use crate::store::secrets::Secrets;

/// The longest label of an acquisition, in bytes ([`LockRequest::label`](crate::LockRequest::label)).
pub const MAX_LABEL_LEN: usize = 64;

/// The longest service name, in bytes ([`LockerBuilder::service_name`](crate::LockerBuilder::service_name)).
pub const MAX_SERVICE_LEN: usize = 128;

/// What every new owner token starts with: the format's version.
pub(crate) const MARK: &str = "h1.";

/// The length of an owner token's secret, always its last characters.
pub(crate) const SECRET_LEN: usize = 32;

/// The length of a locker id: 64 random bits as hex digits.
pub(crate) const LOCKER_ID_LEN: usize = 16;

/// How often the background task writes the locker's description again (where it expires,
/// refreshes it; where it lives with the session, recreates it after a new session).
pub(crate) const DESCRIBE_EVERY: Duration = Duration::from_secs(10);

/// How soon the background task tries again after a description could not be written.
pub(crate) const DESCRIBE_RETRY: Duration = Duration::from_secs(2);

/// How long a description lives where it expires (Redis, PostgreSQL) unless written again:
/// three refreshes, so a locker that stopped (crashed, was killed) is forgotten this long
/// after its last refresh at most.
pub(crate) const DESCRIPTION_TTL: Duration = Duration::from_secs(30);

/// The first line of a stored description, with its version.
const DESCRIPTION_MARK: &str = "leasehold-locker 1";

/// The longest value of a description's field, in bytes (a host name is at most 255).
const MAX_FIELD_LEN: usize = 255;

/// One locker's identity: its id (what its tokens and queue names carry) and its description
/// as stored in the engine. Made once per locker.
#[derive(Clone, Debug)]
pub(crate) struct Identity {
    pub(crate) description: LockerDescription,
    /// The description as stored ([`encode`]).
    pub(crate) stored: String,
    /// Where the secrets of this locker's owner tokens come from: seeded once, here.
    pub(crate) secrets: Arc<Secrets>,
}

impl Identity {
    /// A new locker's identity: a fresh id, this process's host, pid and version, now as its
    /// start, and `service` (the binary's name when `None`).
    pub(crate) fn new(service: Option<&str>) -> Identity {
        let description = LockerDescription {
            locker: new_locker_id(),
            service: service.map_or_else(binary_name, str::to_owned),
            host: host_name(),
            pid: std::process::id(),
            // In whole milliseconds, as stored: the locker's own description and the one
            // others read are equal.
            started: UNIX_EPOCH + Duration::from_millis(now_ms(SystemTime::now())),
            version: env!("CARGO_PKG_VERSION").to_owned(),
        };
        let stored = encode(&description);
        Identity {
            description,
            stored,
            secrets: Arc::new(Secrets::new()),
        }
    }

    /// The locker id: 16 hex digits.
    pub(crate) fn id(&self) -> &str {
        &self.description.locker
    }
}

/// Where a locker's description is stored on engines that look it up by locker id: Redis's
/// key `P:locker:{ID}` (its own slot on a Cluster; `list` never takes it for a lock, whose
/// names are `P:lock:{...}`).
pub(crate) fn description_key(prefix: &str, locker: &str) -> String {
    format!("{prefix}:locker:{{{locker}}}")
}

/// Where a locker's description is stored on engines that look it up by the session its
/// contenders live on: ZooKeeper's session id, etcd's lease id, as 16 hex digits, in
/// `P:session:{HEX}`.
#[cfg(any(feature = "zookeeper", feature = "etcd"))]
pub(crate) fn session_key(prefix: &str, session: i64) -> String {
    format!("{prefix}:session:{{{session:016x}}}")
}

/// The descriptions of the lockers named `ids`, from `stored` (an engine's answers, by id;
/// `None` where nothing was stored), decoded; a description that does not decode, or that
/// names another locker, is left out.
pub(crate) fn decode_all<'a>(
    found: impl IntoIterator<Item = (&'a str, Option<String>)>,
) -> std::collections::HashMap<String, LockerDescription> {
    found
        .into_iter()
        .filter_map(|(id, stored)| {
            let d = decode(stored.as_deref()?)?;
            (d.locker == id).then(|| (id.to_owned(), d))
        })
        .collect()
}

/// A time as whole milliseconds since the Unix epoch (0 before it).
fn now_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A fresh locker id: 64 random bits as 16 lowercase hex digits.
fn new_locker_id() -> String {
    let mut raw = [0u8; 8];
    getrandom::fill(&mut raw).expect("the OS random source failed");
    format!("{:016x}", u64::from_be_bytes(raw))
}

/// The name of the running binary, or `unknown`.
fn binary_name() -> String {
    let from_exe = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()));
    let from_args = || {
        std::env::args_os().next().and_then(|a| {
            std::path::Path::new(&a)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
        })
    };
    from_exe
        .or_else(from_args)
        .map(|name| clean(&name))
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The host's name, or `unknown`: the kernel's (Linux), else `HOSTNAME` or `COMPUTERNAME`.
fn host_name() -> String {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    kernel
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .map(|name| clean(name.trim()))
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// A field's value as stored: control characters (a line break would end the field) become
/// `?`, and it is cut to [`MAX_FIELD_LEN`] bytes at a character boundary.
fn clean(value: &str) -> String {
    let mut out = String::with_capacity(value.len().min(MAX_FIELD_LEN));
    for c in value.chars() {
        let c = if c.is_control() { '?' } else { c };
        if out.len() + c.len_utf8() > MAX_FIELD_LEN {
            break;
        }
        out.push(c);
    }
    out
}

/// Checks a service name: 1 to [`MAX_SERVICE_LEN`] bytes, no control characters.
pub(crate) fn check_service(name: &str) -> Result<(), LockError> {
    if name.is_empty() || name.len() > MAX_SERVICE_LEN || name.chars().any(char::is_control) {
        return Err(LockError::config(format!(
            "service_name {name:?} is not a service name: 1 to {MAX_SERVICE_LEN} bytes without \
             control characters, such as \"checkout\""
        )));
    }
    Ok(())
}

/// A description as stored: a version line, then one `name=value` line per field.
pub(crate) fn encode(d: &LockerDescription) -> String {
    let started = now_ms(d.started);
    format!(
        "{DESCRIPTION_MARK}\nlocker={}\nservice={}\nhost={}\npid={}\nstarted={started}\nversion={}",
        clean(&d.locker),
        clean(&d.service),
        clean(&d.host),
        d.pid,
        clean(&d.version),
    )
}

/// A stored description, if it is one (of this format's version). Unknown fields are skipped,
/// so that a later version may add some.
pub(crate) fn decode(stored: &str) -> Option<LockerDescription> {
    let mut lines = stored.lines();
    if lines.next()? != DESCRIPTION_MARK {
        return None;
    }
    let mut d = LockerDescription {
        locker: String::new(),
        service: String::new(),
        host: String::new(),
        pid: 0,
        started: UNIX_EPOCH,
        version: String::new(),
    };
    for line in lines {
        let Some((name, value)) = line.split_once('=') else {
            continue;
        };
        let value = clean(value);
        match name {
            "locker" => d.locker = value,
            "service" => d.service = value,
            "host" => d.host = value,
            "pid" => d.pid = value.parse().unwrap_or(0),
            "started" => {
                d.started = UNIX_EPOCH + Duration::from_millis(value.parse().unwrap_or(0));
            }
            "version" => d.version = value,
            _ => {}
        }
    }
    is_locker_id(&d.locker).then_some(d)
}

/// Whether `text` is a locker id: 16 lowercase hex digits.
pub(crate) fn is_locker_id(text: &str) -> bool {
    text.len() == LOCKER_ID_LEN && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The label of one acquisition, checked: 1 to [`MAX_LABEL_LEN`] bytes of printable ASCII
/// (space included). Inline and `Copy`, so that the resolved options of a request stay `Copy`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Label {
    len: u8,
    bytes: [u8; MAX_LABEL_LEN],
}

impl Label {
    /// Checks `text` as a label.
    ///
    /// # Errors
    /// [`LockError::InvalidKey`] when it is empty, longer than [`MAX_LABEL_LEN`] bytes, or has
    /// a byte that is not printable ASCII: a label often comes from request data, as keys do.
    pub(crate) fn new(text: &str) -> Result<Label, LockError> {
        let printable = text.bytes().all(|b| (0x20..=0x7e).contains(&b));
        if text.is_empty() || text.len() > MAX_LABEL_LEN || !printable {
            let shown: String = text.chars().take(MAX_LABEL_LEN).collect();
            return Err(LockError::invalid_key(format!(
                "label {shown:?} is not a label: 1 to {MAX_LABEL_LEN} bytes of printable ASCII \
                 (letters, digits, punctuation, spaces), such as \"req-7f3a\""
            )));
        }
        let mut bytes = [0u8; MAX_LABEL_LEN];
        bytes[..text.len()].copy_from_slice(text.as_bytes());
        Ok(Label {
            len: text.len() as u8,
            bytes,
        })
    }

    /// The label's text.
    pub(crate) fn as_str(&self) -> &str {
        // Only printable ASCII is ever stored.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl std::fmt::Debug for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

/// The public part of an owner token for `locker`, sent at `now`, with `label`: what is
/// before the secret ([`OwnerToken::new`](super::token::OwnerToken::new) writes the same,
/// without an allocation of its own).
#[cfg(test)]
pub(crate) fn public_part(locker: &str, now: SystemTime, label: Option<&Label>) -> String {
    let ms = now_ms(now);
    let label = label.map_or("", Label::as_str);
    format!("{MARK}{locker}.{ms}.{label}.")
}

/// What an owner token says of its holder: the public part, parsed. Never the secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub(crate) locker: String,
    pub(crate) since: SystemTime,
    pub(crate) label: Option<String>,
}

impl Stamp {
    /// The stamp of a public part (`h1.<locker>.<ms>.<label>.`, as a store's inspection reads
    /// it, without the secret); `None` when it is not one (empty: a token of an earlier version).
    pub(crate) fn of_public(public: &str) -> Option<Stamp> {
        let rest = public.strip_prefix(MARK)?.strip_suffix('.')?;
        let (locker, rest) = rest.split_once('.')?;
        let (ms, label) = rest.split_once('.')?;
        if !is_locker_id(locker) || ms.is_empty() || !ms.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let ms: u64 = ms.parse().ok()?;
        let printable = label.bytes().all(|b| (0x20..=0x7e).contains(&b));
        if label.len() > MAX_LABEL_LEN || !printable {
            return None;
        }
        Some(Stamp {
            locker: locker.to_owned(),
            since: UNIX_EPOCH + Duration::from_millis(ms),
            label: (!label.is_empty()).then(|| label.to_owned()),
        })
    }

    /// The stamp of a whole stored owner value (a token, maybe with the `+` mark a waiter
    /// appends on Redis), as engines that read the whole value get it (a znode's data, an
    /// etcd key's value); the secret is cut off here and never kept.
    pub(crate) fn of_stored(stored: &[u8]) -> Option<Stamp> {
        let text = std::str::from_utf8(stored).ok()?;
        let text = text.strip_suffix('+').unwrap_or(text);
        let public = text.get(..text.len().checked_sub(SECRET_LEN)?)?;
        Stamp::of_public(public)
    }
}

/// The locker id of a name in a store's queue of waiters: a process waits under its locker's
/// id, a fair request under `<locker id>.<its own>`, a semaphore's waiter under a name whose
/// first 16 hex digits are its locker's id (and `:<count>` after it). `None` for names of
/// earlier versions that do not say (they are random: the locker shows as unknown).
pub(crate) fn locker_of_waiter(name: &str) -> Option<&str> {
    let id = name.get(..LOCKER_ID_LEN)?;
    let rest = &name[LOCKER_ID_LEN..];
    let follows = rest.is_empty()
        || rest.starts_with('.')
        || rest.starts_with(|c: char| c.is_ascii_hexdigit());
    (is_locker_id(id) && follows).then_some(id)
}

/// A holder as inspection shows it: its stamp (if its token has one) and its locker's
/// description, looked up with `describe` (by locker id).
pub(crate) fn holder(
    stamp: Option<Stamp>,
    describe: impl Fn(&str) -> Option<LockerDescription>,
) -> Holder {
    match stamp {
        Some(stamp) => Holder {
            description: describe(&stamp.locker),
            locker: Some(stamp.locker),
            since: Some(stamp.since),
            label: stamp.label,
        },
        None => Holder {
            locker: None,
            description: None,
            since: None,
            label: None,
        },
    }
}

/// A waiter as inspection shows it, from its name in the store's queue and how long it has
/// waited (where the store can tell).
pub(crate) fn waiter(
    name: &str,
    waited: Option<Duration>,
    describe: impl Fn(&str) -> Option<LockerDescription>,
) -> Waiter {
    let locker = locker_of_waiter(name).map(str::to_owned);
    Waiter {
        description: locker.as_deref().and_then(&describe),
        locker,
        waited,
        label: None,
    }
}

/// The waiters of a queue as inspection shows them, from their names and how long each has
/// waited in milliseconds (Redis and PostgreSQL keep both).
pub(crate) fn waiters_of_queue(
    names: &[String],
    waited_ms: Vec<i64>,
    describe: impl Fn(&str) -> Option<LockerDescription>,
) -> Vec<Waiter> {
    names
        .iter()
        .zip(waited_ms)
        .map(|(name, ms)| {
            let waited = Duration::from_millis(ms.max(0) as u64);
            waiter(name, Some(waited), &describe)
        })
        .collect()
}

/// A contender of ZooKeeper or etcd as inspection shows it as a holder: its token's stamp
/// where its data is a token, the description of the session (or lease) it lives on, and when
/// it was created where the engine tells (ZooKeeper's `ctime`).
#[cfg(any(feature = "zookeeper", feature = "etcd"))]
pub(crate) fn contender_holder(
    stamp: Option<Stamp>,
    description: Option<LockerDescription>,
    created: Option<SystemTime>,
) -> Holder {
    Holder {
        locker: stamp
            .as_ref()
            .map(|s| s.locker.clone())
            .or_else(|| description.as_ref().map(|d| d.locker.clone())),
        since: stamp.as_ref().map(|s| s.since).or(created),
        label: stamp.and_then(|s| s.label),
        description,
    }
}

/// A contender of ZooKeeper or etcd as inspection shows it as a waiter (see
/// [`contender_holder`]): how long it has waited, from its token's time or its creation,
/// to `now` on this clock.
#[cfg(any(feature = "zookeeper", feature = "etcd"))]
pub(crate) fn contender_waiter(
    stamp: Option<Stamp>,
    description: Option<LockerDescription>,
    created: Option<SystemTime>,
    now: SystemTime,
) -> Waiter {
    let h = contender_holder(stamp, description, created);
    Waiter {
        waited: h
            .since
            .map(|since| now.duration_since(since).unwrap_or_default()),
        locker: h.locker,
        description: h.description,
        label: h.label,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn description() -> LockerDescription {
        LockerDescription {
            locker: "0123456789abcdef".into(),
            service: "checkout".into(),
            host: "web-3".into(),
            pid: 4242,
            started: UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
            version: "0.1.0".into(),
        }
    }

    #[test]
    fn descriptions_round_trip() {
        let d = description();
        assert_eq!(decode(&encode(&d)), Some(d));
    }

    #[test]
    fn hostile_descriptions_stay_one_field_each() {
        let mut d = description();
        d.service = "evil\nlocker=ffffffffffffffff\x1b[31m".into();
        d.host = "h".repeat(1000);
        let back = decode(&encode(&d)).unwrap();
        assert_eq!(back.locker, "0123456789abcdef", "a field cannot add a line");
        assert_eq!(back.service, "evil?locker=ffffffffffffffff?[31m");
        assert_eq!(back.host.len(), MAX_FIELD_LEN);
        // Not a description, or a later version's: nothing.
        assert_eq!(decode("leasehold-locker 2\nlocker=0123456789abcdef"), None);
        assert_eq!(decode("leasehold-locker 1\nlocker=nothex"), None);
        assert_eq!(decode(""), None);
        // Unknown fields of a later minor change are skipped.
        let extra = format!("{}\nzone=eu-1", encode(&description()));
        assert_eq!(decode(&extra), Some(description()));
    }

    #[test]
    fn identities_describe_this_process() {
        let a = Identity::new(Some("checkout"));
        let b = Identity::new(None);
        assert!(is_locker_id(a.id()) && is_locker_id(b.id()));
        assert_ne!(a.id(), b.id());
        assert_eq!(a.description.service, "checkout");
        assert!(!b.description.service.is_empty());
        assert_eq!(a.description.pid, std::process::id());
        assert_eq!(a.description.version, env!("CARGO_PKG_VERSION"));
        assert_eq!(decode(&a.stored).as_ref(), Some(&a.description));
    }

    #[test]
    fn service_names_are_checked() {
        assert!(check_service("checkout").is_ok());
        assert!(check_service("Zahlungen-β").is_ok());
        for bad in ["", "a\nb", "tab\there", &"s".repeat(MAX_SERVICE_LEN + 1)] {
            let e = check_service(bad).unwrap_err();
            assert!(matches!(e, LockError::Config { .. }), "{bad:?}: {e:?}");
        }
    }

    #[test]
    fn labels_are_printable_ascii_and_bounded() {
        for good in ["req-7f3a", " ", "a.b.c", "~R+", &"x".repeat(MAX_LABEL_LEN)] {
            assert_eq!(Label::new(good).unwrap().as_str(), good);
        }
        for bad in [
            "",
            &"x".repeat(MAX_LABEL_LEN + 1),
            "line\nbreak",
            "\x1b[2J",
            "café",
            "nul\0",
            "del\x7f",
        ] {
            let e = Label::new(bad).unwrap_err();
            assert!(matches!(e, LockError::InvalidKey { .. }), "{bad:?}: {e:?}");
            assert!(e.to_string().contains("label"), "{e}");
        }
    }

    #[test]
    fn stamps_parse_back_whatever_the_label() {
        let at = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        for label in [
            None,
            Some("req-7f3a"),
            Some("a.b."),
            Some(". ."),
            Some("+"),
            Some("h1."),
        ] {
            let label = label.map(|l| Label::new(l).unwrap());
            let public = public_part("0123456789abcdef", at, label.as_ref());
            let secret = "f".repeat(SECRET_LEN);
            let stored = format!("{public}{secret}");
            let want = Stamp {
                locker: "0123456789abcdef".into(),
                since: at,
                label: label.map(|l| l.as_str().to_owned()),
            };
            assert_eq!(Stamp::of_public(&public).as_ref(), Some(&want));
            assert_eq!(Stamp::of_stored(stored.as_bytes()).as_ref(), Some(&want));
            // A waiter's mark after it changes nothing.
            let marked = format!("{stored}+");
            assert_eq!(Stamp::of_stored(marked.as_bytes()), Some(want));
        }
    }

    #[test]
    fn values_without_a_stamp_have_no_holder() {
        // The bare token of an earlier version, the values of readers and of a lock left to
        // the next in line, a leader record, garbage.
        for stored in [
            "0123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcdef+",
            "R",
            "R+",
            "~0123456789abcdef",
            "leader\n7\nnode-1",
            "",
            "h1.",
            "h1.0123456789abcdef.12.",
            "h1.0123456789ABCDEF.12..ffffffffffffffffffffffffffffffff",
            "h1.0123456789abcdef.-1..ffffffffffffffffffffffffffffffff",
            "h1.0123456789abcdef.12.\n.ffffffffffffffffffffffffffffffff",
        ] {
            assert_eq!(Stamp::of_stored(stored.as_bytes()), None, "{stored:?}");
        }
        assert_eq!(Stamp::of_stored(&[0xff; 40]), None);
        assert_eq!(Stamp::of_public(""), None);
    }

    #[test]
    fn waiters_name_their_locker() {
        let id = "0123456789abcdef";
        assert_eq!(locker_of_waiter(id), Some(id));
        assert_eq!(
            locker_of_waiter(&format!("{id}.fedcba9876543210")),
            Some(id)
        );
        // A semaphore's waiter: 32 hex digits, the locker's first, then its count.
        assert_eq!(
            locker_of_waiter(&format!("{id}fedcba9876543210:3")),
            Some(id)
        );
        assert_eq!(locker_of_waiter("short"), None);
        assert_eq!(locker_of_waiter("0123456789ABCDEF"), None);
        assert_eq!(locker_of_waiter(&format!("{id}!")), None);
    }
}
