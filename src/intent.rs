//! The operator's intent, recorded: what `enable`/`disable` and the web console's switch
//! both do, written once. Nothing else: the running daemon acts on the intent.

use crate::dns::delegation::ns_set;
use crate::dnssec::{Dnskey, fqdn};
use crate::lifecycle::signed_move::{Move, Ttls};
use crate::lifecycle::{Intent, State, Timestamp};
use crate::provider::fleet::{ProviderConfig, Providers};
use crate::provider::{Provider, ProviderError};
use crate::store::{Store, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum IntentError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("--ds-never-submitted only applies to a zone in awaiting_ds; {zone} is in {state}")]
    NotAwaitingDs { zone: String, state: String },
    #[error("the provider has no zone {zone}: create it there first (nothing was recorded)")]
    NotAtProvider { zone: String },
    #[error(
        "{zone} is at more than one provider ({providers}): delete it from all but one first, or move it between them with `dnssec-warden move` (nothing was recorded)"
    )]
    AtSeveralProviders { zone: String, providers: String },
    // `move ZONE --to ACCOUNT` (DESIGN.md section 2, "Signed moves"). Where the signed
    // path cannot be taken at all, the refusal ends with the insecure one (`insecure_way`).
    #[error(
        "no provider account is named {to}; the configured ones: {configured} (nothing was recorded)"
    )]
    UnknownAccount { to: String, configured: String },
    #[error("{zone}: {what} cannot be told now ({error}): try again (nothing was recorded)")]
    MoveCannotAsk {
        zone: String,
        what: String,
        error: String,
    },
    #[error(
        "{zone} is at provider {from} only: create the zone at provider {to} first (its records, unsigned), then try again (nothing was recorded)"
    )]
    MoveTargetLacksZone {
        zone: String,
        from: String,
        to: String,
    },
    #[error(
        "no configured provider has the zone {zone}: there is nothing to move (nothing was recorded)"
    )]
    MoveNowhere { zone: String },
    #[error("{zone} is at provider {to} only: there is nothing to move (nothing was recorded)")]
    MoveOnlyAtTarget { zone: String, to: String },
    #[error(
        "{zone} is at {providers}: a signed move is between two providers, the one that serves it and {to}; delete it from the others first (nothing was recorded)"
    )]
    MoveAtMany {
        zone: String,
        to: String,
        providers: String,
    },
    #[error(
        "{zone}: provider {account} cannot publish another signer's DNSKEY beside its own ({why}), which a signed move needs at both providers; {insecure}"
    )]
    MoveUnsupported {
        zone: String,
        account: String,
        why: &'static str,
        insecure: String,
    },
    #[error(
        "{zone}: provider {from} does not sign the zone now (DNSSEC off there): a signed move starts from the key it signs with; `dnssec-warden status {zone}` says what the daemon sees (nothing was recorded)"
    )]
    MoveSourceUnsigned { zone: String, from: String },
    #[error(
        "{zone}: provider {from} signs with algorithm {from_algorithm} and provider {to} with algorithm {to_algorithm}: a signed move needs one algorithm at both (a validator may insist on every algorithm of the DS set, RFC 6840 5.11); make provider {to} sign with algorithm {from_algorithm}, or {insecure}"
    )]
    MoveAlgorithms {
        zone: String,
        from: String,
        from_algorithm: u8,
        to: String,
        to_algorithm: u8,
        insecure: String,
    },
    #[error(
        "{zone}: provider {account} lists no apex NS records for the zone: a signed move changes the delegation to the target's own name servers, so each provider must list its own (nothing was recorded)"
    )]
    MoveNoNameServers { zone: String, account: String },
    #[error(
        "{zone}: providers {from} and {to} both list the name servers {shared}: a signed move changes the delegation from the source's name servers to the target's own, so the two sets must share none; {insecure}"
    )]
    MoveSharedNameServers {
        zone: String,
        from: String,
        to: String,
        shared: String,
        insecure: String,
    },
    #[error(
        "{zone} was last seen served by provider {to} ({seen}): a signed move goes from the provider serving the zone to the other one; did you mean `--to {from}`? (nothing was recorded)"
    )]
    MoveWrongWay {
        zone: String,
        from: String,
        to: String,
        seen: String,
    },
    // `roll ZONE` (DESIGN.md section 2, "Key rollovers").
    #[error("{zone}: {why}: a key rollover is the provider's own there (nothing was recorded)")]
    RollNoKeys { zone: String, why: String },
    #[error("{zone}: {why} (nothing was recorded)")]
    RollRefused { zone: String, why: String },
}

