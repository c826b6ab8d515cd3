//! How things look on the terminal: leases as `12.3s`, keys with control characters escaped
//! (a key is user data and must not drive the terminal), UTC timestamps, and aligned tables.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use leasehold::{Holder, LockerDescription, Waiter};

/// A remaining lease as `12.3s`; under 0.1 s in milliseconds (`40ms`), so that a live lease
/// never reads as `0.0s`.
pub(crate) fn lease(d: Duration) -> String {
    if d < Duration::from_millis(100) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// How long something has lasted, in the two largest units that matter: `12.3s` under a
/// minute, then `5m03s`, `2h04m`, `3d04h`.
pub(crate) fn age(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        // Tenths cut, not rounded: 59.96 s is not a minute yet.
        0..=59 => format!("{secs}.{}s", d.subsec_millis() / 100),
        60..=3_599 => format!("{}m{:02}s", secs / 60, secs % 60),
        3_600..=86_399 => format!("{}h{:02}m", secs / 3_600, secs / 60 % 60),
        _ => format!("{}d{:02}h", secs / 86_400, secs / 3_600 % 24),
    }
}

/// What a held lock without a remaining lease shows, in one word or two: `session` where a
/// hold lasts as long as its holder's session (ZooKeeper, etcd: the engine's
/// [`leases_expire`](leasehold::Capabilities::leases_expire) is false), `no expiry` where
/// locks expire (on Redis, a key set by hand without one).
pub(crate) fn no_lease(leases_expire: bool) -> &'static str {
    match leases_expire {
        true => "no expiry",
        false => "session",
    }
}

/// A remaining lease that may be absent (see [`no_lease`]); `-` for a free lock.
pub(crate) fn remaining(held: bool, remaining: Option<Duration>, leases_expire: bool) -> String {
    match (held, remaining) {
        (false, _) => "-".to_owned(),
        (true, Some(d)) => lease(d),
        (true, None) => no_lease(leases_expire).to_owned(),
    }
}

/// A fence counter, or `none` when the key never had one (or it expired after days unused).
pub(crate) fn fence(fence: Option<u64>) -> String {
    fence.map_or_else(|| "none".to_owned(), |f| f.to_string())
}

