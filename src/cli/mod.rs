//! What the `dnssec-warden` subcommands do, apart from parsing arguments (in `main`).

pub mod blocking;
pub mod check;
pub mod commands;
pub mod daemon;
#[cfg(feature = "demo")]
pub mod demo;
#[cfg(feature = "demo")]
pub mod demo_act2;
pub mod intent;
#[cfg(feature = "demo")]
pub mod lab;
pub mod package;
pub mod status;