/// Who asked: the command line (the audit trail says "operator"), or a named user of
/// the web console.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator<'a> {
    CommandLine,
    Web(&'a str),
}

impl Operator<'_> {
    fn who(self) -> String {
        match self {
            Self::CommandLine => "operator".to_string(),
            Self::Web(user) => format!("operator {user} (web console)"),
        }
    }
}

/// What was recorded, for the operator's line or page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The zone's state when the intent was recorded (`None`: not observed yet).
    pub state: Option<State>,
    /// A provider that could not be asked now (the daemon retries), if any.
    pub note: Option<String>,
    /// Nothing needed recording, and why: an `enable` of a zone in a signed move, whose
    /// intent is `enabled` throughout.
    pub unchanged: Option<String>,
}

/// Asks every configured provider whether it has the zone: `Err` for a definite "no such
/// zone" anywhere, or for a zone at more than one provider; a provider that cannot be
/// asked now is the daemon's to retry, said in the returned note.
async fn provider_knows(
    providers: &[ProviderConfig],
    zone: &str,
) -> Result<Option<String>, IntentError> {
    if providers.is_empty() {
        return Ok(None);
    }
    let providers = match Providers::build(providers) {
        Ok(providers) => providers,
        Err(e) => return Ok(Some(format!("the provider was not asked: {e}"))),
    };
    let asked = providers.ask_every_account(zone).await;
    let names = |found: &[usize]| {
        found
            .iter()
            .map(|&i| providers.name(i))
            .collect::<Vec<_>>()
            .join(" and ")
    };
    match (asked.found.as_slice(), asked.unknown.is_empty()) {
        ([_, _, ..], _) => Err(IntentError::AtSeveralProviders {
            zone: zone.to_string(),
            providers: names(&asked.found),
        }),
        ([], true) => Err(IntentError::NotAtProvider {
            zone: zone.to_string(),
        }),
        (_, false) => Ok(Some(format!(
            "the provider could not be asked now: {}",
            asked.unknown.join("; ")
        ))),
        ([_], true) => Ok(None),
    }
}

/// Records the intent for `zone` (a normalised name) with its audit event. An enable is
/// refused when no provider has the zone, or several do; `ds_never_submitted` only from
/// `awaiting_ds`. During a signed move a disable is refused with the move's phase and
/// accounts (`store::intent_refused`, checked again at the write), and an enable records
/// nothing: the intent is `enabled` throughout a move, and both accounts hold the zone
/// by design (which outside a move is a refusal).
pub async fn record(
    store: &Store,
    providers: &[ProviderConfig],
    zone: &str,
    intent: Intent,
    ds_never_submitted: bool,
    by: Operator<'_>,
    now: Timestamp,
) -> Result<Recorded, IntentError> {
    let said = |e| IntentError::Store(store.explain(e));
    let row = store.zone(zone).await.map_err(said)?;
    let state = row.as_ref().and_then(|row| row.zone.state);
    if let Some(row) = &row
        && row.zone.facts.key_roll.is_some()
        && let Some(refused) = crate::store::intent_refused(row, intent)
    {
        return Err(refused.into());
    }
    if let Some(row) = &row
        && let Some(mv) = &row.zone.facts.signed_move
    {
        if let Some(refused) = crate::store::intent_refused(row, intent) {
            return Err(refused.into());
        }
        if row.zone.intent == Intent::Enabled {
            return Ok(Recorded {
                state,
                note: None,
                unchanged: Some(format!(
                    "the zone is in a signed move from provider {} to provider {} (phase {}), \
                     throughout which its intent stays enabled: nothing was recorded, and the \
                     move goes on",
                    mv.source,
                    mv.target,
                    mv.phase.name()
                )),
            });
        }
    }
    let note = match (intent, &row) {
        // Both accounts hold a zone in a signed move: not asked.
        (Intent::Enabled, Some(row)) if row.zone.facts.signed_move.is_some() => None,
        (Intent::Enabled, _) => provider_knows(providers, zone).await?,
        _ => None,
    };
    if ds_never_submitted && state != Some(State::AwaitingDs) {
        return Err(IntentError::NotAwaitingDs {
            zone: zone.to_string(),
            state: state.map_or("no state yet".to_string(), |s| s.to_string()),
        });
    }
    let who = by.who();
    let reason = match (intent, ds_never_submitted) {
        (Intent::Enabled, _) => format!("{who} asked to enable DNSSEC"),
        (Intent::Disabled, true) => {
            format!("{who} asked to disable DNSSEC, stating the DS was never submitted")
        }
        (Intent::Disabled, false) => format!("{who} asked to disable DNSSEC"),
        (Intent::None, _) => format!("{who} cleared the intent (watch only)"),
    };
    store
        .set_intent(zone, intent, ds_never_submitted, &reason, now)
        .await
        .map_err(said)?;
    Ok(Recorded {
        state,
        note,
        unchanged: None,
    })
}

