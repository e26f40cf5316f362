//! The one-shot commands: what each prints, and how it ends. `main` only parses the
//! arguments and turns the outcome into the exit status (one rule for every command):
//! 0 done (for `check`: the chain is consistent); 1 the answer is "no" or a run-time
//! failure; 2 what was given cannot be used (a zone name, the configuration file).

use std::io::{BufRead, Read, Write};
use std::path::Path;

use crate::cli::daemon::Prepared;
use crate::cli::status::{Listing, StatusError};
use crate::config::Settings;
use crate::lifecycle::Intent;
use crate::store::DatabaseSettings;
use crate::store::StoreError;
use crate::web::auth::{self, AuthError, Role};
use crate::zone_name::ZoneName;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How a command that ran ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Exit 0.
    Done,
    /// Exit 1 without an error: `check` found the chain inconsistent.
    No,
}

/// Why a command did not end well. Deliberately not a `std::error::Error` itself, so that
/// `?` turns any error into a run-time failure (exit 1) while the handlers name the
/// unusable inputs (exit 2) explicitly.
#[derive(Debug)]
pub enum CommandError {
    /// What was given cannot be used: exit 2.
    Unusable(BoxError),
    /// A run-time failure (database, provider, network): exit 1.
    Failed(BoxError),
    /// A zone the database does not know: exit 1.
    NotKnown(ZoneName),
}

impl CommandError {
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Unusable(_) => 2,
            Self::Failed(_) | Self::NotKnown(_) => 1,
        }
    }

    fn unusable(e: impl Into<BoxError>) -> Self {
        Self::Unusable(e.into())
    }
}

/// The error and every cause below it, as one line: `a: b: c`.
impl std::fmt::Display for CommandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let error: &(dyn std::error::Error + 'static) = match self {
            Self::Unusable(e) | Self::Failed(e) => e.as_ref(),
            Self::NotKnown(zone) => {
                return write!(
                    f,
                    "{zone} is not known to dnssec-warden (list it in [zones] or run `enable`)"
                );
            }
        };
        // A cause an error already quotes in its own text (`database: {0}`) is not said
        // again.
        let mut said = error.to_string();
        let mut cause = error.source();
        while let Some(e) = cause {
            let text = e.to_string();
            if !said.contains(&text) {
                said = format!("{said}: {text}");
            }
            cause = e.source();
        }
        f.write_str(&said)
    }
}

/// `?` on any other error: a run-time failure.
impl<E: std::error::Error + Send + Sync + 'static> From<E> for CommandError {
    fn from(e: E) -> Self {
        Self::Failed(Box::new(e))
    }
}

fn load(path: &Path) -> Result<Settings, CommandError> {
    Settings::load(path).map_err(CommandError::unusable)
}

fn zone_name(text: &str) -> Result<ZoneName, CommandError> {
    ZoneName::parse(text).map_err(CommandError::unusable)
}

/// `status`'s filters and page as the command line gives them, checked by [`status`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusFilters {
    /// `--state` (repeatable): a state's name or `unobserved`.
    pub states: Vec<String>,
    /// `--waiting-on` (repeatable): whom the wait is on.
    pub waiting_on: Vec<String>,
    /// `--account`: a configured provider account.
    pub account: Option<String>,
    /// `--after`: the last zone of the page before.
    pub after: Option<String>,
    /// `--limit`: zones a page.
    pub limit: Option<u32>,
}

/// `status [ZONE] [--json]`, or with filters and a page instead of a zone.
pub async fn status(
    path: &Path,
    zone: Option<&str>,
    json: bool,
    filters: &StatusFilters,
    out: &mut dyn Write,
) -> Result<Outcome, CommandError> {
    let zone = zone.map(zone_name).transpose()?;
    if zone.is_some() && *filters != StatusFilters::default() {
        return Err(CommandError::unusable(ZoneOrFilters));
    }
    let settings = load(path)?;
    let accounts: Vec<&str> = settings.providers.iter().map(|p| p.name.as_str()).collect();
    let listing = Listing::parse(
        &filters.states,
        &filters.waiting_on,
        filters.account.as_deref(),
        &accounts,
        filters.after.as_deref(),
        filters.limit,
    )
    .map_err(CommandError::unusable)?;
    let store = super::status::open_store(&settings).await?;
    let said = |e| match e {
        StatusError::Store(e) => StatusError::Store(store.explain(e)),
        e => e,
    };
    // Written as each row is read: 100,000 zones are tens of megabytes of JSON.
    let mut buffered = std::io::BufWriter::new(&mut *out);
    let policy = &settings.timing;
    let found = match (&zone, json) {
        (Some(zone), true) => {
            super::status::write_status_json(&store, Some(zone.as_str()), policy, &mut buffered)
                .await
        }
        (Some(zone), false) => {
            super::status::write_status_text(&store, Some(zone.as_str()), policy, &mut buffered)
                .await
        }
        (None, true) => super::status::write_listing_json(&store, &listing, policy, &mut buffered)
            .await
            .map(|()| true),
        (None, false) => super::status::write_listing_text(&store, &listing, policy, &mut buffered)
            .await
            .map(|()| true),
    }
    .map_err(said)?;
    buffered.flush()?;
    match (found, zone) {
        (true, _) => Ok(Outcome::Done),
        (false, Some(zone)) => Err(CommandError::NotKnown(zone)),
        (false, None) => Err(CommandError::Failed("no status".into())),
    }
}

