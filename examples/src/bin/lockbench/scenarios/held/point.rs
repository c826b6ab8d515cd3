//! What a held-locks worker is told and what it says back: the side it runs, and the one
//! line of figures it prints (`held name=value ...`).

/// Which side a worker runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Side {
    /// leasehold's watchdog.
    Ours,
    /// One spawned task per guard renewing with a script of its own.
    ByHand,
}

impl Side {
    pub(super) fn name(self) -> &'static str {
        match self {
            Side::Ours => "ours",
            Side::ByHand => "by-hand",
        }
    }

    pub(super) fn parse(s: &str) -> Side {
        match s {
            "ours" => Side::Ours,
            "by-hand" => Side::ByHand,
            other => panic!("unknown side {other:?}: ours or by-hand"),
        }
    }
}

/// What one worker measured while holding its locks.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Point {
    /// RSS growth over the locks held, bytes per lock.
    pub(crate) memory_per_lock: f64,
    /// Redis CPU over the window, µs per renewal.
    pub(crate) cpu_per_renewal_us: f64,
    /// Redis CPU over the window, µs per second per held lock.
    pub(crate) cpu_per_lock_us_s: f64,
    /// p99 of how late renewals were sent, ms.
    pub(crate) lag_p99_ms: f64,
    /// Redis commands per renewal over the window, those run by scripts included.
    pub(crate) commands_per_renewal: f64,
    /// Script calls (client requests) per renewal over the window.
    pub(crate) scripts_per_renewal: f64,
    /// Locks taken per second at the start.
    pub(crate) acquired_per_s: f64,
    /// Renewals done in the window.
    pub(crate) renewals: u64,
    /// Renewals that failed (an error, not an answer) in the window.
    pub(crate) failed: u64,
    /// Locks not held any more at the end.
    pub(crate) lost: u64,
}

impl Point {
    pub(super) fn line(&self) -> String {
        format!(
            "held memory_per_lock={} cpu_per_renewal_us={} cpu_per_lock_us_s={} lag_p99_ms={} \
             commands_per_renewal={} scripts_per_renewal={} acquired_per_s={} renewals={} \
             failed={} lost={}",
            self.memory_per_lock,
            self.cpu_per_renewal_us,
            self.cpu_per_lock_us_s,
            self.lag_p99_ms,
            self.commands_per_renewal,
            self.scripts_per_renewal,
            self.acquired_per_s,
            self.renewals,
            self.failed,
            self.lost
        )
    }

    pub(super) fn parse(line: &str) -> Option<Point> {
        let mut p = Point::default();
        let mut fields = line.strip_prefix("held ")?.split(' ');
        for field in fields.by_ref() {
            let (name, value) = field.split_once('=')?;
            let f = || value.parse::<f64>().ok();
            let n = || value.parse::<u64>().ok();
            match name {
                "memory_per_lock" => p.memory_per_lock = f()?,
                "cpu_per_renewal_us" => p.cpu_per_renewal_us = f()?,
                "cpu_per_lock_us_s" => p.cpu_per_lock_us_s = f()?,
                "lag_p99_ms" => p.lag_p99_ms = f()?,
                "commands_per_renewal" => p.commands_per_renewal = f()?,
                "scripts_per_renewal" => p.scripts_per_renewal = f()?,
                "acquired_per_s" => p.acquired_per_s = f()?,
                "renewals" => p.renewals = n()?,
                "failed" => p.failed = n()?,
                "lost" => p.lost = n()?,
                _ => return None,
            }
        }
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_survives_its_line() {
        let p = Point {
            memory_per_lock: 812.5,
            renewals: 42,
            lag_p99_ms: f64::NAN,
            ..Point::default()
        };
        let q = Point::parse(&p.line()).expect("parses");
        assert_eq!(q.memory_per_lock, 812.5);
        assert_eq!(q.renewals, 42);
        assert!(q.lag_p99_ms.is_nan());
    }
}
