//! Progress of long benchmark runs on stderr (`indicatif`), drawn only when stderr is a
//! terminal: piped or captured output (tests, scripts) stays as it was.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressIterator, ProgressStyle};

/// A bar of `len` steps named `what`, hidden unless stderr is a terminal.
pub fn bar(len: u64, what: &str) -> ProgressBar {
    let b = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ({elapsed}, {eta} left)")
    {
        b.set_style(style.progress_chars("=> "));
    }
    b.set_message(what.to_owned());
    b
}

/// `items` with a bar that advances per item (a sweep's sizes), when there is more than one.
pub fn over<T>(items: Vec<T>, what: &str) -> impl Iterator<Item = T> {
    let b = if items.len() > 1 {
        bar(items.len() as u64, what)
    } else {
        ProgressBar::hidden()
    };
    items.into_iter().progress_with(b)
}
