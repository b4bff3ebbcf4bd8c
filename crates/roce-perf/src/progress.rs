//! Progress of long benchmark runs (`indicatif`), drawn on stderr only when both stdout and
//! stderr are terminals: piped or captured output (tests, scripts, `| tee`) has no bar at all.
//! A line printed while a bar is up goes through [`Progress::println`] or
//! [`Progress::eprintln`], which clear the bar, print the line whole and draw the bar again
//! below it, so a table row never shares a line with the bar.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{IsTerminal, Write};

/// A bar of a run's steps (sizes of a sweep, work requests of a soak); cleared when dropped.
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar of `len` steps named `what`, drawn when stdout and stderr are terminals.
    pub fn new(len: u64, what: &str) -> Progress {
        let on_terminal = std::io::stdout().is_terminal() && std::io::stderr().is_terminal();
        Progress::with_target(len, what, on_terminal)
    }

    /// A bar over a sweep's `sizes` sizes: none for a single size.
    pub fn sizes(sizes: usize) -> Progress {
        if sizes > 1 {
            Progress::new(sizes as u64, "sizes")
        } else {
            Progress::with_target(1, "sizes", false)
        }
    }

    fn with_target(len: u64, what: &str, drawn: bool) -> Progress {
        let bar = if drawn {
            ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr())
        } else {
            ProgressBar::hidden()
        };
        if let Ok(style) =
            ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ({elapsed}, {eta} left)")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(what.to_owned());
        Progress { bar }
    }

    /// Whether the bar is drawn at all.
    pub fn is_drawn(&self) -> bool {
        !self.bar.is_hidden()
    }

    /// `items`, the bar advancing as each is taken.
    pub fn wrap<T>(&self, items: Vec<T>) -> impl Iterator<Item = T> {
        self.bar.wrap_iter(items.into_iter())
    }

    /// Advances the bar by `n` steps.
    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
    }

    /// Prints `line` on stdout on a line of its own, the bar cleared meanwhile.
    pub fn println(&self, line: &str) {
        self.bar.suspend(|| {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        });
    }

    /// Prints `line` on stderr on a line of its own, the bar cleared meanwhile.
    pub fn eprintln(&self, line: &str) {
        self.bar.suspend(|| eprintln!("{line}"));
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Under `cargo test` stdout is captured (not a terminal): no bar is drawn, and a single
    /// size never has one.
    #[test]
    fn no_bar_without_a_terminal_or_for_one_size() {
        assert!(!Progress::sizes(1).is_drawn());
        if !std::io::stdout().is_terminal() {
            assert!(!Progress::new(10, "x").is_drawn());
        }
    }
}