/// `status ZONE` with filters: the zone is the whole answer, a filter would not apply.
#[derive(Debug, thiserror::Error)]
#[error(
    "status: give a zone or filters (--state, --waiting-on, --account, --after, --limit), not both"
)]
struct ZoneOrFilters;

/// `history ZONE [--json]`.
pub async fn history(
    path: &Path,
    zone: &str,
    json: bool,
    out: &mut dyn Write,
) -> Result<Outcome, CommandError> {
    let zone = zone_name(zone)?;
    let settings = load(path)?;
    let store = super::status::open_store(&settings).await?;
    let said = |e| store.explain(e);
    if store.zone(zone.as_str()).await.map_err(said)?.is_none() {
        return Err(CommandError::NotKnown(zone));
    }
    if json {
        let v = super::status::history_json(&store, zone.as_str())
            .await
            .map_err(said)?;
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        let text = super::status::history_text(&store, zone.as_str())
            .await
            .map_err(said)?;
        write!(out, "{text}")?;
    }
    Ok(Outcome::Done)
}

/// `enable ZONE` and `disable ZONE [--ds-never-submitted]`.
pub async fn intent(
    path: &Path,
    zone: &str,
    intent: Intent,
    ds_never_submitted: bool,
    out: &mut dyn Write,
) -> Result<Outcome, CommandError> {
    let zone = zone_name(zone)?;
    let settings = load(path)?;
    let line = super::intent::set(&settings, &zone, intent, ds_never_submitted).await?;
    writeln!(out, "{line}")?;
    Ok(Outcome::Done)
}

/// `move ZONE --to ACCOUNT`: a refusal is a run-time "no" (exit 1), as `enable`'s.
pub async fn move_zone(
    path: &Path,
    zone: &str,
    to: &str,
    out: &mut dyn Write,
) -> Result<Outcome, CommandError> {
    let zone = zone_name(zone)?;
    let settings = load(path)?;
    let line = super::intent::declare_move(&settings, &zone, to).await?;
    writeln!(out, "{line}")?;
    Ok(Outcome::Done)
}

/// `roll ZONE [--kind csk|ksk|zsk] [--algorithm 8|13|15] [--abort]`: a refusal is a
/// run-time "no" (exit 1), as `move`'s.
pub async fn roll(
    path: &Path,
    zone: &str,
    kind: Option<&str>,
    algorithm: Option<&str>,
    abort: bool,
    out: &mut dyn Write,
) -> Result<Outcome, CommandError> {
    use crate::intent::RollAsk;
    use crate::lifecycle::rollover::KeyKind;
    let zone = zone_name(zone)?;
    let settings = load(path)?;
    // clap allows only the values below.
    let ask = if abort {
        RollAsk::Abort
    } else {
        RollAsk::Start {
            kind: match kind {
                Some("ksk") => Some(KeyKind::Ksk),
                Some("zsk") => Some(KeyKind::Zsk),
                Some(_) => Some(KeyKind::Csk),
                None => None,
            },
            algorithm: algorithm.and_then(|a| a.parse().ok()),
        }
    };
    let line = super::intent::declare_roll(&settings, &zone, ask).await?;
    writeln!(out, "{line}")?;
    Ok(Outcome::Done)
}

