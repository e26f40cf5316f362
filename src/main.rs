//! The `dnssec-warden` command. Everything below `main` returns typed errors; `anyhow`
//! lives only here, to print them.

use std::io::IsTerminal;
#[cfg(feature = "demo")]
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{CommandFactory, Parser, Subcommand};
use mimalloc::MiMalloc;
use tracing_subscriber::filter::LevelFilter;

use dnssec_warden::cli;
use dnssec_warden::cli::blocking;
use dnssec_warden::cli::commands::{CommandError, Outcome};
use dnssec_warden::config::DEFAULT_CONFIG_PATH;
use dnssec_warden::lifecycle::Intent;
use dnssec_warden::logging::{self, LogFormat};

/// mimalloc instead of glibc's malloc: `status` over a large account spent much of its
/// time in malloc, threads waiting on glibc's arena locks (rows are built on sqlx's
/// SQLite thread and freed on the runtime's), and the daemon's resident set is smaller
/// with it.
#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

#[derive(Parser)]
#[command(
    name = "dnssec-warden",
    version,
    about = "Switches DNSSEC on and off without taking a domain down"
)]
struct Cli {
    /// The configuration file.
    #[arg(long, global = true, default_value = DEFAULT_CONFIG_PATH)]
    config: PathBuf,
    /// Log line format.
    #[arg(long, global = true, value_enum, default_value = "text")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The daemon: watch every zone and move it through its lifecycle.
    Run,
    /// Where each zone stands, read from the database (works while the daemon runs).
    Status {
        zone: Option<String>,
        /// Print JSON: `{"zones":[…]}`, or the zone's object when a zone is given.
        #[arg(long)]
        json: bool,
        /// Only zones in this state (repeatable; `unobserved`: not observed yet).
        #[arg(long = "state", value_name = "STATE", conflicts_with = "zone",
              value_parser = clap::builder::PossibleValuesParser::new(cli::status::state_choices()))]
        states: Vec<String>,
        /// Only zones whose wait is on this party (repeatable), as WAITING FOR's `[on: …]`
        /// names it.
        #[arg(long = "waiting-on", value_name = "WHO", conflicts_with = "zone",
              value_parser = clap::builder::PossibleValuesParser::new(cli::status::WAITING_ON))]
        waiting_on: Vec<String>,
        /// Only zones the last look found at this provider account.
        #[arg(long, value_name = "NAME", conflicts_with = "zone")]
        account: Option<String>,
        /// At most N zones (a page; the next with `--after` the last zone shown).
        #[arg(long, value_name = "N", conflicts_with = "zone")]
        limit: Option<u32>,
        /// Only zones after this one in name order: the page after the one it ended.
        #[arg(long, value_name = "ZONE", conflicts_with = "zone")]
        after: Option<String>,
    },
    /// Ask for DNSSEC on for a zone (recorded and audited; the daemon acts on it).
    Enable { zone: String },
    /// Ask for DNSSEC off for a zone: DS removal first, then the TTL wait, then off.
    Disable {
        zone: String,
        /// From awaiting_ds only: the DS was never entered at the registrar, so waiting for
        /// its removal can be skipped (the parent is still checked).
        #[arg(long)]
        ds_never_submitted: bool,
    },
    /// Move an active zone to another provider account without going insecure (RFC 8901
    /// multi-signer): refused with the reason, and the insecure way, where either
    /// account cannot take it.
    Move {
        zone: String,
        /// The configured account ([providers.NAME]) to move the zone to.
        #[arg(long)]
        to: String,
    },
    /// Replace an active zone's signing keys at its provider without a moment resolvers
    /// could fail it (ZSK pre-publish, KSK/CSK double-DS through the registrar, or an
    /// algorithm rollover): refused with the reason where the provider's API exposes no
    /// keys. `status` shows the roll's phase and what it waits for.
    Roll {
        zone: String,
        /// The key to replace (default: the zone's entry-point key, a CSK or a KSK).
        #[arg(long, value_parser = ["csk", "ksk", "zsk"])]
        kind: Option<String>,
        /// Roll every key to this algorithm (RSA/SHA-256, ECDSA P-256, Ed25519).
        #[arg(long, value_parser = ["8", "13", "15"])]
        algorithm: Option<String>,
        /// Go back from the roll under way, where its phase allows it (refused with the
        /// reason otherwise).
        #[arg(long, conflicts_with_all = ["kind", "algorithm"])]
        abort: bool,
    },
    /// The audit trail of a zone.
    History {
        zone: String,
        #[arg(long)]
        json: bool,
    },
    /// Validate the configuration file (and that its secrets are readable).
    CheckConfig,
    /// One-shot view of a zone: provider, every parent and child server, verdicts.
    Check {
        zone: String,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a line for the web console's users file: NAME:ROLE:argon2id hash of the
    /// password read from standard input.
    WebUser {
        /// The user's name: 1 to 64 of A-Z a-z 0-9 . _ @ -
        name: String,
        /// viewer (looks) or operator (also enables and disables).
        #[arg(long, default_value = "viewer")]
        role: String,
    },
    /// The whole lifecycle of two zones in a simulated world on loopback (no setup).
    #[cfg(feature = "demo")]
    Demo {
        /// Leave the world running afterwards, to try `status` and `check` on it, and
        /// serve the web console on loopback for it with a one-time user (printed).
        #[arg(long)]
        keep: bool,
        /// The console's port with --keep (on 127.0.0.1); a free one by default.
        #[arg(long, requires = "keep", value_name = "PORT")]
        console_port: Option<u16>,
    },
    /// Pieces of the simulated world, to run on their own.
    #[cfg(feature = "demo")]
    Lab {
        #[command(subcommand)]
        what: LabCommand,
    },
}

