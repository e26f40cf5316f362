//! The names of the alert conditions, per zone and of the whole daemon: the vocabulary
//! the lifecycle judges (`lifecycle::alerts`), the daemon's conditions keep
//! (`crate::condition`, seen by the DNS observer and the provider client too), the store
//! records and the metrics count. At the bottom of the crate, so every layer may name them.

use serde::{Deserialize, Serialize};
use strum::{Display, EnumString, IntoStaticStr, VariantArray};

/// An alert condition. The names are a contract (`status --json`, the SQLite file, the
/// metrics labels, the hooks' `KIND`); to add one, see ARCHITECTURE.md "Where to add".
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    Display,
    EnumString,
    IntoStaticStr,
    VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum AlertKind {
    DsUnpublishedOverdue,
    DsRemovalOverdue,
    DsMismatch,
    /// The parent's DS set holds nothing validators can use: insecure to them.
    DsUnsupported,
    DnssecOffWithDs,
    /// The delegation changed while a DS the new name servers cannot match is
    /// published: resolvers that follow the new delegation fail validation.
    DelegationChangedWithDs,
    /// The DS set matches the served key but also holds DS records for keys nobody serves.
    DsStale,
    /// The operator requires validated evidence, and the parent zone is unsigned: the
    /// zone waits (safety rule 10).
    EvidenceUnvalidated,
    PartialPropagationStuck,
    ValidationFailed,
    SignaturesExpiring,
    ObservationFailing,
    RegistrarHookFailed,
    /// The provider has no such zone, yet some parent server delegates it to the
    /// provider's name servers: the domain does not resolve at all.
    ZoneMissingAtProvider,
    /// A zone held by one condition (`Facts::held_by`: a name server without the signed
    /// key, an unconfirmed chain, ...) for `observation_failing_after`, while its
    /// observations are complete (incomplete ones are `observation_failing`).
    WaitStalled,
    /// The child's name servers publish different CDS/CDNSKEY sets: a registry that
    /// scans acts on none of them (RFC 9975).
    CdsInconsistent,
    /// The child's CDS/CDNSKEY (the same at every name server) ask the parent for
    /// something other than the zone's intent: a key not served everywhere, a delete
    /// while enabled, a DS while disabled. A registry that scans may act on it.
    CdsUnexpected,
    /// The registry that scans (or is notified) did not act on the child's CDS within
    /// its stated period: the DS request went to the registrar after all.
    DsScanOverdue,
    /// A signed move holds on something only a person can repair (a key changed behind
    /// the daemon's back, a DS or delegation undone at the registrar, an account gone
    /// from the configuration): resolvers may fail the zone meanwhile.
    SignedMoveHeld,
    /// A key rollover holds on something only a person can repair (a key of the roll
    /// deleted, or one added, at the provider behind the daemon's back): the roll waits
    /// until it is repaired.
    KeyRollHeld,
    /// The provider rolls the zone's key on its own (a new SEP key beside the followed
    /// one): what the daemon asked of the registrar for it, until the roll ends.
    ProviderKeyRolled,
    /// The provider swapped its key at once: a name server serves the new key without
    /// the old while a parent server publishes no DS for it: resolvers sent there fail
    /// the zone now; the message names the DS to add.
    ProviderKeySwapped,
    /// Daemon-wide (never judged per zone, `crate::condition`): the provider's zone
    /// listing fails (known zones keep stepping).
    ZoneListingFailing,
    /// Daemon-wide: the provider refuses the account's credentials; calls back off.
    ProviderAuthFailing,
    /// Daemon-wide: the account's configuration names something the provider does not
    /// have (a PowerDNS `server_id` its API does not know): no zone can be asked, and
    /// none is called missing for it.
    ProviderAccountMisconfigured,
    /// Daemon-wide, per host: this host cannot reach IPv6, so every IPv6 parent address
    /// is unknown (`dns.address_families`).
    HostIpv6Unreachable,
    /// Daemon-wide: no key the anchored zone serves matches `dns.trust_anchor_file` (a
    /// stale or wrong anchor): nothing validates, every validated decision waits.
    TrustAnchorMismatch,
    /// Daemon-wide: an alert sink (`[[alerts.webhook]]`, `[[alerts.exec]]`) has failed
    /// every delivery for `alerts.sink_failing_after`; the other sinks still deliver.
    AlertSinkFailing,
}

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    Display,
    EnumString,
    IntoStaticStr,
    VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Severity {
    Warning,
    Critical,
}

impl AlertKind {
    pub const ALL: &'static [AlertKind] = Self::VARIANTS;
    /// The kinds of the whole daemon (`crate::condition`, the `daemon_alerts` table),
    /// never of one zone.
    pub const DAEMON_WIDE: &'static [AlertKind] = &[
        Self::ZoneListingFailing,
        Self::ProviderAuthFailing,
        Self::ProviderAccountMisconfigured,
        Self::HostIpv6Unreachable,
        Self::AlertSinkFailing,
        Self::TrustAnchorMismatch,
    ];

    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Critical: the domain fails validation now. Warning: a step is late or at risk.
    pub fn severity(self) -> Severity {
        match self {
            Self::DsMismatch
            | Self::DnssecOffWithDs
            | Self::DelegationChangedWithDs
            | Self::ValidationFailed
            | Self::ZoneMissingAtProvider
            | Self::SignedMoveHeld
            | Self::ProviderKeySwapped
            | Self::TrustAnchorMismatch => Severity::Critical,
            _ => Severity::Warning,
        }
    }
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}
