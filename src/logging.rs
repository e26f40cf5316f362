//! Log set-up: human-readable lines by default, JSON for shipping, and no timestamps of
//! our own under systemd, where journald stamps every line already.

use tracing_subscriber::EnvFilter;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Installs the global subscriber at `default_level` (`info` for the daemon, `warn` for
/// one-shot commands); `RUST_LOG` overrides it. sqlx's own statement logging is kept to
/// errors: a slow-statement warning is not something an operator can act on.
pub fn init(format: LogFormat, default_level: &str) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("{default_level},sqlx=error")));
    let under_journald = std::env::var_os("JOURNAL_STREAM").is_some();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    // A second init (tests) is harmless: the first subscriber stays.
    let _ = match (format, under_journald) {
        (LogFormat::Json, _) => builder.json().flatten_event(true).try_init(),
        (LogFormat::Text, true) => builder.without_time().with_ansi(false).try_init(),
        (LogFormat::Text, false) => builder.try_init(),
    };
}