/// What `roll` is asked: a key of `kind` (or the whole key set to `algorithm`) replaced,
/// or the roll under way aborted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RollAsk {
    Start {
        /// `None`: the zone's entry-point key (a CSK where it has no ZSK, else its KSK).
        kind: Option<crate::lifecycle::rollover::KeyKind>,
        algorithm: Option<u8>,
    },
    Abort,
}

/// Declares a key rollover of `zone` (a normalised name), planned from the keys its
/// provider lists now (`Roll::plan`), or asks the one under way to be aborted (decided by
/// the daemon's next step, where `rollover::may_abort` allows it). Refused where the zone
/// is not `active` with intent `enabled`, a roll or a signed move is under way, the
/// provider's API exposes no keys (Gcore), or the plan is refused (its reason). Returns
/// the line for the operator.
pub async fn declare_roll(
    store: &Store,
    providers: &[ProviderConfig],
    zone: &str,
    ask: RollAsk,
    by: Operator<'_>,
    now: Timestamp,
) -> Result<String, IntentError> {
    let said = |e| IntentError::Store(store.explain(e));
    let (kind, algorithm) = match ask {
        RollAsk::Abort => {
            store
                .declare_roll(zone, None, &by.who(), now)
                .await
                .map_err(said)?;
            return Ok(format!(
                "{zone}: abort of the key rollover recorded; the running daemon goes back at its next look: `dnssec-warden status {zone}` shows the phase"
            ));
        }
        RollAsk::Start { kind, algorithm } => (kind, algorithm),
    };
    let row = store
        .zone(zone)
        .await
        .map_err(said)?
        .ok_or_else(|| StoreError::UnknownZone(zone.to_string()))?;
    let cannot_ask = |what: &str, error: String| IntentError::MoveCannotAsk {
        zone: zone.to_string(),
        what: what.to_string(),
        error,
    };
    let fleet = Providers::build(providers)
        .map_err(|e| cannot_ask("the provider holding the zone", e.to_string()))?;
    // Where no configured account's API exposes keys (Gcore's asks nothing to say so),
    // the roll is the provider's own whatever the zone's state.
    let mut keyless = Vec::new();
    for p in providers {
        if let Some(client) = fleet.account_named(&p.name)
            && matches!(client.keys(zone).await, Ok(None))
        {
            keyless.push(format!("provider {} ({})", p.name, p.options.kind()));
        }
    }
    if !providers.is_empty() && keyless.len() == providers.len() {
        return Err(IntentError::RollNoKeys {
            zone: zone.to_string(),
            why: format!("{}: its API exposes no keys", keyless.join(" and ")),
        });
    }
    if let Some(refused) = crate::store::roll_refused(&row) {
        return Err(refused.into());
    }
    let keys = match fleet.keys(zone).await {
        Ok(Some(keys)) => keys,
        Ok(None) => {
            let account = fleet.account(zone);
            return Err(IntentError::RollNoKeys {
                zone: zone.to_string(),
                why: format!(
                    "provider {}'s API exposes no keys",
                    account.as_deref().unwrap_or("account")
                ),
            });
        }
        Err(e @ ProviderError::Invalid(_)) => {
            return Err(IntentError::RollNoKeys {
                zone: zone.to_string(),
                why: e.to_string(),
            });
        }
        Err(e) => return Err(cannot_ask("the provider's keys", e.to_string())),
    };
    let listed: Vec<crate::lifecycle::rollover::ListedKey> = keys
        .into_iter()
        .map(|k| crate::lifecycle::rollover::ListedKey {
            id: k.id,
            dnskey: k.dnskey,
            active: k.state.active,
            published: k.state.published,
        })
        .collect();
    let fqdn_zone = fqdn(zone).map_err(|e| cannot_ask("the zone's name", e.to_string()))?;
    let kind = kind.unwrap_or_else(|| {
        use crate::lifecycle::rollover::KeyKind;
        let zsk = listed
            .iter()
            .any(|k| k.active && k.published && !k.dnskey.is_sep());
        if zsk { KeyKind::Ksk } else { KeyKind::Csk }
    });
    let roll =
        crate::lifecycle::rollover::Roll::plan(&listed, kind, algorithm, now).map_err(|e| {
            IntentError::RollRefused {
                zone: fqdn_zone.clone(),
                why: e.to_string(),
            }
        })?;
    let facts = &row.zone.facts;
    let roll = roll.seeded(crate::lifecycle::rollover::RollTtls {
        dnskey: facts.lifecycle.max_dnskey_ttl.unwrap_or(0),
        ds: facts.lifecycle.max_ds_ttl.unwrap_or(0),
        zone: 0,
    });
    store
        .declare_roll(zone, Some(&roll), &by.who(), now)
        .await
        .map_err(said)?;
    Ok(format!(
        "{zone}: key rollover declared ({}, algorithm {}); the running daemon takes it from here: `dnssec-warden status {zone}` shows its phase and what it waits for",
        roll.method.name(),
        roll.algorithm
    ))
}

