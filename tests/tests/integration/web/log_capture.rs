//! The events logged on the current thread, for the web tests' log assertions (shared by
//! `axum` and `actix`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::subscriber::DefaultGuard;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// One event: its level, target and fields (`message` among them).
#[derive(Clone, Debug)]
pub struct Logged {
    pub level: Level,
    pub target: String,
    pub fields: HashMap<String, String>,
}

impl Logged {
    pub fn field(&self, name: &str) -> &str {
        self.fields.get(name).map(String::as_str).unwrap_or("")
    }
}

/// Every event logged on this thread while the guard of [`Logs::capture`] lives. Tests run
/// on current-thread runtimes, so their requests' events land here; other tests' do not.
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<Logged>>>);

impl Logs {
    pub fn capture() -> (Logs, DefaultGuard) {
        let logs = Logs::default();
        let subscriber = tracing_subscriber::registry().with(logs.clone());
        (logs, crate::support::scoped(subscriber))
    }

    /// The events with this message.
    pub fn with_message(&self, message: &str) -> Vec<Logged> {
        let events = self.0.lock().unwrap();
        events
            .iter()
            .filter(|e| e.field("message") == message)
            .cloned()
            .collect()
    }
}

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        );
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: Subscriber> Layer<S> for Logs {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut fields = HashMap::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push(Logged {
            level: *event.metadata().level(),
            target: event.metadata().target().to_owned(),
            fields,
        });
    }
}
