//! `status` and `history`: read the database (works while the daemon runs). They open
//! it read-only and never create it: "no database at PATH" before the daemon's first run
//! (SQLite), a schema the daemon has not migrated yet refused (both stores).

use std::collections::HashMap;
use std::fmt::Write;

use serde::Serialize;
use serde_json::{Value, json};

use crate::config::Settings;
use crate::dns::DelegationVerdict;
use crate::lifecycle::waiting::{Waiting, roll_line};
use crate::lifecycle::{Clock, Policy, State, SystemClock, Timestamp};
use crate::store::{
    AlertRow, DaemonAlertRow, EventRow, Store, StoreError, ZoneFilter, ZoneRow, host_ipv6,
};
use crate::zone_name::ZoneName;

/// `status` could not read the database, or not write its answer.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot write the status: {0}")]
    Output(#[from] std::io::Error),
}

/// Who a zone's wait can be on, as `status` names it (`waiting_on`): the parties of a
/// hold, `registry` (acting on the child's CDS) and `host` (this host's IPv6).
pub const WAITING_ON: [&str; 8] = [
    "daemon",
    "provider",
    "registrar",
    "registry",
    "ttl",
    "operator",
    "nobody",
    "host",
];

/// `--state`'s name for a zone not observed yet (its state is null in `--json`).
pub const UNOBSERVED: &str = "unobserved";

/// The names `--state` takes: every state, then [`UNOBSERVED`].
pub fn state_choices() -> Vec<&'static str> {
    State::ALL
        .iter()
        .map(|s| s.as_str())
        .chain([UNOBSERVED])
        .collect()
}

/// A value of `status`'s filters that names nothing it knows, with the choices.
#[derive(Debug, thiserror::Error)]
pub enum ListingError {
    #[error("--state {value:?}: no such state (one of {})", state_choices().join(", "))]
    State { value: String },
    #[error("--waiting-on {value:?}: no such party (one of {})", WAITING_ON.join(", "))]
    WaitingOn { value: String },
    #[error("--account {value:?}: no such provider account in the configuration (one of {})", .choices.join(", "))]
    Account { value: String, choices: Vec<String> },
    #[error("--after {value:?}: {error}")]
    After {
        value: String,
        error: crate::zone_name::ZoneNameError,
    },
    #[error("--limit 0: a page holds at least one zone")]
    NoLimit,
}

/// Which zones `status` lists, a page at a time: the state and the account filtered in
/// the store's query, whom the wait is on decided per row (a wait is worked out from the
/// facts and the settings, not stored), in name order from after `--after`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    pub filter: ZoneFilter,
    /// Only zones whose wait is on one of these ([`WAITING_ON`]); any if empty.
    pub waiting_on: Vec<&'static str>,
}

