//! Tests' view of what the crate logs: a `tracing` layer that keeps every event of the calling
//! thread (level, target, message and the `suppressed` count of rate-limited messages).

use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

/// One event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub level: tracing::Level,
    pub target: String,
    pub message: String,
    /// The `suppressed` field, 0 without one.
    pub suppressed: u64,
}

struct Fields<'a>(&'a mut Seen);

impl Visit for Fields<'_> {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "suppressed" {
            self.0.suppressed = value;
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0.message = format!("{value:?}");
        }
    }
}

/// The events seen so far.
#[derive(Clone, Default)]
pub struct Capture(Arc<Mutex<Vec<Seen>>>);

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let m = event.metadata();
        let mut seen = Seen {
            level: *m.level(),
            target: m.target().to_owned(),
            message: String::new(),
            suppressed: 0,
        };
        event.record(&mut Fields(&mut seen));
        self.0.lock().unwrap().push(seen);
    }
}

impl Capture {
    /// The events whose message is `message`, taken out.
    pub fn take(&self, message: &str) -> Vec<Seen> {
        let mut all = self.0.lock().unwrap();
        let (these, rest) = all.drain(..).partition(|s| s.message == message);
        *all = rest;
        these
    }

    /// Every event of `target`, taken out.
    pub fn take_target(&self, target: &str) -> Vec<Seen> {
        let mut all = self.0.lock().unwrap();
        let (these, rest) = all.drain(..).partition(|s| s.target == target);
        *all = rest;
        these
    }
}

/// Runs `f` with every event of this thread, at every level, captured.
pub fn captured<R>(f: impl FnOnce(&Capture) -> R) -> R {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    tracing::subscriber::with_default(subscriber, || f(&capture))
}
