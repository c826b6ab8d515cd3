//! The orders `top` shows its rows in, chosen with `--sort` or a key on the screen.

use std::cmp::Ordering;

use super::view::Row;

/// How `top` orders the locks it shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Sort {
    /// Held longest first. The default.
    #[default]
    Age,
    /// Most processes waiting first (then held longest).
    Waiters,
    /// By key, as `list` prints them.
    Key,
}

impl Sort {
    /// Every order, with the key that picks it on the screen.
    pub(crate) const ALL: [(Sort, char); 3] =
        [(Sort::Age, 'a'), (Sort::Waiters, 'w'), (Sort::Key, 'k')];

    /// Its name on the command line and on the screen: `age`, `waiters` or `key`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Sort::Age => "age",
            Sort::Waiters => "waiters",
            Sort::Key => "key",
        }
    }

    /// The order named `name` on the command line, if any.
    pub(crate) fn parse(name: &str) -> Option<Sort> {
        Sort::ALL
            .iter()
            .map(|(sort, _)| *sort)
            .find(|sort| sort.as_str() == name)
    }

    /// The order a key picks on the screen, if any.
    pub(crate) fn for_key(key: char) -> Option<Sort> {
        Sort::ALL
            .iter()
            .find(|(_, k)| *k == key.to_ascii_lowercase())
            .map(|(sort, _)| *sort)
    }

    /// Sorts `rows` in this order; ties go by key, so that equal rows never swap places
    /// between two refreshes.
    pub(crate) fn apply(self, rows: &mut [Row]) {
        rows.sort_by(|a, b| self.compare(a, b).then_with(|| a.key.cmp(&b.key)));
    }

    fn compare(self, a: &Row, b: &Row) -> Ordering {
        // An unknown age sorts after every known one.
        let by_age = || b.age.cmp(&a.age);
        match self {
            Sort::Age => by_age(),
            Sort::Waiters => b
                .waiting
                .cmp(&a.waiting)
                .then_with(|| b.waiters.cmp(&a.waiters))
                .then_with(by_age),
            Sort::Key => Ordering::Equal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, age: Option<u64>, waiting: u64) -> Row {
        Row {
            key: key.to_owned(),
            age: age.map(std::time::Duration::from_secs),
            waiting,
            waiters: waiting > 0,
            cells: Default::default(),
        }
    }

    fn keys(sort: Sort, rows: &mut [Row]) -> Vec<&str> {
        sort.apply(rows);
        rows.iter().map(|r| r.key.as_str()).collect()
    }

    #[test]
    fn each_order_and_its_key() {
        let mut rows = [
            row("b", Some(5), 0),
            row("a", None, 2),
            row("c", Some(9), 2),
            row("d", Some(5), 0),
        ];
        assert_eq!(keys(Sort::Age, &mut rows), ["c", "b", "d", "a"]);
        assert_eq!(keys(Sort::Waiters, &mut rows), ["c", "a", "b", "d"]);
        assert_eq!(keys(Sort::Key, &mut rows), ["a", "b", "c", "d"]);
        assert_eq!(Sort::for_key('W'), Some(Sort::Waiters));
        assert_eq!(Sort::for_key('x'), None);
        assert_eq!(Sort::parse("key"), Some(Sort::Key));
        assert_eq!(Sort::parse("Key"), None);
    }
}
