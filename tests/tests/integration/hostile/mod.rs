//! Hostile input: keys, prefixes and the names every primitive stores, and the key-template
//! grammar. (Owner tokens in traces are in the `process_wide` binary: that test watches the
//! global subscriber.)

mod keys;
mod names;
mod template;
