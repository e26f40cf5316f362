//! Log set-up: human-readable lines by default, JSON for shipping, and no timestamps of
//! our own under systemd, where journald stamps every line already.

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::prelude::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Installs the global subscriber at `default_level` (`INFO` for the daemon, `WARN` for
/// one-shot commands); `RUST_LOG` overrides it (`debug`, `dnssec_warden=debug,sqlx=warn`:
/// a level, and levels per target). sqlx's own statement logging is kept to errors: a
/// slow-statement warning is not something an operator can act on.
pub fn init(format: LogFormat, default_level: LevelFilter) {
    let from_env = std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| v.parse::<Targets>().ok());
    let filter = from_env.unwrap_or_else(|| {
        Targets::new()
            .with_default(default_level)
            .with_target("sqlx", LevelFilter::ERROR)
    });
    let under_journald = std::env::var_os("JOURNAL_STREAM").is_some();
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    let registry = tracing_subscriber::registry();
    // A second init (tests) is harmless: the first subscriber stays.
    let _ = match (format, under_journald) {
        (LogFormat::Json, _) => registry
            .with(layer.json().flatten_event(true).with_filter(filter))
            .try_init(),
        (LogFormat::Text, true) => registry
            .with(layer.without_time().with_ansi(false).with_filter(filter))
            .try_init(),
        (LogFormat::Text, false) => registry.with(layer.with_filter(filter)).try_init(),
    };
}