impl Listing {
    /// The listing the command line asks for, every value checked: a state or a party
    /// by its name, an account among `accounts` (the configured ones), `after` a zone
    /// name (normalised as every zone name is), `limit` at least 1.
    pub fn parse(
        states: &[String],
        waiting_on: &[String],
        account: Option<&str>,
        accounts: &[&str],
        after: Option<&str>,
        limit: Option<u32>,
    ) -> Result<Self, ListingError> {
        let states = states
            .iter()
            .map(|value| {
                if value == UNOBSERVED {
                    return Ok(None);
                }
                value
                    .parse::<State>()
                    .map(Some)
                    .map_err(|_| ListingError::State {
                        value: value.clone(),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let waiting_on = waiting_on
            .iter()
            .map(|value| {
                WAITING_ON
                    .iter()
                    .find(|on| **on == value.as_str())
                    .copied()
                    .ok_or_else(|| ListingError::WaitingOn {
                        value: value.clone(),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(value) = account
            && !accounts.contains(&value)
        {
            return Err(ListingError::Account {
                value: value.to_string(),
                choices: accounts.iter().map(|a| a.to_string()).collect(),
            });
        }
        let after = after
            .map(|value| {
                ZoneName::parse(value)
                    .map(|z| z.as_str().to_string())
                    .map_err(|error| ListingError::After {
                        value: value.to_string(),
                        error,
                    })
            })
            .transpose()?;
        if limit == Some(0) {
            return Err(ListingError::NoLimit);
        }
        Ok(Self {
            filter: ZoneFilter {
                states,
                account: account.map(str::to_string),
                after,
                limit,
            },
            waiting_on,
        })
    }

    /// Whether anything but every zone is asked for.
    fn narrows(&self) -> bool {
        *self != Self::default()
    }

    /// Lists the zones it admits to `each` with their wait, until `each` answers false
    /// or the limit is reached; the last zone listed, if the limit was reached.
    async fn each<E: From<StoreError>>(
        &self,
        store: &Store,
        policy: &Policy,
        ipv6: Option<&str>,
        each: &mut impl FnMut(ZoneRow, Waiting) -> Result<(), E>,
    ) -> Result<Option<String>, E> {
        // The wait is judged here, so the query cannot stop at the limit itself.
        let mut query = self.filter.clone();
        if !self.waiting_on.is_empty() {
            query.limit = None;
        }
        let mut listed: u32 = 0;
        let mut last = None;
        store
            .each_zone_listed::<E>(&query, &mut |row| {
                let waiting = row.waiting(policy, ipv6);
                if !self.waiting_on.is_empty() && !self.waiting_on.contains(&waiting.on) {
                    return Ok(true);
                }
                let name = row.zone.name.as_str().to_string();
                each(row, waiting)?;
                listed += 1;
                let more = self.filter.limit.is_none_or(|limit| listed < limit);
                if !more {
                    last = Some(name);
                }
                Ok(more)
            })
            .await?;
        Ok(last)
    }
}

/// The database named by the settings, for reading only.
pub async fn open_store(settings: &Settings) -> Result<Store, StoreError> {
    Store::connect_read_only(&settings.database).await
}

/// An open alert as `status --json` shows it. Every object of `status --json` is written
/// with its keys in alphabetical order (the order of the fields here).
#[derive(Serialize)]
struct AlertJson<'a> {
    kind: &'static str,
    message: &'a str,
    severity: &'static str,
    since: String,
}

impl<'a> From<&'a AlertRow> for AlertJson<'a> {
    fn from(a: &'a AlertRow) -> Self {
        Self {
            kind: a.kind.as_str(),
            message: &a.message,
            severity: a.severity.as_str(),
            since: a.opened_at.to_string(),
        }
    }
}

/// A daemon-wide condition as `status --json` shows it (`"daemon"`): open since `since`,
/// `alerting` once it has lasted long enough to alert.
#[derive(Serialize)]
struct DaemonJson<'a> {
    alerting: bool,
    kind: &'static str,
    message: &'a str,
    scope: &'a str,
    severity: &'static str,
    since: String,
}

impl<'a> DaemonJson<'a> {
    fn new(a: &'a DaemonAlertRow, now: Timestamp) -> Self {
        Self {
            alerting: a.alert_at <= now,
            kind: a.kind.as_str(),
            message: &a.message,
            scope: &a.scope,
            severity: a.severity.as_str(),
            since: a.opened_at.to_string(),
        }
    }
}

/// The status table's lines for the daemon's own conditions, above the zones.
fn daemon_lines(
    out: &mut dyn std::io::Write,
    open: &[DaemonAlertRow],
    now: Timestamp,
) -> std::io::Result<()> {
    for a in open {
        let host = if a.scope.is_empty() {
            String::new()
        } else {
            format!(" on {}", a.scope)
        };
        writeln!(
            out,
            "DAEMON{host}: {} ({}{}) since {}: {}",
            a.kind,
            a.severity.as_str(),
            if a.alert_at <= now { ", alerting" } else { "" },
            a.opened_at,
            a.message
        )?;
    }
    Ok(())
}

/// Open alerts by zone: looked up once per zone, not searched for.
fn by_zone(alerts: &[AlertRow]) -> HashMap<&str, Vec<&AlertRow>> {
    let mut map: HashMap<&str, Vec<&AlertRow>> = HashMap::new();
    for a in alerts {
        map.entry(a.zone.as_str()).or_default().push(a);
    }
    map
}

#[derive(Serialize)]
struct LeaseJson<'a> {
    epoch: i64,
    holder: &'a str,
    since: String,
    until: String,
}

/// One zone of `status --json`, serialized straight to the output (no JSON tree is built
/// for 100,000 zones).
#[derive(Serialize)]
struct ZoneJson<'a> {
    alerts: Vec<AlertJson<'a>>,
    /// One zone's status only: the daemon's own conditions, which hold it too.
    #[serde(skip_serializing_if = "Option::is_none")]
    daemon: Option<Vec<DaemonJson<'a>>>,
    delegation: &'static str,
    /// The key to enter in the DNSKEY form some registrars ask for, exactly when
    /// `ds_to_enter` is shown. (Fields in the order `serde_json` sorts them.)
    dnskey_to_enter: Option<&'a str>,
    ds: Option<&'a str>,
    ds_to_enter: Option<&'a str>,
    evidence: Option<&'a str>,
    intent: &'static str,
    /// A key rollover in progress (DESIGN.md section 2, "Key rollovers"), if any: its
    /// wait is the zone's `waiting_for`, `waiting_on` and `until`. Left out without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    key_roll: Option<RollJson>,
    /// The last full look (every address asked).
    last_observed: Option<String>,
    /// A later sampled look that agreed with it (DESIGN.md section 4), if any.
    last_sampled: Option<String>,
    lease: Option<LeaseJson<'a>>,
    next_check: String,
    /// The next key roll `[rollover]` makes of the zone (its key's age past its
    /// kind's lifetime and the zone's spread offset); null where no lifetime applies
    /// (none configured, no key age known yet, a roll under way).
    next_roll: Option<NextRollJson>,
    /// The way a DS reaches the parent, as last resolved (`lifecycle::parent_way`).
    parent_path: Option<&'a crate::lifecycle::parent_way::ParentPath>,
    /// The configured provider account holding the zone at the last look.
    provider: Option<&'a str>,
    provider_error: Option<&'a str>,
    provider_ns: Option<&'a [String]>,
    /// Why `[rollover]` schedules no roll of the zone now though one is due (its
    /// account at `max_concurrent_per_account`, a plan refused) or ever (no key API).
    roll_waiting: Option<&'a str>,
    /// A signed move in progress (DESIGN.md section 2, "Signed moves"), if any.
    signed_move: Option<MoveJson<'a>>,
    since: String,
    state: Option<&'static str>,
    until: Option<String>,
    waiting_for: String,
    waiting_on: &'static str,
    /// The provider accounts the wait is on, where known (a signed move's side).
    waiting_on_accounts: Vec<String>,
    zone: &'a str,
}

/// A signed move as `status --json` shows it: the accounts and the phase (its wait is
/// the zone's `waiting_for`).
#[derive(Serialize)]
struct MoveJson<'a> {
    phase: &'static str,
    source: &'a str,
    target: &'a str,
}

/// Why the policy's roll of the zone waits, while no roll is under way.
fn roll_waiting(z: &crate::lifecycle::Zone) -> Option<&str> {
    if z.facts.key_roll.is_some() {
        return None;
    }
    z.facts.key_ages.as_ref()?.waiting.as_deref()
}

/// The next roll `[rollover]` makes: when, and of which key.
#[derive(Serialize)]
struct NextRollJson {
    at: String,
    kind: &'static str,
}

/// The next roll `[rollover]` makes of the zone as this configuration says it, none while
/// a roll is under way.
fn next_roll(
    z: &crate::lifecycle::Zone,
    policy: &Policy,
) -> Option<crate::lifecycle::keys::NextRoll> {
    if z.facts.key_roll.is_some() {
        return None;
    }
    crate::lifecycle::roll_policy::next_roll_of(z, &policy.rollover)
}

/// A key rollover as `status --json` shows it.
#[derive(Serialize)]
struct RollJson {
    aborted: bool,
    algorithm: u8,
    method: &'static str,
    phase: &'static str,
}

fn zone_json<'a>(
    row: &'a ZoneRow,
    alerts: &[&'a AlertRow],
    policy: &Policy,
    lease_now: Timestamp,
    waiting: Waiting,
) -> ZoneJson<'a> {
    let z = &row.zone;
    ZoneJson {
        alerts: alerts.iter().map(|a| AlertJson::from(*a)).collect(),
        daemon: None,
        delegation: z.facts.delegation.verdict.map_or("unknown", |d| d.as_str()),
        dnskey_to_enter: z.facts.lifecycle.dnskey_to_enter.as_deref(),
        ds: z.facts.lifecycle.ds_line.as_deref(),
        ds_to_enter: z.facts.lifecycle.ds_to_enter.as_deref(),
        evidence: row.evidence().0,
        intent: z.intent.as_str(),
        key_roll: z.facts.key_roll.as_ref().map(|r| RollJson {
            aborted: r.aborted,
            algorithm: r.algorithm,
            method: r.method.name(),
            phase: r.phase.name(),
        }),
        last_observed: row.last_observed_at.map(|t| t.to_string()),
        last_sampled: row
            .sampled_at
            .filter(|s| row.last_observed_at.is_none_or(|full| *s > full))
            .map(|t| t.to_string()),
        lease: row.current_lease(lease_now).map(|l| LeaseJson {
            epoch: l.epoch,
            holder: &l.holder,
            since: l.since.to_string(),
            until: l.until.to_string(),
        }),
        next_check: row.next_check_at.to_string(),
        next_roll: next_roll(z, policy).map(|n| NextRollJson {
            at: n.at.to_string(),
            kind: n.kind.name(),
        }),
        parent_path: z.facts.parent_way.ds_path.as_ref(),
        provider: row.account(),
        provider_error: row.provider_error(),
        provider_ns: z.facts.delegation.provider_ns.as_deref(),
        roll_waiting: roll_waiting(z),
        signed_move: z.facts.signed_move.as_ref().map(|m| MoveJson {
            phase: m.phase.name(),
            source: &m.source,
            target: &m.target,
        }),
        since: z.since.to_string(),
        state: z.state.map(State::as_str),
        until: waiting.until.map(|t| t.to_string()),
        waiting_for: waiting.what,
        waiting_on: waiting.on,
        waiting_on_accounts: waiting.accounts,
        zone: z.name.as_str(),
    }
}

/// `status --json`: `{"zones":[…]}`; with a zone, that zone's object alone (`None`: no
/// such zone).
pub async fn status_json(
    store: &Store,
    zone: Option<&str>,
    policy: &Policy,
) -> Result<Option<Value>, StatusError> {
    let mut out = Vec::new();
    if !write_status_json(store, zone, policy, &mut out).await? {
        return Ok(None);
    }
    Ok(Some(
        serde_json::from_slice(&out).map_err(std::io::Error::from)?,
    ))
}

/// Writes `status --json` (pretty-printed) to `out`; false when `zone` is not known.
pub async fn write_status_json(
    store: &Store,
    zone: Option<&str>,
    policy: &Policy,
    out: &mut dyn std::io::Write,
) -> Result<bool, StatusError> {
    let listing = Listing::default();
    let which = zone.map_or(Which::Listing(&listing), Which::Zone);
    json_to(store, which, policy, out).await
}

/// Writes `status --json` of the zones `listing` admits, one zone at a time as each row
/// is read: `{"daemon": [...], "zones": [...]}`.
pub async fn write_listing_json(
    store: &Store,
    listing: &Listing,
    policy: &Policy,
    out: &mut dyn std::io::Write,
) -> Result<(), StatusError> {
    json_to(store, Which::Listing(listing), policy, out)
        .await
        .map(|_| ())
}

/// One zone, or a listing.
#[derive(Clone, Copy)]
enum Which<'a> {
    Zone(&'a str),
    Listing(&'a Listing),
}

impl Which<'_> {
    fn zone(&self) -> Option<&str> {
        match self {
            Which::Zone(name) => Some(name),
            Which::Listing(_) => None,
        }
    }
}

async fn json_to(
    store: &Store,
    which: Which<'_>,
    policy: &Policy,
    out: &mut dyn std::io::Write,
) -> Result<bool, StatusError> {
    let alerts = store.open_alerts(which.zone()).await?;
    let alerts = by_zone(&alerts);
    let daemon = store.daemon_alerts_open().await?;
    let ipv6 = host_ipv6(&daemon);
    let now = SystemClock.now();
    // Leases are in the database's clock, which may differ from this host's.
    let lease_now = store.database_now().await?.unwrap_or(now);
    let daemon_json = || daemon.iter().map(|a| DaemonJson::new(a, now)).collect();
    let of = |row: &ZoneRow| -> Vec<&AlertRow> {
        alerts
            .get(row.zone.name.as_str())
            .cloned()
            .unwrap_or_default()
    };
    let written = match which {
        Which::Zone(name) => match store.zone(name).await? {
            Some(row) => {
                let open = of(&row);
                let waiting = row.waiting(policy, ipv6);
                let mut json = zone_json(&row, &open, policy, lease_now, waiting);
                json.daemon = Some(daemon_json());
                serde_json::to_writer_pretty(&mut *out, &json)
            }
            None => return Ok(false),
        },
        Which::Listing(listing) => {
            // `{"daemon": [...], "zones": [...]}` pretty-printed as serde_json prints it
            // whole, written one zone at a time: each zone's object indented two levels.
            let head = serde_json::json!({ "daemon": daemon_json_value(&daemon, now) });
            let head = serde_json::to_string_pretty(&head).map_err(std::io::Error::from)?;
            // `{\n  "daemon": …\n}` without its closing line, then the zones.
            out.write_all(head.trim_end_matches('}').trim_end().as_bytes())?;
            out.write_all(b",\n  \"zones\": [")?;
            let mut first = true;
            listing
                .each::<StatusError>(store, policy, ipv6, &mut |row, waiting| {
                    let open = of(&row);
                    out.write_all(if first { b"\n    " } else { b",\n    " })?;
                    first = false;
                    let json = zone_json(&row, &open, policy, lease_now, waiting);
                    let mut indented =
                        serde_json::Serializer::with_formatter(&mut *out, Indented::new(2));
                    json.serialize(&mut indented)
                        .map_err(std::io::Error::from)?;
                    Ok(())
                })
                .await?;
            out.write_all(if first { b"]\n}" } else { b"\n  ]\n}" })?;
            Ok(())
        }
    };
    written.map_err(std::io::Error::from)?;
    writeln!(out)?;
    Ok(true)
}

/// serde_json's pretty printing (two spaces a level) of a value that sits `depth`
/// levels deep in a document: written straight to the output, with no copy to indent.
struct Indented {
    depth: usize,
    has_value: bool,
}

impl Indented {
    fn new(depth: usize) -> Self {
        Self {
            depth,
            has_value: false,
        }
    }

