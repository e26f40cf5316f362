//! What the `dnssec-warden` subcommands do, apart from parsing arguments (in `main`).

pub mod daemon;
pub mod intent;
pub mod status;