/// A signed move recorded: the accounts it goes between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveDeclared {
    pub source: String,
    pub target: String,
}

/// What one account of a move said about the zone (each answer `Err` with the failure
/// when it could not be asked): what [`check_sides`] decides on.
#[derive(Debug, Clone)]
struct MoveSide {
    account: String,
    /// What its kind lacks to publish another signer's DNSKEY, when it says it cannot
    /// (the provider's own sentence, `registry::Kind::FOREIGN_DNSKEYS_WHY`).
    foreign_dnskeys_why: &'static str,
    foreign_dnskeys: Result<bool, String>,
    /// The key it signs the zone with; `None`: DNSSEC off there.
    key: Result<Option<Dnskey>, String>,
    /// Its apex NS for the zone; `None`: it lists none.
    name_servers: Result<Option<Vec<String>>, String>,
}

/// The insecure way (DESIGN.md rule 9), in one sentence: what remains where a signed move
/// cannot be taken. The zone must be at one account while it is disabled: two accounts
/// holding it are sent nothing (rule 13).
fn insecure_way(source: &str, target: &str) -> String {
    format!(
        "move it the insecure way instead (DESIGN.md rule 9): delete it from provider \
         {target} for now, `disable` it and wait for `disabled` (its DS removed and waited \
         out), create it at {target} unsigned, change the NS at the registrar to {target}'s \
         name servers, and once the old delegation has expired delete it from {source} and \
         `enable` it (nothing was recorded)"
    )
}

/// The account the zone moves from: of the accounts asked, exactly two hold the zone and
/// `to` is one of them. An account that could not be asked is a refusal too: the holders
/// are never guessed (rule 13).
fn move_source(
    zone: &str,
    to: &str,
    found: &[&str],
    unknown: &[String],
) -> Result<String, IntentError> {
    if !unknown.is_empty() {
        return Err(IntentError::MoveCannotAsk {
            zone: zone.to_string(),
            what: "which providers hold the zone".to_string(),
            error: unknown.join("; "),
        });
    }
    let has_target = found.contains(&to);
    let others: Vec<&str> = found.iter().copied().filter(|a| *a != to).collect();
    match (has_target, others.as_slice()) {
        (true, [source]) => Ok(source.to_string()),
        (false, [source]) => Err(IntentError::MoveTargetLacksZone {
            zone: zone.to_string(),
            from: source.to_string(),
            to: to.to_string(),
        }),
        (_, []) if has_target => Err(IntentError::MoveOnlyAtTarget {
            zone: zone.to_string(),
            to: to.to_string(),
        }),
        (_, []) => Err(IntentError::MoveNowhere {
            zone: zone.to_string(),
        }),
        (_, _) => Err(IntentError::MoveAtMany {
            zone: zone.to_string(),
            to: to.to_string(),
            providers: format!("providers {}", found.join(", ")),
        }),
    }
}

