//! The commands as `main` calls them: each drives its future to the end on the runtime
//! given, here in the library. An async fn's body is compiled again in every crate that
//! polls it; with `main` polling none, a fresh release build compiles the daemon once
//! (the binary's own step, last on the build's critical path, is `main` alone).

use std::io::Write;
use std::path::Path;

use tokio::runtime::Runtime;

use super::commands::{self, CommandError, Outcome};
use super::daemon::{self, DaemonError};
use crate::lifecycle::Intent;

/// `run`: the daemon, until a signal stops it.
pub fn run(rt: &Runtime, config: &Path) -> Result<(), DaemonError> {
    rt.block_on(daemon::run(config))
}

/// `status [ZONE] [--json]`, or with filters and a page.
pub fn status(
    rt: &Runtime,
    config: &Path,
    zone: Option<&str>,
    json: bool,
    filters: &commands::StatusFilters,
    out: &mut dyn Write,
) -> Result<Outcome, CommandError> {
    rt.block_on(commands::status(config, zone, json, filters, out))
}

/// `enable ZONE`, `disable ZONE [--ds-never-submitted]`.
pub fn intent(
    rt: &Runtime,
    config: &Path,
    zone: &str,
    intent: Intent,
    ds_never_submitted: bool,
    out: &mut dyn Write,
) -> Result<Outcome, CommandError> {
    rt.block_on(commands::intent(
        config,
        zone,
        intent,
        ds_never_submitted,
        out,
    ))
}

/// `move ZONE --to ACCOUNT`.
pub fn move_zone(
    rt: &Runtime,
    config: &Path,
    zone: &str,
    to: &str,
    out: &mut dyn Write,
) -> Result<Outcome, CommandError> {
    rt.block_on(commands::move_zone(config, zone, to, out))
}

/// `roll ZONE [--kind K] [--algorithm A] [--abort]`.
pub fn roll(
    rt: &Runtime,
    config: &Path,
    zone: &str,
    kind: Option<&str>,
    algorithm: Option<&str>,
    abort: bool,
    out: &mut dyn Write,
) -> Result<Outcome, CommandError> {
    rt.block_on(commands::roll(config, zone, kind, algorithm, abort, out))
}

/// `history ZONE [--json]`.
pub fn history(
    rt: &Runtime,
    config: &Path,
    zone: &str,
    json: bool,
    out: &mut dyn Write,
) -> Result<Outcome, CommandError> {
    rt.block_on(commands::history(config, zone, json, out))
}

/// `check-config`.
pub fn check_config(
    rt: &Runtime,
    config: &Path,
    out: &mut dyn Write,
) -> Result<Outcome, CommandError> {
    rt.block_on(commands::check_config(config, out))
}

/// `check ZONE [--json]`.
pub fn check(
    rt: &Runtime,
    config: &Path,
    zone: &str,
    json: bool,
    out: &mut dyn Write,
) -> Result<Outcome, CommandError> {
    rt.block_on(commands::check(config, zone, json, out))
}

/// `demo [--keep [--console-port N]]`.
#[cfg(feature = "demo")]
pub fn demo(
    rt: &Runtime,
    out: &mut dyn Write,
    keep: bool,
    console_port: Option<u16>,
) -> Result<(), super::demo::DemoError> {
    rt.block_on(super::demo::run(out, keep, console_port))
}

/// `lab provider`: the provider simulator, until a signal stops it.
#[cfg(feature = "demo")]
pub fn lab_provider(
    rt: &Runtime,
    listen: std::net::SocketAddr,
    api_keys: Vec<String>,
    users: &[String],
    out: &mut dyn Write,
) -> Result<(), super::lab::LabProviderError> {
    rt.block_on(super::lab::serve_provider(listen, api_keys, users, out))
}