/// `yes` or `no`.
pub(crate) fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// A lock key safe to print: control characters and the invisible characters that reorder
/// or hide text (bidirectional overrides, zero-width marks) are written as Rust escapes
/// (`\n`, `\u{1b}`, `\u{202e}`); everything else is printed as is, so a plain key can be
/// copied back into `leasehold show`.
pub(crate) fn key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for c in key.chars() {
        let invisible = matches!(c,
            '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}');
        if c.is_control() || invisible {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// Who a holder or waiter is, in a few words: `checkout@web-3 pid 4242` from its locker's
/// description; `locker 0123456789abcdef (not described)` when its locker stored no
/// description (it stopped, or has not written it yet); `unknown` when nothing tells (a
/// version of leasehold that wrote no identity). What another process stored is escaped
/// like a key: it must not drive the terminal either.
pub(crate) fn who(locker: Option<&str>, description: Option<&LockerDescription>) -> String {
    match (description, locker) {
        (Some(d), _) => format!("{}@{} pid {}", key(&d.service), key(&d.host), d.pid),
        (None, Some(id)) => format!("locker {} (not described)", key(id)),
        (None, None) => "unknown".to_owned(),
    }
}

/// The rest of a locker's description, for `show`: `locker 0123456789abcdef, leasehold
/// 0.1.0, up since 2025-01-31T12:00:00.000Z`.
pub(crate) fn locker_details(d: &LockerDescription) -> String {
    format!(
        "locker {}, leasehold {}, up since {}",
        key(&d.locker),
        key(&d.version),
        timestamp(d.started)
    )
}

/// A holder in one cell of `list`: who it is, and how many others share the lock
/// (`checkout@web-3 pid 4242 +2`, readers); `-` for none.
pub(crate) fn holders_cell(holders: &[Holder]) -> String {
    match holders.split_first() {
        None => "-".to_owned(),
        Some((first, [])) => who(first.locker.as_deref(), first.description.as_ref()),
        Some((first, rest)) => format!(
            "{} +{}",
            who(first.locker.as_deref(), first.description.as_ref()),
            rest.len()
        ),
    }
}

/// A label that may be absent: `-` for none.
pub(crate) fn label(label: Option<&str>) -> String {
    label.map_or_else(|| "-".to_owned(), key)
}

/// A point in time and how long ago it was, as `2025-01-31T12:34:56.789Z (12.3s ago)`
/// (a time ahead of `now`, from a clock ahead of this one, reads `(just now)`).
pub(crate) fn since(t: SystemTime, now: SystemTime) -> String {
    match now.duration_since(t) {
        Ok(ago) => format!("{} ({} ago)", timestamp(t), lease(ago)),
        Err(_) => format!("{} (just now)", timestamp(t)),
    }
}

/// A `name: value` line of `show`, the values aligned after 13 columns.
pub(crate) fn field(name: &str, value: &str) -> String {
    format!("{:<13}{value}\n", format!("{name}:"))
}

/// The lines of `show` that say who holds a lock and who waits for it: per holder, who it is,
/// its locker, since when and its label; per waiter, who it is and how long it has waited.
pub(crate) fn holders_and_waiters(
    holders: &[Holder],
    waiting: &[Waiter],
    now: SystemTime,
) -> String {
    let mut out = String::new();
    for h in holders {
        out.push_str(&field(
            "holder",
            &who(h.locker.as_deref(), h.description.as_ref()),
        ));
        if let Some(d) = &h.description {
            out.push_str(&field("  locker", &locker_details(d)));
        }
        if let Some(t) = h.since {
            out.push_str(&field("  since", &since(t, now)));
        }
        if let Some(l) = &h.label {
            out.push_str(&field("  label", &key(l)));
        }
    }
    for w in waiting {
        let mut line = who(w.locker.as_deref(), w.description.as_ref());
        if let Some(waited) = w.waited {
            let _ = write!(line, ", waiting {}", lease(waited));
        }
        if let Some(l) = &w.label {
            let _ = write!(line, ", label {}", key(l));
        }
        out.push_str(&field("waiter", &line));
    }
    out
}

/// A URL with its password (and user name) replaced by `***`; in an `etcd://` list, every
/// endpoint's (each may carry credentials of its own).
pub(crate) fn redact_url(url: &str) -> String {
    if let Some(endpoints) = url.strip_prefix("etcd://") {
        let endpoints: Vec<String> = endpoints.split(',').map(redact_one).collect();
        return format!("etcd://{}", endpoints.join(","));
    }
    redact_one(url)
}

/// One URL with its password (and user name) replaced by `***`, and the value of a
/// `password` or `sslpassword` parameter (PostgreSQL's URLs take them) too.
fn redact_one(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let shown = match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}***{}", &rest[at..]),
        None => url.to_owned(),
    };
    let Some(query) = shown.find('?') else {
        return shown;
    };
    let params: Vec<String> = shown[query + 1..]
        .split('&')
        .map(|param| match param.split_once('=') {
            Some((key, _)) if key == "password" || key == "sslpassword" => format!("{key}=***"),
            _ => param.to_owned(),
        })
        .collect();
    format!("{}?{}", &shown[..query], params.join("&"))
}

/// The current time in UTC, as `2025-01-31T12:34:56.789Z`.
pub(crate) fn now() -> String {
    timestamp(SystemTime::now())
}

/// A point in time in UTC with milliseconds, as `2025-01-31T12:34:56.789Z`.
pub(crate) fn timestamp(t: SystemTime) -> String {
    let since_epoch = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since_epoch.as_secs();
    let (days, secs_of_day) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        secs_of_day / 3600,
        secs_of_day / 60 % 60,
        secs_of_day % 60,
        since_epoch.subsec_millis()
    )
}