#[cfg(feature = "demo")]
#[derive(Subcommand)]
enum LabCommand {
    /// The provider API simulator, until interrupted.
    Provider {
        #[arg(long, default_value = "127.0.0.1:8089")]
        listen: SocketAddr,
        /// An API key the simulator accepts (repeatable).
        #[arg(long = "api-key")]
        api_keys: Vec<String>,
        /// An account for the login call, as USER:PASSWORD (repeatable).
        #[arg(long = "user")]
        users: Vec<String>,
    },
}

fn main() -> ExitCode {
    if let Some(code) = package_files() {
        return code;
    }
    // Usage errors exit 2 (clap's own code, and the rule below).
    let cli = Cli::parse();
    let level = match cli.command {
        Command::Run => LevelFilter::INFO,
        #[cfg(feature = "demo")]
        Command::Lab { .. } => LevelFilter::INFO,
        // The demo tells its story from the audit trail; the log would say it twice.
        #[cfg(feature = "demo")]
        Command::Demo { .. } => LevelFilter::ERROR,
        _ => LevelFilter::WARN,
    };
    logging::init(cli.log_format, level);
    match run(cli) {
        Ok(code) => code,
        Err(Failure { code, error }) => {
            eprintln!("error: {}", said_once(&error));
            ExitCode::from(code)
        }
    }
}

/// The error and its causes as one line, `a: b: c`, without a cause the text before it
/// already quotes (`database: {0}` and then `{0}` itself as the source).
fn said_once(error: &anyhow::Error) -> String {
    let mut said = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if said.is_empty() {
            said = text;
        } else if !said.contains(&text) {
            said = format!("{said}: {text}");
        }
    }
    said
}

/// Packaging only (`debian/build.sh`): `dnssec-warden __package-files DIR` writes the man
/// pages, the shell completions and the package's config file (`cli::package`). Not a
/// clap subcommand, so it is in no help, man page or completion.
fn package_files() -> Option<ExitCode> {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    let [command, dir] = args.as_slice() else {
        return None;
    };
    if command != "__package-files" {
        return None;
    }
    Some(match cli::package::write(Cli::command(), dir.as_ref()) {
        Ok(written) => {
            written.iter().for_each(|p| println!("{}", p.display()));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_FAILED)
        }
    })
}