/// `check-config`: every start-up check `run` makes (the same [`Prepared`]), without
/// starting anything; warnings go to standard error. A PostgreSQL database is also
/// connected to and its migrations compared with this binary's (a SQLite file is made
/// and migrated by `run` itself, so there is nothing to check before its first start).
pub async fn check_config(path: &Path, out: &mut dyn Write) -> Result<Outcome, CommandError> {
    let prepared = Prepared::load(path).map_err(CommandError::unusable)?;
    for warning in &prepared.warnings {
        eprintln!("warning: config {}: {warning}", path.display());
    }
    if let Some(Err(cause)) = &prepared.ipv6_route {
        eprintln!(
            "warning: config {}: {}",
            path.display(),
            crate::dns::net::ipv6::no_route(cause)
        );
    }
    check_accounts(path, &prepared).await?;
    if let DatabaseSettings::Postgres(pg) = &prepared.settings.database {
        let schema = crate::store::check_postgres(pg)
            .await
            .map_err(|e| match e {
                // The file's fault: a password source that cannot be read, a URL sqlx refuses.
                StoreError::Password { .. } | StoreError::Url { .. } => CommandError::unusable(e),
                e => CommandError::from(e),
            })?;
        let url = prepared.settings.database.describe();
        if schema.applied < schema.wanted {
            writeln!(
                out,
                "database {url}: reachable, schema {} of {}: `run` migrates it when it starts",
                schema.applied, schema.wanted
            )?;
        } else {
            writeln!(
                out,
                "database {url}: reachable, schema {} (current)",
                schema.applied
            )?;
        }
        if let Some(cluster) = &prepared.settings.cluster {
            writeln!(
                out,
                "cluster: this daemon is node {:?}, lease {}s: it shares the zones with any other daemon on this database",
                cluster.node,
                cluster.lease.as_secs_f64()
            )?;
        }
    }
    // An existing SQLite file a newer version wrote is refused here as `run` refuses
    // it; one not made yet is `run`'s to make.
    if let Some(file) = prepared.settings.database.sqlite_path()
        && file.exists()
    {
        match crate::store::Store::open_read_only(file).await {
            Err(e @ StoreError::SchemaAhead { .. }) => return Err(CommandError::from(e)),
            Err(StoreError::SchemaBehind {
                applied, wanted, ..
            }) => writeln!(
                out,
                "database {}: schema {applied} of {wanted}: `run` migrates it when it starts",
                file.display()
            )?,
            // Anything else (a directory the reader may not write its index in) is
            // `run`'s to say, with the daemon's rights.
            Err(_) | Ok(_) => {}
        }
    }
    writeln!(out, "{}: OK", path.display())?;
    Ok(Outcome::Done)
}

/// `check-config`'s question to each provider account that can answer it without a zone
/// (a PowerDNS `server_id`): a key the provider says is wrong fails the file, naming the
/// key of its block; a provider that cannot be asked now is a warning (`run` starts, and
/// says it daemon-wide once the provider answers).
async fn check_accounts(path: &Path, prepared: &Prepared) -> Result<(), CommandError> {
    for (name, checked) in prepared.provider.check_accounts().await {
        let block = prepared
            .settings
            .providers
            .iter()
            .find(|c| c.name == name)
            .map_or_else(|| format!("providers.{name}"), |c| c.block.clone());
        match checked {
            Ok(()) => {}
            Err(crate::provider::ProviderError::Misconfigured { key, message }) => {
                return Err(CommandError::unusable(
                    crate::config::ConfigError::Invalid {
                        file: path.to_path_buf(),
                        key: format!("{block}.{key}"),
                        message,
                    },
                ));
            }
            Err(e) => eprintln!(
                "warning: config {}: provider {name} could not be asked whether its configuration is right: {e}",
                path.display()
            ),
        }
    }
    Ok(())
}

/// `check ZONE [--json]`: `No` when the chain is not consistent.
pub async fn check(
    path: &Path,
    zone: &str,
    json: bool,
    out: &mut dyn Write,
) -> Result<Outcome, CommandError> {
    let zone = zone_name(zone)?;
    let settings = load(path)?;
    let report = super::check::run(&settings, zone.as_str())
        .await
        .map_err(CommandError::unusable)?;
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        write!(out, "{}", super::check::render_text(&report))?;
    }
    Ok(if report.consistent {
        Outcome::Done
    } else {
        Outcome::No
    })
}

/// `web-user NAME [--role ROLE]`: a line for the console's users file, `NAME:ROLE:PHC`,
/// the password read as one line of `input` (its line end dropped, nothing else: spaces
/// are part of it). What cannot be used exits 2 and says why, never quoting the password.
pub fn web_user(
    name: &str,
    role: &str,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> Result<Outcome, CommandError> {
    if !auth::valid_user_name(name) {
        return Err(CommandError::unusable(AuthError::Name));
    }
    let role: Role = role.parse().map_err(CommandError::unusable)?;
    // Past the longest password and its line end: enough to say it is too long.
    let mut line = Vec::new();
    (&mut *input)
        .take(auth::MAX_PASSWORD_BYTES as u64 + 3)
        .read_until(b'\n', &mut line)?;
    if line.is_empty() {
        return Err(CommandError::unusable(
            "no password on standard input (one line)",
        ));
    }
    let line = line.strip_suffix(b"\n").unwrap_or(&line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let password = std::str::from_utf8(line)
        .map_err(|_| CommandError::unusable("the password is not UTF-8"))?;
    let hash = auth::hash_password(password).map_err(|e| match e {
        AuthError::Random | AuthError::Hash(_) => CommandError::from(e),
        e => CommandError::unusable(e),
    })?;
    writeln!(out, "{name}:{role}:{hash}")?;
    Ok(Outcome::Done)
}
