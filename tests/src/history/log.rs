//! The event log every worker and the test write: one line per event, in nanoseconds of
//! `CLOCK_MONOTONIC`, with keys encoded so that any key fits in one field.

use std::fmt::{Display, Write as _};
use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::path::Path;
use std::sync::Mutex;

/// Nanoseconds of `CLOCK_MONOTONIC`: comparable between processes of one machine (and the
/// clock `std::time::Instant`, hence leasehold's lease validity, is measured on under Linux).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// An append-only event log shared by the threads of one process. Each event is one line,
/// written with one `write` call.
#[derive(Debug)]
pub struct EventLog {
    file: Mutex<File>,
}

impl EventLog {
    /// Creates (or appends to) the log at `path`.
    ///
    /// # Errors
    /// When the file cannot be opened.
    pub fn create(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(EventLog {
            file: Mutex::new(file),
        })
    }

    /// Logs `event` with `fields` at time `t` (from [`monotonic_ns`]). Fields must not contain
    /// spaces or newlines.
    pub fn at(&self, t: u64, event: &str, fields: &[&dyn Display]) {
        let mut line = format!("{t} {event}");
        for field in fields {
            let _ = write!(line, " {field}");
        }
        line.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        // A full disk must not take the run down; the checker sees the gap.
        let _ = file.write_all(line.as_bytes());
    }

    /// Logs `event` now; returns the time it logged.
    pub fn now(&self, event: &str, fields: &[&dyn Display]) -> u64 {
        let t = monotonic_ns();
        self.at(t, event, fields);
        t
    }
}

/// A key as it appears in a command line's `--keys` list and in a log line: `%`, `,`,
/// whitespace and control characters are written `%XX` (each byte of their UTF-8), the rest
/// as is, so hostile keys (braces, colons, unicode, spaces) survive both.
pub fn encode_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for c in key.chars() {
        if c == '%' || c == ',' || c.is_whitespace() || c.is_control() {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                let _ = write!(out, "%{b:02X}");
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The inverse of [`encode_key`]; a `%` not followed by two hex digits stays as it is (keys
/// of old command lines and logs, which were not encoded, decode to themselves).
pub fn decode_key(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_survive_the_command_line_and_the_log() {
        for key in [
            "plain",
            "{tag}:x",
            "ключ",
            "a b",
            "50%",
            "a,b",
            "%41",
            "new\nline",
            "%+1",
        ] {
            let encoded = encode_key(key);
            assert!(
                !encoded.contains([',', ' ', '\n']),
                "{key:?} -> {encoded:?}"
            );
            assert_eq!(decode_key(&encoded), key);
        }
        // Old, unencoded keys read as themselves.
        assert_eq!(decode_key("hist"), "hist");
        assert_eq!(decode_key("100%"), "100%");
    }
}