/// The exit status (see `cli::commands`): 0 done; 1 "no" or a run-time failure; 2 what
/// was given cannot be used (clap's usage errors exit 2 as well).
const EXIT_FAILED: u8 = 1;
const EXIT_UNUSABLE: u8 = 2;

/// An error with its exit status; `?` on any other error means status 1.
struct Failure {
    code: u8,
    error: anyhow::Error,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(error: E) -> Self {
        Self {
            code: EXIT_FAILED,
            error: error.into(),
        }
    }
}

fn unusable(error: impl Into<anyhow::Error>) -> Failure {
    Failure {
        code: EXIT_UNUSABLE,
        error: error.into(),
    }
}

/// A one-shot command's outcome as the process ends it.
fn ended(outcome: Result<Outcome, CommandError>) -> Result<ExitCode, Failure> {
    match outcome {
        Ok(Outcome::Done) => Ok(ExitCode::SUCCESS),
        Ok(Outcome::No) => Ok(ExitCode::from(EXIT_FAILED)),
        Err(e) => Err(Failure {
            code: e.exit_code(),
            error: anyhow::anyhow!("{e}"),
        }),
    }
}

fn run(cli: Cli) -> Result<ExitCode, Failure> {
    let rt = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let config = cli.config.as_path();
    let out = &mut std::io::stdout();
    match cli.command {
        Command::Run => {
            blocking::run(&rt, config)
                .map_err(|e| if e.is_config() { unusable(e) } else { e.into() })?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Status {
            zone,
            json,
            states,
            waiting_on,
            account,
            limit,
            after,
        } => {
            let filters = cli::commands::StatusFilters {
                states,
                waiting_on,
                account,
                after,
                limit,
            };
            ended(blocking::status(
                &rt,
                config,
                zone.as_deref(),
                json,
                &filters,
                out,
            ))
        }
        Command::Enable { zone } => ended(blocking::intent(
            &rt,
            config,
            &zone,
            Intent::Enabled,
            false,
            out,
        )),
        Command::Disable {
            zone,
            ds_never_submitted,
        } => ended(blocking::intent(
            &rt,
            config,
            &zone,
            Intent::Disabled,
            ds_never_submitted,
            out,
        )),
        Command::Move { zone, to } => ended(blocking::move_zone(&rt, config, &zone, &to, out)),
        Command::Roll {
            zone,
            kind,
            algorithm,
            abort,
        } => ended(blocking::roll(
            &rt,
            config,
            &zone,
            kind.as_deref(),
            algorithm.as_deref(),
            abort,
            out,
        )),
        Command::History { zone, json } => ended(blocking::history(&rt, config, &zone, json, out)),
        Command::CheckConfig => ended(blocking::check_config(&rt, config, out)),
        Command::Check { zone, json } => ended(blocking::check(&rt, config, &zone, json, out)),
        Command::WebUser { name, role } => {
            let stdin = std::io::stdin();
            // Typed at a terminal it shows as typed: piped in, it is on no screen.
            if stdin.is_terminal() {
                eprint!("password for {name}: ");
            }
            ended(cli::commands::web_user(
                &name,
                &role,
                &mut stdin.lock(),
                out,
            ))
        }
        #[cfg(feature = "demo")]
        Command::Demo { keep, console_port } => {
            blocking::demo(&rt, out, keep, console_port)?;
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(feature = "demo")]
        Command::Lab {
            what:
                LabCommand::Provider {
                    listen,
                    api_keys,
                    users,
                },
        } => match blocking::lab_provider(&rt, listen, api_keys, &users, out) {
            Ok(()) => Ok(ExitCode::SUCCESS),
            Err(e) if e.is_usage() => Err(unusable(e)),
            Err(e) => Err(e.into()),
        },
    }
}
