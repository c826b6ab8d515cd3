//! Tests that set or watch what a process has only one of: the global tracing subscriber (to
//! hear the background tasks on every thread), and an environment variable that the TLS client
//! reads. They run one at a time ([`alone`]), so each sees its own and nobody else's.

mod hostile_tokens;
mod tls;

/// Held for the whole of each test of this binary, so that no two run at once.
async fn alone() -> tokio::sync::MutexGuard<'static, ()> {
    static ALONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    ALONE.lock().await
}
