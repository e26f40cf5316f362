//! The `dnssec-warden` command. Everything below `main` returns typed errors; `anyhow`
//! lives only here, to print them.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

use dnssec_warden::cli;
use dnssec_warden::config::{DEFAULT_CONFIG_PATH, Settings};
use dnssec_warden::dnssec::fqdn;
use dnssec_warden::lab::{ProviderSim, SimOptions, demo};
use dnssec_warden::lifecycle::{Intent, Policy};
use dnssec_warden::logging::{self, LogFormat};

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
    /// The whole lifecycle of two zones in a simulated world on loopback (no setup).
    Demo {
        /// Leave the world running afterwards, to try `status` and `check` on it.
        #[arg(long)]
        keep: bool,
    },
    /// Pieces of the simulated world, to run on their own.
    Lab {
        #[command(subcommand)]
        what: LabCommand,
    },
}

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
    let cli = Cli::parse();
    let level = match cli.command {
        Command::Run | Command::Lab { .. } => "info",
        // The demo tells its story from the audit trail; the log would say it twice.
        Command::Demo { .. } => "error",
        _ => "warn",
    };
    logging::init(cli.log_format, level);
    match run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    match cli.command {
        Command::Run => runtime.block_on(async {
            cli::daemon::run(&cli.config).await?;
            Ok(ExitCode::SUCCESS)
        }),
        Command::Status { zone, json } => runtime.block_on(status(&cli.config, zone, json)),
        Command::Enable { zone } => runtime.block_on(async {
            let settings = Settings::load(&cli.config)?;
            println!(
                "{}",
                cli::intent::set(&settings, &zone, Intent::Enabled, false).await?
            );
            Ok(ExitCode::SUCCESS)
        }),
        Command::Disable {
            zone,
            ds_never_submitted,
        } => runtime.block_on(async {
            let settings = Settings::load(&cli.config)?;
            let line =
                cli::intent::set(&settings, &zone, Intent::Disabled, ds_never_submitted).await?;
            println!("{line}");
            Ok(ExitCode::SUCCESS)
        }),
        Command::History { zone, json } => runtime.block_on(history(&cli.config, &zone, json)),
        Command::CheckConfig => check_config(&cli.config),
        Command::Check { zone, json } => runtime.block_on(check(&cli.config, &zone, json)),
        Command::Demo { keep } => runtime.block_on(async {
            let mut out = std::io::stdout();
            demo::run(&mut out, keep).await?;
            Ok(ExitCode::SUCCESS)
        }),
        Command::Lab {
            what:
                LabCommand::Provider {
                    listen,
                    api_keys,
                    users,
                },
        } => runtime.block_on(lab_provider(listen, api_keys, users)),
    }
}

async fn status(path: &Path, zone: Option<String>, json: bool) -> anyhow::Result<ExitCode> {
    let settings = Settings::load(path)?;
    let store = cli::status::open_store(&settings).await?;
    let policy = Policy::from(&settings.timing);
    let zone = zone.map(|z| fqdn(&z)).transpose()?;
    let found = if json {
        cli::status::status_json(&store, zone.as_deref(), &policy)
            .await?
            .map(|v| serde_json::to_string_pretty(&v))
            .transpose()?
    } else {
        cli::status::status_text(&store, zone.as_deref(), &policy).await?
    };
    match found {
        Some(text) => {
            println!("{}", text.trim_end());
            Ok(ExitCode::SUCCESS)
        }
        None => anyhow::bail!(
            "{} is not known to dnssec-warden (list it in [zones] or run `enable`)",
            zone.unwrap_or_default()
        ),
    }
}

async fn history(path: &Path, zone: &str, json: bool) -> anyhow::Result<ExitCode> {
    let settings = Settings::load(path)?;
    let store = cli::status::open_store(&settings).await?;
    let zone = fqdn(zone)?;
    if json {
        let v = cli::status::history_json(&store, &zone).await?;
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", cli::status::history_text(&store, &zone).await?);
    }
    Ok(ExitCode::SUCCESS)
}

fn check_config(path: &std::path::Path) -> anyhow::Result<ExitCode> {
    let settings = Settings::load(path)?;
    if let Some(provider) = &settings.provider {
        provider
            .credentials
            .load()
            .with_context(|| format!("config {}: provider credentials", path.display()))?;
    }
    println!("{}: OK", path.display());
    Ok(ExitCode::SUCCESS)
}

async fn check(path: &std::path::Path, zone: &str, json: bool) -> anyhow::Result<ExitCode> {
    let settings = Settings::load(path)?;
    let report = dnssec_warden::dns::check::run(&settings, zone).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", dnssec_warden::dns::check::render_text(&report));
    }
    Ok(if report.consistent {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

async fn lab_provider(
    listen: SocketAddr,
    api_keys: Vec<String>,
    users: Vec<String>,
) -> anyhow::Result<ExitCode> {
    let users = users
        .iter()
        .map(|u| {
            u.split_once(':')
                .map(|(name, pw)| (name.to_string(), pw.to_string()))
                .with_context(|| format!("--user {u:?}: expected USER:PASSWORD"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    if api_keys.is_empty() && users.is_empty() {
        anyhow::bail!("give at least one --api-key or --user, or no request can authenticate");
    }
    if !listen.ip().is_loopback() {
        tracing::warn!(%listen, "the simulator is listening beyond loopback");
    }
    let sim = ProviderSim::start(
        listen,
        SimOptions {
            api_keys,
            users,
            ..SimOptions::default()
        },
    )
    .await
    .with_context(|| format!("cannot listen on {listen}"))?;
    println!("provider simulator listening on {}", sim.base_url());
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate() => {}
    }
    println!("provider simulator stopped");
    Ok(ExitCode::SUCCESS)
}

async fn terminate() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut sig) => {
            sig.recv().await;
        }
        Err(_) => std::future::pending().await,
    }
}
