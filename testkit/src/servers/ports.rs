//! Free TCP ports on 127.0.0.1 for servers the harness starts.
//!
//! The kernel picks a port for a listener bound to port 0; the harness never hands out the same
//! port twice, so two servers started in parallel cannot race for one.

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::sync::Mutex;

/// A port that was free a moment ago; the caller must cope with losing a race for it.
pub(crate) fn free_port() -> u16 {
    static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    for _ in 0..100 {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .unwrap_or_else(|e| panic!("cannot bind 127.0.0.1:0 to find a free port: {e}"))
            .port();
        let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|p| p.into_inner());
        if handed_out.insert(port) {
            return port;
        }
    }
    panic!("the kernel offered only ports this test binary already uses, 100 times in a row");
}