/// Whether both accounts can take the signed path, in order: both publish another
/// signer's DNSKEY, the source signs (the target, if it signs already, with the same
/// algorithm: RFC 6840 5.11), and each lists its own apex NS, the two sets apart. `Ok`:
/// the source's key. Within a check a definite "cannot" is said before "cannot be asked".
fn check_sides(zone: &str, source: &MoveSide, target: &MoveSide) -> Result<Dnskey, IntentError> {
    let insecure = || insecure_way(&source.account, &target.account);
    let cannot_ask = |side: &MoveSide, what: &str, error: &str| IntentError::MoveCannotAsk {
        zone: zone.to_string(),
        what: format!("whether provider {} {what}", side.account),
        error: error.to_string(),
    };
    for side in [source, target] {
        if side.foreign_dnskeys == Ok(false) {
            return Err(IntentError::MoveUnsupported {
                zone: zone.to_string(),
                account: side.account.clone(),
                why: side.foreign_dnskeys_why,
                insecure: insecure(),
            });
        }
    }
    for side in [source, target] {
        if let Err(e) = &side.foreign_dnskeys {
            return Err(cannot_ask(side, "can publish another signer's DNSKEY", e));
        }
    }
    let source_key = match &source.key {
        Ok(Some(key)) => key.clone(),
        Ok(None) => {
            return Err(IntentError::MoveSourceUnsigned {
                zone: zone.to_string(),
                from: source.account.clone(),
            });
        }
        Err(e) => return Err(cannot_ask(source, "signs the zone, and with which key", e)),
    };
    match &target.key {
        Ok(Some(key)) if key.algorithm != source_key.algorithm => {
            return Err(IntentError::MoveAlgorithms {
                zone: zone.to_string(),
                from: source.account.clone(),
                from_algorithm: source_key.algorithm,
                to: target.account.clone(),
                to_algorithm: key.algorithm,
                insecure: insecure(),
            });
        }
        // Not signing yet is the move's first phase (`signing_at_target`).
        Ok(_) => {}
        Err(e) => return Err(cannot_ask(target, "signs the zone, and with which key", e)),
    }
    let mut sets = Vec::with_capacity(2);
    for side in [source, target] {
        match &side.name_servers {
            Ok(Some(set)) if !set.is_empty() => {
                sets.push(ns_set(set));
            }
            Ok(_) => {
                return Err(IntentError::MoveNoNameServers {
                    zone: zone.to_string(),
                    account: side.account.clone(),
                });
            }
            Err(e) => return Err(cannot_ask(side, "lists its name servers for the zone", e)),
        }
    }
    let mut shared: Vec<&String> = sets[0].iter().filter(|n| sets[1].contains(n)).collect();
    if !shared.is_empty() {
        shared.sort();
        shared.dedup();
        return Err(IntentError::MoveSharedNameServers {
            zone: zone.to_string(),
            from: source.account.clone(),
            to: target.account.clone(),
            shared: shared
                .iter()
                .map(|n| n.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            insecure: insecure(),
        });
    }
    Ok(source_key)
}

/// The move goes from the account the daemon last saw serving the zone: refused when
/// that was the target, by the account its last look was made at, or by the name servers
/// the provider listed then (`facts.delegation.provider_ns`, kept when a later look could not tell
/// the holder). Two accounts both signing the zone otherwise leave the direction to the
/// operator's word, and a move the wrong way would ask for the NS change to servers that
/// are the delegation already.
fn check_direction(
    zone: &str,
    last_account: Option<&str>,
    provider_ns: Option<&[String]>,
    source: &MoveSide,
    target: &MoveSide,
) -> Result<(), IntentError> {
    let wrong_way = |seen: String| IntentError::MoveWrongWay {
        zone: zone.to_string(),
        from: source.account.clone(),
        to: target.account.clone(),
        seen,
    };
    if last_account == Some(target.account.as_str()) {
        return Err(wrong_way(
            "its last look was made at that account".to_string(),
        ));
    }
    if let (Some(seen), Ok(Some(target_ns)), Ok(Some(source_ns))) =
        (provider_ns, &target.name_servers, &source.name_servers)
    {
        let seen = ns_set(seen);
        if seen == ns_set(target_ns) && seen != ns_set(source_ns) {
            return Err(wrong_way(format!(
                "the provider's name servers were {}",
                seen.join(", ")
            )));
        }
    }
    Ok(())
}

/// Asks one account what [`check_sides`] decides on, the three questions at once.
async fn ask_side<P: Provider>(
    account: &str,
    foreign_dnskeys_why: &'static str,
    client: &P,
    zone: &str,
) -> MoveSide {
    let (foreign, key, hosted) = futures::join!(
        client.foreign_dnskeys_supported(zone),
        client.dnssec_key(zone),
        client.zone(zone)
    );
    MoveSide {
        account: account.to_string(),
        foreign_dnskeys_why,
        foreign_dnskeys: foreign.map_err(|e| e.to_string()),
        key: match key {
            Ok(key) => Ok(Some(key.dnskey)),
            Err(ProviderError::DnssecDisabled) => Ok(None),
            Err(e) => Err(e.to_string()),
        },
        name_servers: hosted.map(|z| z.name_servers).map_err(|e| e.to_string()),
    }
}

/// Declares a signed move of `zone` (a normalised name) to the account `to` (DESIGN.md
/// section 2, "Signed moves"), after every check the move stands on: `to` is a configured
/// account; the zone is `active` with intent `enabled` and no move declared; exactly it
/// and one other account (the source) hold the zone; both can publish another signer's
/// DNSKEY; the source signs, with the target's algorithm if the target signs already;
/// each lists its own apex NS, the two sets apart; the daemon did not last see the zone
/// at the target. Nothing is recorded on a refusal; the
/// running daemon steps the move from the first phase on.
pub async fn declare_move(
    store: &Store,
    providers: &[ProviderConfig],
    zone: &str,
    to: &str,
    by: Operator<'_>,
    now: Timestamp,
) -> Result<MoveDeclared, IntentError> {
    let Some(target_config) = providers.iter().find(|p| p.name == to) else {
        let configured = providers
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        return Err(IntentError::UnknownAccount {
            to: to.to_string(),
            configured: if configured.is_empty() {
                "none".to_string()
            } else {
                configured
            },
        });
    };
    let said = |e| IntentError::Store(store.explain(e));
    let row = store
        .zone(zone)
        .await
        .map_err(said)?
        .ok_or_else(|| StoreError::UnknownZone(zone.to_string()))?;
    if let Some(refused) = crate::store::move_refused(&row) {
        return Err(refused.into());
    }
    let cannot_build = |e: crate::provider::fleet::ProviderSetupError| IntentError::MoveCannotAsk {
        zone: zone.to_string(),
        what: "which providers hold the zone".to_string(),
        error: e.to_string(),
    };
    let fleet = Providers::build(providers).map_err(cannot_build)?;
    let asked = fleet.ask_every_account(zone).await;
    let found: Vec<&str> = asked.found.iter().map(|&i| fleet.name(i)).collect();
    let source = move_source(zone, to, &found, &asked.unknown)?;
    let why_of = |name: &str| {
        providers
            .iter()
            .find(|p| p.name == name)
            .map_or("", |p| p.options.foreign_dnskeys_why())
    };
    // Both names came from the configuration just built from.
    let (Some(source_client), Some(target_client)) =
        (fleet.account_named(&source), fleet.account_named(to))
    else {
        return Err(IntentError::MoveCannotAsk {
            zone: zone.to_string(),
            what: format!("providers {source} and {to}"),
            error: "not among the accounts built".to_string(),
        });
    };
    let (source_side, target_side) = futures::join!(
        ask_side(&source, why_of(&source), source_client, zone),
        ask_side(
            to,
            target_config.options.foreign_dnskeys_why(),
            target_client,
            zone
        )
    );
    let source_key = check_sides(zone, &source_side, &target_side)?;
    check_direction(
        zone,
        row.account(),
        row.zone.facts.delegation.provider_ns.as_deref(),
        &source_side,
        &target_side,
    )?;
    let fqdn_zone = fqdn(zone).map_err(|e| IntentError::MoveCannotAsk {
        zone: zone.to_string(),
        what: "the zone's name".to_string(),
        error: e.to_string(),
    })?;
    let facts = &row.zone.facts;
    let mv = Move::new(&fqdn_zone, source_key)
        .between(&source, to)
        .seeded(Ttls {
            dnskey: facts.lifecycle.max_dnskey_ttl.unwrap_or(0),
            ds: facts.lifecycle.max_ds_ttl.unwrap_or(0),
            parent_ns: 0,
            apex_ns: 0,
        });
    store
        .declare_move(zone, &mv, &by.who(), now)
        .await
        .map_err(said)?;
    Ok(MoveDeclared {
        source,
        target: to.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dnssec::test_key;
    use crate::provider::gcore::GcoreClient;
    use crate::provider::powerdns::PowerDnsClient;
    use crate::provider::registry::Kind;

    fn side(account: &str, ns: &[&str]) -> MoveSide {
        MoveSide {
            account: account.to_string(),
            foreign_dnskeys_why: PowerDnsClient::FOREIGN_DNSKEYS_WHY,
            foreign_dnskeys: Ok(true),
            key: Ok(Some(test_key())),
            name_servers: Ok(Some(ns.iter().map(|n| n.to_string()).collect())),
        }
    }

    fn pair() -> (MoveSide, MoveSide) {
        (
            side("a", &["ns1.a.test.", "ns2.a.test."]),
            side("b", &["ns1.b.test.", "ns2.b.test."]),
        )
    }

    #[test]
    fn the_source_is_the_one_other_account_holding_the_zone() {
        assert_eq!(move_source("z.", "b", &["a", "b"], &[]).unwrap(), "a");
        assert_eq!(move_source("z.", "b", &["b", "a"], &[]).unwrap(), "a");

        let lacks = move_source("z.", "b", &["a"], &[]).unwrap_err();
        assert!(
            matches!(&lacks, IntentError::MoveTargetLacksZone { from, to, .. } if from == "a" && to == "b")
        );
        assert!(
            lacks
                .to_string()
                .contains("create the zone at provider b first (its records, unsigned)"),
            "{lacks}"
        );
        assert!(matches!(
            move_source("z.", "b", &[], &[]),
            Err(IntentError::MoveNowhere { .. })
        ));
        assert!(matches!(
            move_source("z.", "b", &["b"], &[]),
            Err(IntentError::MoveOnlyAtTarget { .. })
        ));
        let many = move_source("z.", "b", &["a", "b", "c"], &[]).unwrap_err();
        assert!(many.to_string().contains("providers a, b, c"), "{many}");
        // Never a guess: an account that could not say is a refusal, whatever the others
        // said.
        let unknown = move_source("z.", "b", &["a", "b"], &["c: timed out".into()]).unwrap_err();
        assert!(
            matches!(&unknown, IntentError::MoveCannotAsk { error, .. } if error == "c: timed out")
        );
        assert!(unknown.to_string().contains("try again"), "{unknown}");
    }

    #[test]
    fn two_accounts_that_can_take_it_give_the_source_key() {
        let (source, target) = pair();
        let key = check_sides("z.", &source, &target).unwrap();
        assert_eq!(Some(key), source.key.clone().unwrap());
        // A target not signing yet is the move's first phase.
        let target = MoveSide {
            key: Ok(None),
            ..target
        };
        assert!(check_sides("z.", &source, &target).is_ok());
    }

    #[test]
    fn an_account_without_foreign_dnskeys_is_named_with_the_insecure_way() {
        let (source, target) = pair();
        let source = MoveSide {
            foreign_dnskeys: Ok(false),
            ..source
        };
        let refused = check_sides("z.", &source, &target).unwrap_err();
        assert!(matches!(&refused, IntentError::MoveUnsupported { account, .. } if account == "a"));
        let text = refused.to_string();
        assert!(text.contains("direct-dnskey=yes"), "{text}");
        assert!(text.contains("the insecure way"), "{text}");
        assert!(text.contains("DESIGN.md rule 9"), "{text}");

        // Gcore cannot at all; said even when the other account could not be asked.
        let source = MoveSide {
            foreign_dnskeys: Err("timed out".into()),
            ..pair().0
        };
        let target = MoveSide {
            foreign_dnskeys_why: GcoreClient::FOREIGN_DNSKEYS_WHY,
            foreign_dnskeys: Ok(false),
            ..pair().1
        };
        let refused = check_sides("z.", &source, &target).unwrap_err();
        assert!(refused.to_string().contains("the Gcore API"), "{refused}");
        let refused = check_sides("z.", &source, &pair().1).unwrap_err();
        assert!(
            matches!(&refused, IntentError::MoveCannotAsk { what, .. } if what.contains("provider a")),
            "{refused}"
        );
        assert!(refused.to_string().contains("try again"), "{refused}");
    }

    #[test]
    fn the_source_signs_and_a_signing_target_with_its_algorithm() {
        let (source, target) = pair();
        let off = MoveSide {
            key: Ok(None),
            ..source.clone()
        };
        assert!(matches!(
            check_sides("z.", &off, &target),
            Err(IntentError::MoveSourceUnsigned { .. })
        ));
        let silent = MoveSide {
            key: Err("HTTP 503".into()),
            ..source.clone()
        };
        assert!(matches!(
            check_sides("z.", &silent, &target),
            Err(IntentError::MoveCannotAsk { .. })
        ));
        let rsa = Dnskey {
            algorithm: 8,
            ..test_key()
        };
        let other = MoveSide {
            key: Ok(Some(rsa)),
            ..target.clone()
        };
        let refused = check_sides("z.", &source, &other).unwrap_err();
        assert!(
            matches!(
                &refused,
                IntentError::MoveAlgorithms {
                    from_algorithm: 13,
                    to_algorithm: 8,
                    ..
                }
            ),
            "{refused}"
        );
        let text = refused.to_string();
        assert!(text.contains("RFC 6840"), "{text}");
        assert!(text.contains("the insecure way"), "{text}");
        let silent = MoveSide {
            key: Err("HTTP 503".into()),
            ..target
        };
        assert!(matches!(
            check_sides("z.", &source, &silent),
            Err(IntentError::MoveCannotAsk { .. })
        ));
    }

    #[test]
    fn the_move_goes_from_the_account_last_seen_serving_the_zone() {
        let (source, target) = pair();
        assert!(check_direction("z.", None, None, &source, &target).is_ok());
        assert!(check_direction("z.", Some("a"), None, &source, &target).is_ok());
        let seen_at_a: Vec<String> = vec!["NS2.a.test".into(), "ns1.a.test.".into()];
        assert!(check_direction("z.", None, Some(&seen_at_a), &source, &target).is_ok());

        let refused = check_direction("z.", Some("b"), None, &source, &target).unwrap_err();
        assert!(matches!(&refused, IntentError::MoveWrongWay { .. }));
        assert!(
            refused.to_string().contains("did you mean `--to a`?"),
            "{refused}"
        );
        let seen_at_b: Vec<String> = vec!["ns2.b.test.".into(), "NS1.B.test".into()];
        let refused = check_direction("z.", None, Some(&seen_at_b), &source, &target).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("the provider's name servers were ns1.b.test., ns2.b.test."),
            "{refused}"
        );
    }

    #[test]
    fn each_account_lists_its_own_name_servers() {
        let (source, target) = pair();
        let none = MoveSide {
            name_servers: Ok(None),
            ..target.clone()
        };
        assert!(matches!(
            check_sides("z.", &source, &none),
            Err(IntentError::MoveNoNameServers { account, .. }) if account == "b"
        ));
        let empty = MoveSide {
            name_servers: Ok(Some(Vec::new())),
            ..source.clone()
        };
        assert!(matches!(
            check_sides("z.", &empty, &target),
            Err(IntentError::MoveNoNameServers { account, .. }) if account == "a"
        ));
        // Compared in one form: case and the trailing dot do not make two names.
        let shared = MoveSide {
            name_servers: Ok(Some(vec!["NS2.A.test".into(), "ns9.b.test.".into()])),
            ..target
        };
        let refused = check_sides("z.", &source, &shared).unwrap_err();
        assert!(
            matches!(&refused, IntentError::MoveSharedNameServers { shared, .. } if shared == "ns2.a.test."),
            "{refused}"
        );
        assert!(
            refused.to_string().contains("the insecure way"),
            "{refused}"
        );
    }
}