/// Year, month and day of the `days`-th day after 1970-01-01 (Howard Hinnant's algorithm,
/// for dates from 1970 on), so that the tool needs no date crate for its timestamps.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// Rows under a header, each column as wide as its widest cell, separated by two spaces;
/// the last column is not padded.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let last = row.len().saturating_sub(1);
        for (i, (cell, width)) in row.iter().zip(&widths).enumerate() {
            if i == last {
                out.push_str(cell);
            } else {
                let pad = width - cell.chars().count();
                let _ = write!(out, "{cell}{:pad$}  ", "");
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_read_in_seconds() {
        assert_eq!(lease(Duration::from_millis(12_345)), "12.3s");
        assert_eq!(lease(Duration::from_millis(600)), "0.6s");
        assert_eq!(lease(Duration::from_millis(40)), "40ms");
        assert_eq!(age(Duration::from_millis(40)), "0.0s");
        assert_eq!(age(Duration::from_millis(59_990)), "59.9s");
        assert_eq!(age(Duration::from_secs(183)), "3m03s");
        assert_eq!(age(Duration::from_secs(7_440)), "2h04m");
        assert_eq!(age(Duration::from_secs(273_600)), "3d04h");
        assert_eq!(remaining(true, None, true), "no expiry");
        assert_eq!(remaining(true, None, false), "session");
        assert_eq!(remaining(false, Some(Duration::from_secs(1)), false), "-");
        assert_eq!(fence(None), "none");
    }

    #[test]
    fn keys_cannot_drive_the_terminal() {
        assert_eq!(key("stock:sku-7"), "stock:sku-7");
        assert_eq!(key("a\u{1b}[2Jb\n"), "a\\u{1b}[2Jb\\n");
        assert_eq!(key("x\u{202e}y"), "x\\u{202e}y");
        assert_eq!(key("ключ:{7}"), "ключ:{7}");
    }

    #[test]
    fn holders_read_in_a_few_words() {
        assert_eq!(who(None, None), "unknown");
        assert_eq!(
            who(Some("0123456789abcdef"), None),
            "locker 0123456789abcdef (not described)"
        );
        assert_eq!(holders_cell(&[]), "-");
        assert_eq!(label(None), "-");
        assert_eq!(label(Some("req 7")), "req 7");
        let t = UNIX_EPOCH + Duration::from_millis(951_827_696_789);
        assert_eq!(
            since(t, t + Duration::from_millis(12_345)),
            "2000-02-29T12:34:56.789Z (12.3s ago)"
        );
        assert_eq!(
            since(t + Duration::from_secs(1), t),
            "2000-02-29T12:34:57.789Z (just now)"
        );
        assert_eq!(field("holder", "x"), "holder:      x\n");
        assert_eq!(field("  since", "x"), "  since:     x\n");
    }

    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(redact_url("redis://u:pw@h:1/0"), "redis://***@h:1/0");
        assert_eq!(redact_url("redis://h:1"), "redis://h:1");
        assert_eq!(redact_url("u:p@w@h:1"), "***@h:1");
        assert_eq!(redact_url("redis://h:1/?x=a@b"), "redis://h:1/?x=a@b");
        assert_eq!(redact_url("redis://u:p,w@h:1"), "redis://***@h:1");
        assert_eq!(
            redact_url("zookeeper://shop:pw@zk1:2181,zk2:2181/app?ca=/ca.pem"),
            "zookeeper://***@zk1:2181,zk2:2181/app?ca=/ca.pem"
        );
        assert_eq!(
            redact_url("postgres://u:pw@db:5432/shop?sslmode=verify-full"),
            "postgres://***@db:5432/shop?sslmode=verify-full"
        );
        assert_eq!(
            redact_url("postgres://u@db/shop?password=pw&sslmode=bogus"),
            "postgres://***@db/shop?password=***&sslmode=bogus"
        );
        assert_eq!(
            redact_url("mysql://locks:pw@db:3306/shop?ssl-mode=VERIFY_IDENTITY&ssl-ca=/ca.pem"),
            "mysql://***@db:3306/shop?ssl-mode=VERIFY_IDENTITY&ssl-ca=/ca.pem"
        );
        // Each etcd endpoint may carry credentials, not only the first.
        assert_eq!(
            redact_url("etcd://e1:2379,http://root:pw@e2:2379,https://u:pw@e3:2379"),
            "etcd://e1:2379,http://***@e2:2379,https://***@e3:2379"
        );
    }

    #[test]
    fn timestamps_are_utc() {
        assert_eq!(timestamp(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(951_827_696_789); // a leap day
        assert_eq!(timestamp(t), "2000-02-29T12:34:56.789Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_767_225_599);
        assert_eq!(timestamp(t), "2025-12-31T23:59:59.000Z");
    }

    #[test]
    fn tables_align() {
        let rows = vec![
            vec!["a".to_owned(), "1.0s".to_owned(), "yes".to_owned()],
            vec!["longer".to_owned(), "12.3s".to_owned(), "no".to_owned()],
        ];
        assert_eq!(
            table(&["KEY", "REMAINING", "WAITERS"], &rows),
            "KEY     REMAINING  WAITERS\na       1.0s       yes\nlonger  12.3s      no\n"
        );
    }
}