    fn indent<W: ?Sized + std::io::Write>(&self, out: &mut W) -> std::io::Result<()> {
        for _ in 0..self.depth {
            out.write_all(b"  ")?;
        }
        Ok(())
    }
}

impl serde_json::ser::Formatter for Indented {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, out: &mut W) -> std::io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        out.write_all(b"[")
    }

    fn end_array<W: ?Sized + std::io::Write>(&mut self, out: &mut W) -> std::io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            out.write_all(b"\n")?;
            self.indent(out)?;
        }
        out.write_all(b"]")
    }

    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        out: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        out.write_all(if first { b"\n" } else { b",\n" })?;
        self.indent(out)
    }

    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, _: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + std::io::Write>(&mut self, out: &mut W) -> std::io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        out.write_all(b"{")
    }

    fn end_object<W: ?Sized + std::io::Write>(&mut self, out: &mut W) -> std::io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            out.write_all(b"\n")?;
            self.indent(out)?;
        }
        out.write_all(b"}")
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        out: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        out.write_all(if first { b"\n" } else { b",\n" })?;
        self.indent(out)
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(
        &mut self,
        out: &mut W,
    ) -> std::io::Result<()> {
        out.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, _: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

fn daemon_json_value(open: &[DaemonAlertRow], now: Timestamp) -> Value {
    serde_json::to_value(
        open.iter()
            .map(|a| DaemonJson::new(a, now))
            .collect::<Vec<_>>(),
    )
    .unwrap_or_default()
}

/// The status table (`None`: no such zone).
pub async fn status_text(
    store: &Store,
    zone: Option<&str>,
    policy: &Policy,
) -> Result<Option<String>, StatusError> {
    let mut out = Vec::new();
    if !write_status_text(store, zone, policy, &mut out).await? {
        return Ok(None);
    }
    Ok(Some(String::from_utf8_lossy(&out).into_owned()))
}

/// Writes the status table to `out`, one zone at a time; false when `zone` is not known.
pub async fn write_status_text(
    store: &Store,
    zone: Option<&str>,
    policy: &Policy,
    out: &mut dyn std::io::Write,
) -> Result<bool, StatusError> {
    let listing = Listing::default();
    let which = zone.map_or(Which::Listing(&listing), Which::Zone);
    text_to(store, which, policy, out).await
}

/// Writes the status table of the zones `listing` admits, one zone at a time as each row
/// is read; where the page is full, how to ask for the next.
pub async fn write_listing_text(
    store: &Store,
    listing: &Listing,
    policy: &Policy,
    out: &mut dyn std::io::Write,
) -> Result<(), StatusError> {
    text_to(store, Which::Listing(listing), policy, out)
        .await
        .map(|_| ())
}

async fn text_to(
    store: &Store,
    which: Which<'_>,
    policy: &Policy,
    out: &mut dyn std::io::Write,
) -> Result<bool, StatusError> {
    let alerts = store.open_alerts(which.zone()).await?;
    let alerts = by_zone(&alerts);
    let now = SystemClock.now();
    // Leases are in the database's clock, which may differ from this host's.
    let lease_now = store.database_now().await?.unwrap_or(now);
    let daemon = store.daemon_alerts_open().await?;
    let ipv6 = host_ipv6(&daemon);
    daemon_lines(&mut *out, &daemon, now)?;
    writeln!(
        out,
        "{:<ZONE_WIDTH$} {:<STATE_WIDTH$} {:<10} {:<22} WAITING FOR",
        "ZONE", "STATE", "INTENT", "SINCE"
    )?;
    let mut any = false;
    let mut line = |row: ZoneRow, waiting: Waiting| -> Result<(), StatusError> {
        any = true;
        let open = alerts
            .get(row.zone.name.as_str())
            .map_or(&[][..], Vec::as_slice);
        zone_lines(&mut *out, &row, &waiting, open, policy, (now, lease_now))?;
        Ok(())
    };
    let (narrowed, last) = match which {
        Which::Zone(name) => match store.zone(name).await? {
            Some(row) => {
                let waiting = row.waiting(policy, ipv6);
                line(row, waiting)?;
                (false, None)
            }
            None => return Ok(false),
        },
        Which::Listing(listing) => (
            listing.narrows(),
            listing.each(store, policy, ipv6, &mut line).await?,
        ),
    };
    if !any && narrowed {
        writeln!(out, "(no zones match)")?;
    } else if !any {
        writeln!(
            out,
            "(no zones yet: list them in [zones] or run `dnssec-warden enable ZONE`)"
        )?;
    }
    if let Some(last) = last {
        writeln!(out, "(a page ends here; the next: --after {last})")?;
    }
    Ok(true)
}

/// The ZONE column's width: most names fit. A longer one (a name may have 253
/// characters) is written whole on a line of its own, and its row follows with the column
/// blank, so that the columns never shift. Whole rather than cut with an ellipsis: an
/// operator greps and copies zone names, and a cut name matches neither (two long names
/// with one beginning would even read the same); `grep -A1 NAME` gives its row.
const ZONE_WIDTH: usize = 28;
/// The STATE column's width: the longest state name and a space.
const STATE_WIDTH: usize = 20;

/// The zone's cell of its row: the name, or nothing once it was written on a line of
/// its own (see [`ZONE_WIDTH`]).
fn zone_cell(out: &mut dyn std::io::Write, name: &str) -> std::io::Result<String> {
    if name.chars().count() > ZONE_WIDTH {
        writeln!(out, "{name}")?;
        return Ok(String::new());
    }
    Ok(name.to_string())
}

/// One zone's lines of the status table.
fn zone_lines(
    out: &mut dyn std::io::Write,
    row: &ZoneRow,
    w: &Waiting,
    alerts: &[&AlertRow],
    policy: &Policy,
    (now, lease_now): (Timestamp, Timestamp),
) -> std::io::Result<()> {
    let z = &row.zone;
    let until = w
        .until
        .map(|t| format!(" (until {t}{})", if t < now { ", overdue" } else { "" }))
        .unwrap_or_default();
    // The provider waited on, by the name of the account the wait is on.
    let on = w.party();
    let cell = zone_cell(out, z.name.as_ref())?;
    writeln!(
        out,
        "{:<ZONE_WIDTH$} {:<STATE_WIDTH$} {:<10} {:<22} {} [on: {on}]{}",
        cell,
        z.state.map_or("(not observed yet)", State::as_str),
        z.intent.as_str(),
        z.since.to_string(),
        w.what,
        until
    )?;
    if let Some(error) = row.provider_error() {
        match row.account() {
            Some(name) => writeln!(out, "{:<ZONE_WIDTH$} PROVIDER {name}: {error}", "")?,
            None => writeln!(out, "{:<ZONE_WIDTH$} PROVIDER: {error}", "")?,
        }
    }
    if let Some(m) = &z.facts.signed_move {
        writeln!(
            out,
            "{:<ZONE_WIDTH$} SIGNED MOVE: {} -> {}, phase {}",
            "",
            m.source,
            m.target,
            m.phase.name()
        )?;
    }
    if let Some(r) = &z.facts.key_roll {
        // Its wait is the zone's, on the line above.
        writeln!(out, "{:<ZONE_WIDTH$} KEY ROLL: {}", "", roll_line(r))?;
    } else if let Some(why) = roll_waiting(z) {
        writeln!(out, "{:<ZONE_WIDTH$} KEY ROLL: {why}", "")?;
    } else if let Some(n) = next_roll(z, policy) {
        writeln!(
            out,
            "{:<ZONE_WIDTH$} KEY ROLL: next: the {} roll on {}{} (rollover.{})",
            "",
            n.kind.name(),
            n.at,
            if n.at <= now { ", due" } else { "" },
            n.kind.name()
        )?;
    }
    if let Some(l) = row.current_lease(lease_now) {
        writeln!(
            out,
            "{:<ZONE_WIDTH$} HELD BY: {} since {} (epoch {})",
            "", l.holder, l.since, l.epoch
        )?;
    }
    if let (Some("insecure"), why) = row.evidence() {
        writeln!(
            out,
            "{:<ZONE_WIDTH$} EVIDENCE: unvalidated (the parent zone is unsigned: {})",
            "",
            why.unwrap_or("provably insecure")
        )?;
    }
    // Where a DS request is made or waits: which way it goes to the parent, and why.
    if let (Some(State::Enabling | State::AwaitingDs | State::AwaitingDsRemoval), Some(path)) =
        (z.state, &z.facts.parent_way.ds_path)
    {
        writeln!(out, "{:<ZONE_WIDTH$} PARENT: {}", "", path.describe())?;
    }
    // Said whenever the parent does not (only) send resolvers to the provider.
    if let Some(d @ (DelegationVerdict::Foreign | DelegationVerdict::Mixed)) =
        z.facts.delegation.verdict
    {
        writeln!(
            out,
            "{:<ZONE_WIDTH$} DELEGATION: {d} (elsewhere: {}; the provider's: {})",
            "",
            crate::dns::delegation::describe(&z.facts.delegation.old_ns),
            z.facts
                .delegation
                .provider_ns
                .as_deref()
                .map_or_else(|| "unknown".to_string(), crate::dns::delegation::describe)
        )?;
    }
    for a in alerts {
        writeln!(
            out,
            "{:<ZONE_WIDTH$} ALERT {} ({}) since {}: {}",
            "",
            a.kind,
            a.severity.as_str(),
            a.opened_at,
            a.message
        )?;
    }
    Ok(())
}

fn event_json(e: &EventRow) -> Value {
    json!({
        "at": e.at.to_string(),
        "kind": e.kind,
        "from": e.from,
        "to": e.to,
        "reason": e.reason,
        "repeats": e.repeats,
        "last_seen": e.last_seen.map(|t| t.to_string()),
        "holder": e.holder,
        "epoch": e.epoch,
    })
}

pub async fn history_json(store: &Store, zone: &str) -> Result<Value, StoreError> {
    let events = store.events(zone).await?;
    Ok(json!({
        "zone": zone,
        "events": events.iter().map(event_json).collect::<Vec<_>>(),
    }))
}

/// The audit trail as a story: one line per event, transitions marked.
pub async fn history_text(store: &Store, zone: &str) -> Result<String, StoreError> {
    let events = store.events(zone).await?;
    let mut out = String::new();
    let mut last_day = String::new();
    for e in &events {
        let at = e.at.to_string();
        let (day, time) = at.split_at(10);
        if day != last_day {
            let _ = writeln!(out, "{day}");
            last_day = day.to_string();
        }
        let time = time.trim_start_matches('T').trim_end_matches('Z');
        let line = e.story();
        // Several daemons: who wrote it, under which lease epoch.
        let by = match (&e.holder, e.epoch) {
            (Some(holder), Some(epoch)) => format!(" [{holder}, epoch {epoch}]"),
            _ => String::new(),
        };
        let _ = writeln!(out, "  {time}  {line}{by}");
    }
    if events.is_empty() {
        let _ = writeln!(out, "no history for {zone}");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::{AuditNote, Decision, Intent};
    use crate::store::ObservationText;

    /// `[rollover]`'s next roll in both forms: null without a lifetime, the date and
    /// kind with one, and why a due roll waits.
    #[tokio::test]
    async fn the_next_roll_is_shown_where_a_lifetime_applies() {
        use crate::lifecycle::keys::{KeyAge, KeyAges};
        use crate::lifecycle::policy::RolloverPolicy;
        use crate::lifecycle::rollover::KeyKind;
        let store = Store::open_in_memory().await.unwrap();
        let zone = "n.test.";
        store
            .set_intent(zone, Intent::Enabled, false, "enable", Timestamp(1_000))
            .await
            .unwrap();
        let read = store.zone_for_step(zone).await.unwrap().unwrap();
        // Far ahead of the clock `status` reads: never due while this test is run.
        let since = Timestamp(4_000_000_000_000);
        let facts = crate::lifecycle::Facts {
            key_ages: Some(KeyAges {
                keys: vec![KeyAge {
                    kind: KeyKind::Csk,
                    tag: 7,
                    algorithm: 13,
                    since,
                }],
                ..KeyAges::default()
            }),
            ..Default::default()
        };
        let active = Decision {
            state: Some(State::Active),
            facts,
            effects: Vec::new(),
            alerts: Vec::new(),
            notes: Vec::new(),
            wake_at: Timestamp(9_000),
        };
        let text = ObservationText::from_whole("{}");
        assert!(
            store
                .commit_step(&read, &active, &text, Timestamp(2_000))
                .await
                .unwrap()
        );
        let off = Policy::default();
        let json = status_json(&store, Some(zone), &off)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(json["next_roll"], Value::Null);
        assert_eq!(json["roll_waiting"], Value::Null);
        let day = std::time::Duration::from_secs(86_400);
        let on = Policy {
            rollover: RolloverPolicy {
                csk: Some(30 * day),
                ..RolloverPolicy::default()
            },
            ..Policy::default()
        };
        let json = status_json(&store, Some(zone), &on).await.unwrap().unwrap();
        let at = since.plus(30 * day).to_string();
        assert_eq!(json["next_roll"], json!({"at": at, "kind": "csk"}));
        let shown = status_text(&store, Some(zone), &on).await.unwrap().unwrap();
        assert!(
            shown.contains(&format!(
                "KEY ROLL: next: the csk roll on {at} (rollover.csk)"
            )),
            "{shown}"
        );
        // Due and held at the cap: said instead.
        let read = store.zone_for_step(zone).await.unwrap().unwrap();
        let mut facts = read.row.zone.facts.clone();
        if let Some(ages) = facts.key_ages.as_mut() {
            ages.waiting = Some("the csk roll due since then waits: 10 roll(s) in progress".into());
        }
        let held = Decision { facts, ..active };
        assert!(
            store
                .commit_step(&read, &held, &text, Timestamp(3_000))
                .await
                .unwrap()
        );
        let json = status_json(&store, Some(zone), &on).await.unwrap().unwrap();
        assert_eq!(
            json["roll_waiting"],
            "the csk roll due since then waits: 10 roll(s) in progress"
        );
        let shown = status_text(&store, Some(zone), &on).await.unwrap().unwrap();
        assert!(
            shown.contains("KEY ROLL: the csk roll due since then waits: 10 roll(s) in progress"),
            "{shown}"
        );
    }

    /// A declared move is shown, its object's keys in the order serde_json sorts them
    /// like every other's.
    #[tokio::test]
    async fn a_key_roll_is_shown_in_both_forms_with_its_wait() {
        use crate::lifecycle::hold::{Hold, Party};
        use crate::lifecycle::rollover::{KeyKind, ListedKey, Roll};
        let store = Store::open_in_memory().await.unwrap();
        let policy = Policy::default();
        let zone = "r.test.";
        store
            .set_intent(zone, Intent::Enabled, false, "enable", Timestamp(1_000))
            .await
            .unwrap();
        let read = store.zone_for_step(zone).await.unwrap().unwrap();
        let active = Decision {
            state: Some(State::Active),
            facts: crate::lifecycle::Facts::default(),
            effects: Vec::new(),
            alerts: Vec::new(),
            notes: Vec::new(),
            wake_at: Timestamp(9_000),
        };
        let text = ObservationText::from_whole("{}");
        assert!(
            store
                .commit_step(&read, &active, &text, Timestamp(2_000))
                .await
                .unwrap()
        );
        let listed = [ListedKey {
            id: "1".into(),
            dnskey: crate::dnssec::test_key(),
            active: true,
            published: true,
        }];
        let roll = Roll::plan(&listed, KeyKind::Csk, None, Timestamp(3_000)).unwrap();
        store
            .declare_roll(zone, Some(&roll), "operator", Timestamp(3_000))
            .await
            .unwrap();
        // A second roll, or a move, is refused while it is under way.
        assert!(
            store
                .declare_roll(zone, Some(&roll), "operator", Timestamp(3_000))
                .await
                .is_err()
        );
        // What a step of the roll leaves: a TTL's hold, until when.
        let read = store.zone_for_step(zone).await.unwrap().unwrap();
        let mut facts = read.row.zone.facts.clone();
        facts.wait.held_by = Some(
            Hold::new("resolvers to forget DNSKEY sets without key 1", Party::Ttl)
                .until(Some(Timestamp(86_400_000))),
        );
        let held = Decision {
            facts,
            notes: Vec::new(),
            ..active
        };
        assert!(
            store
                .commit_step(&read, &held, &text, Timestamp(4_000))
                .await
                .unwrap()
        );
        let json = status_json(&store, Some(zone), &policy)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            json["key_roll"],
            json!({"aborted": false, "algorithm": 13, "method": "double_ds", "phase": "publishing"})
        );
        assert_eq!(json["waiting_on"], "ttl");
        assert_eq!(
            json["waiting_for"],
            "resolvers to forget DNSKEY sets without key 1"
        );
        assert_eq!(json["until"], Timestamp(86_400_000).to_string());
        let text = status_text(&store, Some(zone), &policy)
            .await
            .unwrap()
            .unwrap();
        assert!(
            text.contains(
                "KEY ROLL: double_ds roll of the csk (algorithm 13), phase publishing: \
                 the new CSK published beside the old CSK, not signing yet"
            ),
            "{text}"
        );
        assert!(
            text.contains(&format!("[on: ttl] (until {}", Timestamp(86_400_000))),
            "{text}"
        );
        // The abort recorded on the roll, for the next step to decide.
        store
            .declare_roll(zone, None, "operator", Timestamp(5_000))
            .await
            .unwrap();
        let row = store.zone(zone).await.unwrap().unwrap();
        assert!(row.zone.facts.key_roll.is_some_and(|r| r.abort_asked));
    }

    #[tokio::test]
    async fn a_signed_move_is_shown_in_both_forms() {
        use crate::lifecycle::signed_move::Move;
        let store = Store::open_in_memory().await.unwrap();
        let policy = Policy::default();
        let zone = "m.test.";
        store
            .set_intent(zone, Intent::Enabled, false, "enable", Timestamp(1_000))
            .await
            .unwrap();
        let read = store.zone_for_step(zone).await.unwrap().unwrap();
        let active = Decision {
            state: Some(State::Active),
            facts: crate::lifecycle::Facts::default(),
            effects: Vec::new(),
            alerts: Vec::new(),
            notes: vec![AuditNote {
                from: None,
                to: Some(State::Active),
                reason: "test".into(),
            }],
            wake_at: Timestamp(9_000),
        };
        let text = ObservationText::from_whole("{}");
        assert!(
            store
                .commit_step(&read, &active, &text, Timestamp(2_000))
                .await
                .unwrap()
        );
        let mv = Move::new(zone, crate::dnssec::test_key()).between("pdns-a", "pdns-b");
        store
            .declare_move(zone, &mv, "operator", Timestamp(3_000))
            .await
            .unwrap();

        let json = status_json(&store, Some(zone), &policy)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            json["signed_move"],
            json!({"phase": "signing_at_target", "source": "pdns-a", "target": "pdns-b"})
        );
        for one in [Some(zone), None] {
            let mut written = Vec::new();
            write_status_json(&store, one, &policy, &mut written)
                .await
                .unwrap();
            let value: Value = serde_json::from_slice(&written).unwrap();
            assert_eq!(
                String::from_utf8(written).unwrap(),
                format!("{}\n", serde_json::to_string_pretty(&value).unwrap())
            );
        }
        let text = status_text(&store, Some(zone), &policy)
            .await
            .unwrap()
            .unwrap();
        assert!(
            text.contains("SIGNED MOVE: pdns-a -> pdns-b, phase signing_at_target"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn the_listing_is_written_one_zone_at_a_time_as_a_whole_document() {
        let store = Store::open_in_memory().await.unwrap();
        let policy = Policy::default();
        let text = status_text(&store, None, &policy).await.unwrap().unwrap();
        assert!(text.starts_with("ZONE "), "{text}");
        assert!(text.contains("(no zones yet"), "{text}");
        let json = status_json(&store, None, &policy).await.unwrap().unwrap();
        assert_eq!(json, json!({"daemon": [], "zones": []}));
        let mut written = Vec::new();
        write_status_json(&store, None, &policy, &mut written)
            .await
            .unwrap();
        assert_eq!(
            String::from_utf8(written).unwrap(),
            format!("{}\n", serde_json::to_string_pretty(&json).unwrap())
        );

        let now = SystemClock.now();
        for zone in ["b.test.", "a.test.", "c.test."] {
            store.ensure_zone(zone, now).await.unwrap();
        }
        let json = status_json(&store, None, &policy).await.unwrap().unwrap();
        let names: Vec<&str> = json["zones"]
            .as_array()
            .unwrap()
            .iter()
            .map(|z| z["zone"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a.test.", "b.test.", "c.test."]);
        // Byte for byte what serde_json prints for the whole document.
        let mut written = Vec::new();
        write_status_json(&store, None, &policy, &mut written)
            .await
            .unwrap();
        assert_eq!(
            String::from_utf8(written).unwrap(),
            format!("{}\n", serde_json::to_string_pretty(&json).unwrap())
        );
        let text = status_text(&store, None, &policy).await.unwrap().unwrap();
        assert_eq!(text.lines().count(), 4, "{text}");
        // The columns line up: each row's state starts under the header's STATE.
        let column = text.lines().next().and_then(|h| h.find("STATE"));
        for row in text.lines().skip(1) {
            assert_eq!(row.find("(not observed yet)"), column, "{text}");
        }
        assert!(
            status_text(&store, Some("d.test."), &policy)
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            status_json(&store, Some("d.test."), &policy)
                .await
                .unwrap()
                .is_none()
        );
    }

    /// Whatever a zone name's length (up to 253 characters), every row's STATE starts
    /// under the header's, and each name is written whole where it is written.
    #[tokio::test]
    async fn the_columns_line_up_whatever_the_name() {
        let store = Store::open_in_memory().await.unwrap();
        let policy = Policy::default();
        let now = SystemClock.now();
        let label = |c: char, n: usize| c.to_string().repeat(n);
        // 63 + 1 + 63 + 1 + 63 + 1 + 56 + 1 + 4 characters, and the root's dot.
        let longest = format!(
            "{}.{}.{}.{}.test.",
            label('a', 63),
            label('b', 63),
            label('c', 63),
            label('d', 56)
        );
        assert_eq!(longest.trim_end_matches('.').len(), 253);
        let forty = format!("{}.test.", label('f', 34));
        assert_eq!(forty.len(), 40);
        for zone in [longest.as_str(), forty.as_str(), "s.test."] {
            store.ensure_zone(zone, now).await.unwrap();
        }
        let text = status_text(&store, None, &policy).await.unwrap().unwrap();
        let column = text.lines().next().and_then(|h| h.find("STATE"));
        let rows: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("(not observed yet)"))
            .collect();
        assert_eq!(rows.len(), 3, "{text}");
        for row in rows {
            assert_eq!(row.find("(not observed yet)"), column, "{text}");
        }
        for zone in [&longest, &forty] {
            assert!(
                text.lines().any(|l| l == zone.as_str()),
                "{zone} whole:\n{text}"
            );
        }
        assert!(text.lines().any(|l| l.starts_with("s.test. ")), "{text}");
        // Every state name fits its column.
        for state in State::ALL {
            assert!(state.as_str().len() < STATE_WIDTH, "{state}");
        }
    }

    /// Every party a hold can name is a `--waiting-on` choice.
    #[test]
    fn every_party_is_a_waiting_on_choice() {
        use strum::VariantArray;
        for party in crate::lifecycle::hold::Party::VARIANTS {
            assert!(WAITING_ON.contains(&party.as_str()), "{}", party.as_str());
        }
    }

    /// A filter's value that names nothing known is refused with the value and every
    /// choice; good values are read into the store's filter.
    #[test]
    fn bad_filter_values_are_refused_naming_the_value_and_the_choices() {
        let none: [String; 0] = [];
        let e = Listing::parse(&["actve".into()], &none, None, &[], None, None).unwrap_err();
        let said = e.to_string();
        assert!(said.contains("\"actve\""), "{said}");
        for state in State::ALL {
            assert!(said.contains(state.as_str()), "{said}");
        }
        assert!(said.contains("unobserved"), "{said}");
        let said = Listing::parse(&none, &["registar".into()], None, &[], None, None)
            .unwrap_err()
            .to_string();
        assert!(said.contains("\"registar\""), "{said}");
        for on in WAITING_ON {
            assert!(said.contains(on), "{said}");
        }
        let said = Listing::parse(&none, &none, Some("c"), &["a", "b"], None, None)
            .unwrap_err()
            .to_string();
        assert!(said.contains("\"c\"") && said.contains("a, b"), "{said}");
        let said = Listing::parse(&none, &none, None, &[], Some("a..b"), None)
            .unwrap_err()
            .to_string();
        assert!(said.contains("--after \"a..b\""), "{said}");
        assert!(Listing::parse(&none, &none, None, &[], None, Some(0)).is_err());
        let listing = Listing::parse(
            &["active".into(), "unobserved".into()],
            &["ttl".into()],
            Some("b"),
            &["a", "b"],
            Some("Example.COM"),
            Some(5),
        )
        .unwrap();
        assert_eq!(
            listing,
            Listing {
                filter: ZoneFilter {
                    states: vec![Some(State::Active), None],
                    account: Some("b".into()),
                    after: Some("example.com.".into()),
                    limit: Some(5),
                },
                waiting_on: vec!["ttl"],
            }
        );
    }

    /// `--waiting-on` is judged per zone, and a page of it still holds `--limit` zones
    /// of it; the table says where the next page starts, the JSON is the document
    /// serde_json prints whole.
    #[tokio::test]
    async fn a_listing_filters_on_the_wait_and_pages() {
        let store = Store::open_in_memory().await.unwrap();
        let policy = Policy::default();
        let now = SystemClock.now();
        // Not observed yet: on the daemon.
        for zone in ["a.test.", "c.test.", "e.test."] {
            store.ensure_zone(zone, now).await.unwrap();
        }
        // Active and settled: on nobody.
        for zone in ["b.test.", "d.test."] {
            store
                .set_intent(zone, Intent::Enabled, false, "enable", Timestamp(1_000))
                .await
                .unwrap();
            let read = store.zone_for_step(zone).await.unwrap().unwrap();
            let active = Decision {
                state: Some(State::Active),
                facts: crate::lifecycle::Facts::default(),
                effects: Vec::new(),
                alerts: Vec::new(),
                notes: Vec::new(),
                wake_at: Timestamp(9_000),
            };
            let text = ObservationText::from_whole("{}");
            assert!(
                store
                    .commit_step(&read, &active, &text, Timestamp(2_000))
                    .await
                    .unwrap()
            );
        }
        let listing = |on: &str, after: Option<&str>, limit: Option<u32>| {
            Listing::parse(&[], &[on.to_string()], None, &[], after, limit).unwrap()
        };
        let names = |json: &[u8]| -> Vec<String> {
            let value: Value = serde_json::from_slice(json).unwrap();
            value["zones"]
                .as_array()
                .unwrap()
                .iter()
                .map(|z| z["zone"].as_str().unwrap().to_string())
                .collect()
        };
        let mut out = Vec::new();
        write_listing_json(&store, &listing("daemon", None, Some(2)), &policy, &mut out)
            .await
            .unwrap();
        assert_eq!(names(&out), ["a.test.", "c.test."]);
        let value: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("{}\n", serde_json::to_string_pretty(&value).unwrap())
        );
        let mut out = Vec::new();
        write_listing_json(
            &store,
            &listing("daemon", Some("c.test"), Some(2)),
            &policy,
            &mut out,
        )
        .await
        .unwrap();
        assert_eq!(names(&out), ["e.test."]);
        let mut out = Vec::new();
        write_listing_json(&store, &listing("nobody", None, None), &policy, &mut out)
            .await
            .unwrap();
        assert_eq!(names(&out), ["b.test.", "d.test."]);

        let mut out = Vec::new();
        write_listing_text(&store, &listing("daemon", None, Some(2)), &policy, &mut out)
            .await
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        let rows: Vec<&str> = text.lines().skip(1).collect();
        assert_eq!(rows.len(), 3, "{text}");
        assert!(
            rows[0].starts_with("a.test. ") && rows[1].starts_with("c.test. "),
            "{text}"
        );
        assert_eq!(rows[2], "(a page ends here; the next: --after c.test.)");
        let mut out = Vec::new();
        write_listing_text(&store, &listing("registrar", None, None), &policy, &mut out)
            .await
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.ends_with("\n(no zones match)\n"), "{text}");
    }
}
