//! What the code under test logs on one thread, while the tests of a binary run together.
//!
//! `tracing` caches each log site's interest for every thread: under a scoped subscriber
//! (`tracing::subscriber::set_default`), a site first reached by another test's thread
//! is cached as "never" and the test capturing misses its line; and a global subscriber
//! of one test (`.init()`) would take every other test's lines. So one global subscriber,
//! installed once per process, is interested in every site at `INFO` and above and asks
//! at each event whether the emitting thread is capturing ([`capture`]); lines of threads
//! that are not go nowhere.

use std::cell::RefCell;
use std::io::Write;
use std::sync::{Arc, Mutex, Once};

use tracing::Metadata;
use tracing::level_filters::LevelFilter;
use tracing::subscriber::Interest;
use tracing_subscriber::filter::DynFilterFn;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::prelude::*;

type Buffer = Arc<Mutex<Vec<u8>>>;

thread_local! {
    /// Where the lines logged on this thread go, while a [`Capture`] lives.
    static SINK: RefCell<Option<Buffer>> = const { RefCell::new(None) };
}

/// The lines logged on the thread that made it, in plain text (no colours), as the
/// default `tracing_subscriber::fmt()` writes them, from `INFO` up; until it is dropped.
#[must_use = "lines are captured while it lives"]
pub struct Capture {
    lines: Buffer,
    /// The capture this one interrupts, put back when it ends.
    outer: Option<Buffer>,
}

/// Starts capturing what this thread logs. In a `#[tokio::test]` on the current-thread
/// runtime that is everything the test's own tasks log.
pub fn capture() -> Capture {
    install();
    let lines = Buffer::default();
    let outer = SINK.with(|sink| sink.replace(Some(lines.clone())));
    Capture { lines, outer }
}

impl Capture {
    /// What was logged so far.
    pub fn text(&self) -> String {
        let lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        String::from_utf8_lossy(&lines).into_owned()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let outer = self.outer.take();
        SINK.with(|sink| *sink.borrow_mut() = outer);
    }
}

fn capturing() -> bool {
    SINK.with(|sink| sink.borrow().is_some())
}

/// The capturing thread's buffer, else nothing.
struct ThreadSink;

impl Write for ThreadSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        SINK.with(|sink| {
            if let Some(lines) = sink.borrow().as_ref() {
                lines
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .extend_from_slice(buf);
            }
        });
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for ThreadSink {
    type Writer = ThreadSink;
    fn make_writer(&'a self) -> ThreadSink {
        ThreadSink
    }
}

/// The process's one global subscriber. A subscriber some other code already installed
/// is kept: then nothing is captured, and the test that counts lines says so.
fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // "Sometimes", never "always": whether a line is wanted depends on the thread.
        let filter = DynFilterFn::new(|meta: &Metadata<'_>, _| {
            *meta.level() <= tracing::Level::INFO && capturing()
        })
        .with_callsite_filter(|meta: &'static Metadata<'static>| {
            if *meta.level() <= tracing::Level::INFO {
                Interest::sometimes()
            } else {
                Interest::never()
            }
        })
        .with_max_level_hint(LevelFilter::INFO);
        let layer = tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_writer(ThreadSink)
            .with_filter(filter);
        let _ = tracing_subscriber::registry().with(layer).try_init();
    });
}
