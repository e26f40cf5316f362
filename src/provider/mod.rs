//! The managed DNS provider: the [`Provider`] trait the engine depends on (so that it can
//! be tested with fakes, and a second provider added), its errors and their classes, and
//! one implementation per provider API in its own folder ([`gcore`], [`powerdns`],
//! [`cloudflare`], [`route53`]), each
//! listed once below ([`registry`]), and [`fleet`]: several accounts in one daemon, each
//! zone's calls at the account holding it.
//!
//! The trait speaks the daemon's terms ([`HostedZone`], [`ListedZone`], the signing key
//! [`DnssecKey`] checked against its own public key by whoever implements it); each API's
//! own shapes stay in its folder.

mod error;
mod http;
pub mod registry;

// The providers: a folder each, and its line in the list.
pub mod cloudflare;
pub mod gcore;
pub mod powerdns;
pub mod route53;
registry::providers! {
    Gcore(gcore::GcoreClient),
    PowerDns(powerdns::PowerDnsClient),
    Cloudflare(cloudflare::CloudflareClient),
    Route53(route53::Route53Client),
}

// After the list: it uses the dispatch the list generates.
pub mod fleet;

use serde::Deserialize;

pub use crate::dnssec::{CdsHalves, CdsPublication};
use crate::dnssec::{Dnskey, DnssecKey};

pub use crate::retry::{
    MAX_RETRY_AFTER, RetryPolicy, is_retryable_status, parse_retry_after, parse_retry_after_at,
};
pub use error::{ACCOUNT_MISCONFIGURED, ACCOUNT_REFUSED, Attempts, ErrorClass, ProviderError};
pub use http::{MAX_BODY_BYTES, PROVIDER_REQUESTS_IN_FLIGHT};

/// What the daemon keeps of an entry of the paged zone listing: its name and its
/// `dnssec_enabled` (missing or `null`: unknown). 100,000 of these are small; 100,000
/// [`ProviderZone`]s with their record summaries are not.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ListedZone {
    pub name: String,
    #[serde(default)]
    pub dnssec_enabled: Option<bool>,
}

/// The answer to switching DNSSEC on or off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnssecSwitched {
    pub message: Option<String>,
    /// The key the provider now signs with; only when switching on.
    pub key: Option<DnssecKey>,
}

/// Asked right before each attempt of a request leaves; false: do not send it (the last
/// failure stands, or [`ProviderError::NotSent`]).
pub type SendPermit<'a> = &'a (dyn Fn() -> PermitAnswer<'a> + Send + Sync);

/// The answer of a [`SendPermit`], once it has asked (a database, say).
pub type PermitAnswer<'a> = std::pin::Pin<Box<dyn Future<Output = bool> + Send + 'a>>;

/// A zone as the provider hosts it, in the terms the daemon decides on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostedZone {
    pub name: String,
    /// `None` when the provider did not say: unknown, never "off". Decisions use the
    /// signing key ([`Provider::dnssec_key`]), not this flag.
    pub dnssec_enabled: Option<bool>,
    /// The provider's name servers for the zone, as a comparable set
    /// (`dns::delegation::ns_set`); `None` when it lists none (unknown, never "no name
    /// servers").
    pub name_servers: Option<Vec<String>>,
}

/// The kind of key a rollover adds: a key-signing key and a zone-signing key of a split
/// pair, or a combined signing key. A KSK and a CSK are the same DNSKEY (flags 257, the
/// SEP bit); a ZSK is flags 256.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyKind {
    Ksk,
    Zsk,
    Csk,
}

impl KeyKind {
    /// The DNSKEY flags a key of this kind carries.
    pub fn flags(self) -> u16 {
        match self {
            Self::Ksk | Self::Csk => 257,
            Self::Zsk => 256,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Ksk => "ksk",
            Self::Zsk => "zsk",
            Self::Csk => "csk",
        }
    }
}

/// The algorithms a key may be added with: RSA/SHA-256 (8), for zones that stay with
/// RSA; ECDSA P-256 (13) and Ed25519 (15), those RFC 8624 recommends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyAlgorithm {
    RsaSha256,
    EcdsaP256Sha256,
    Ed25519,
}

impl KeyAlgorithm {
    /// The DNSSEC algorithm number.
    pub fn number(self) -> u8 {
        match self {
            Self::RsaSha256 => 8,
            Self::EcdsaP256Sha256 => 13,
            Self::Ed25519 => 15,
        }
    }

    /// The algorithm of this number, if a key may be added with it.
    pub fn from_number(number: u8) -> Option<Self> {
        match number {
            8 => Some(Self::RsaSha256),
            13 => Some(Self::EcdsaP256Sha256),
            15 => Some(Self::Ed25519),
            _ => None,
        }
    }
}

/// Whether a key signs the zone (`active`: its RRSIGs are served) and whether its DNSKEY
/// is in the apex DNSKEY RRset (`published`), independently: a key published and not
/// active is a pre-published key, one active and not published signs before its DNSKEY
/// is seen (RFC 6781 section 4.1.4's conservative algorithm rollover).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyState {
    pub active: bool,
    pub published: bool,
}

/// A key to add.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NewKey {
    pub kind: KeyKind,
    pub algorithm: KeyAlgorithm,
    pub state: KeyState,
}

/// One of the zone's signing keys as the provider keeps them, in the daemon's terms: the
/// provider's id for it (opaque, only ever handed back to the same provider), its DNSKEY
/// as parsed from the provider's presentation form (flags, algorithm, key tag all read
/// from the key itself, never from the provider's word; a field the provider gives
/// beside it that disagrees is an error), and its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderKey {
    pub id: String,
    pub dnskey: Dnskey,
    pub state: KeyState,
}

impl ProviderKey {
    /// The SEP flag: a KSK or CSK, the key a DS names.
    pub fn is_sep(&self) -> bool {
        self.dnskey.is_sep()
    }

    pub fn algorithm(&self) -> u8 {
        self.dnskey.algorithm
    }

    /// Recomputed from the key (RFC 4034 appendix B).
    pub fn key_tag(&self) -> u16 {
        self.dnskey.key_tag()
    }
}

/// Why a provider whose API exposes no keys refuses a key call, before any request.
pub fn keys_refused(api: &str, zone: &str) -> ProviderError {
    ProviderError::Invalid(format!(
        "{api} exposes no keys: a rollover of {zone} there is the provider's own"
    ))
}

/// What the daemon needs from a provider, whichever its API. Zone names may carry the
/// trailing dot.
pub trait Provider: Send + Sync {
    /// One configured account's own client (`fleet::Providers`' accounts; a lone client
    /// names none).
    type Account: Provider;
    /// The account named `name` in the configuration, to be asked directly about a zone
    /// it shares with another account: only a declared signed move does (DESIGN.md rule
    /// 13's exception, rule 15), everything else goes through the zone's one holder.
    fn account_named(&self, name: &str) -> Option<&Self::Account>;
    fn zone(&self, zone: &str) -> impl Future<Output = Result<HostedZone, ProviderError>> + Send;
    /// Every zone of the account, each its name and DNSSEC flag only (what the engine and
    /// the zone keeper need: little memory for a large account).
    fn zone_flags(&self) -> impl Future<Output = Result<Vec<ListedZone>, ProviderError>> + Send;
    /// Switches DNSSEC on or off. `may_send` is asked right before every attempt leaves
    /// (the first, once its turn among the requests in flight has come; a retry after a
    /// timeout or a 5xx; after a token renewal): with several daemons, whether this one's
    /// lease on the zone is still current, so that a request whose lease ran out while it
    /// waited is not sent, nor repeated (DESIGN.md rule 12).
    fn set_dnssec(
        &self,
        zone: &str,
        enabled: bool,
        may_send: SendPermit<'_>,
    ) -> impl Future<Output = Result<DnssecSwitched, ProviderError>> + Send;
    /// The signing key, checked against its own DS (safety rule 5);
    /// [`ProviderError::DnssecDisabled`] when DNSSEC is off.
    fn dnssec_key(
        &self,
        zone: &str,
    ) -> impl Future<Output = Result<DnssecKey, ProviderError>> + Send;
    /// The largest TTL of the zone's records (it bounds the enabling hold); `Ok(None)`
    /// when a record set has no known TTL (a wait bounded by a guess would be too short).
    fn largest_ttl(
        &self,
        zone: &str,
    ) -> impl Future<Output = Result<Option<u32>, ProviderError>> + Send;
    /// What the zone's CDS/CDNSKEY publication is set to, where the API controls it,
    /// each half as read (halves that differ: a setting of the daemon's half applied);
    /// `Ok(None)` where it does not (the Gcore API shows none), asking nothing.
    fn cds_publication(
        &self,
        _zone: &str,
    ) -> impl Future<Output = Result<Option<CdsHalves>, ProviderError>> + Send {
        async { Ok(None) }
    }
    /// Sets the zone's CDS/CDNSKEY publication (DESIGN.md rule 14), with `may_send` as
    /// for [`Provider::set_dnssec`]. A provider whose API cannot is refused before any
    /// request.
    fn set_cds_publication(
        &self,
        zone: &str,
        _to: CdsPublication,
        _may_send: SendPermit<'_>,
    ) -> impl Future<Output = Result<(), ProviderError>> + Send {
        let zone = zone.to_string();
        async move {
            Err(ProviderError::Invalid(format!(
                "the provider's API does not control the CDS of {zone}"
            )))
        }
    }
    /// Whether the provider serves DNSKEY records of another signer beside its own in the
    /// zone's apex DNSKEY RRset, signed by its own key (RFC 8901 model 2, the multi-signer
    /// step of a move between providers). `Ok(false)` where the API cannot, asking nothing.
    fn foreign_dnskeys_supported(
        &self,
        _zone: &str,
    ) -> impl Future<Output = Result<bool, ProviderError>> + Send {
        async { Ok(false) }
    }
    /// The other signers' DNSKEYs the provider stores for the zone's apex (never its own
    /// signing keys); `Ok(None)` where the API cannot store any, asking nothing. A stored
    /// record that does not parse is an error naming it, never left out.
    fn foreign_dnskeys(
        &self,
        _zone: &str,
    ) -> impl Future<Output = Result<Option<Vec<Dnskey>>, ProviderError>> + Send {
        async { Ok(None) }
    }
    /// Makes the zone's stored foreign DNSKEYs exactly `keys` (empty: none), with
    /// `may_send` as for [`Provider::set_dnssec`]. The keys are checked first
    /// ([`foreign_dnskey_set`]); a provider whose API cannot is refused before any request.
    fn set_foreign_dnskeys(
        &self,
        zone: &str,
        _keys: &[Dnskey],
        _ttl: u32,
        _may_send: SendPermit<'_>,
    ) -> impl Future<Output = Result<(), ProviderError>> + Send {
        let zone = zone.to_string();
        async move {
            Err(ProviderError::Invalid(format!(
                "the provider's API cannot publish another signer's DNSKEY for {zone}"
            )))
        }
    }
    /// The zone's signing keys as the provider keeps them, active or not, published or
    /// not, each checked against its own public key; `Ok(None)` where the API exposes
    /// none (the Gcore API), asking nothing. One key that does not parse or check fails
    /// the whole listing, naming it: never left out.
    fn keys(
        &self,
        _zone: &str,
    ) -> impl Future<Output = Result<Option<Vec<ProviderKey>>, ProviderError>> + Send {
        async { Ok(None) }
    }
    /// How a refused key call names the provider's API (`keys_refused`): an API that
    /// exposes no keys says so once, here, and the three key calls refuse by default.
    fn keys_api(&self) -> &'static str {
        "the provider's API"
    }
    /// Adds a key of `key`'s kind, algorithm and state, answering it as the provider made
    /// it; `may_send` as for [`Provider::set_dnssec`]. Never repeated once an attempt may
    /// have taken effect (a second attempt would add a second key): such an outcome is
    /// [`ProviderError::KeyMaybeAdded`], to be settled by listing the keys. A provider
    /// whose API exposes no keys is refused before any request.
    fn add_key(
        &self,
        zone: &str,
        _key: NewKey,
        _may_send: SendPermit<'_>,
    ) -> impl Future<Output = Result<ProviderKey, ProviderError>> + Send {
        let refused = keys_refused(self.keys_api(), zone);
        async move { Err(refused) }
    }
    /// Sets whether the key `id` (as [`Provider::keys`] names it) signs and is published;
    /// level-triggered, `may_send` as for [`Provider::set_dnssec`]. A key the provider does
    /// not have is [`ProviderError::NotFound`].
    fn set_key_state(
        &self,
        zone: &str,
        _id: &str,
        _state: KeyState,
        _may_send: SendPermit<'_>,
    ) -> impl Future<Output = Result<(), ProviderError>> + Send {
        let refused = keys_refused(self.keys_api(), zone);
        async move { Err(refused) }
    }
    /// Deletes the key `id`, with `may_send` as for [`Provider::set_dnssec`]. A key the
    /// provider does not have (already deleted) is [`ProviderError::NotFound`].
    fn delete_key(
        &self,
        zone: &str,
        _id: &str,
        _may_send: SendPermit<'_>,
    ) -> impl Future<Output = Result<(), ProviderError>> + Send {
        let refused = keys_refused(self.keys_api(), zone);
        async move { Err(refused) }
    }
    /// The name of the configured account that holds the zone, as far as known without
    /// asking (`fleet::Providers`); `None` for a lone client.
    fn account(&self, _zone: &str) -> Option<String> {
        None
    }
    /// How many accounts stand behind this provider (1 for a lone client).
    fn accounts(&self) -> usize {
        1
    }
}

/// At most this many foreign DNSKEYs in a zone's apex. Every key of the DNSKEY RRset is
/// one a validator may have to try against each RRSIG over it: since KeyTrap
/// (CVE-2023-50387) resolvers cap that work and fail a zone past it, and a large set also
/// pushes the answer past 1232 bytes onto TCP. Two or three signers with a key roll in
/// progress need four or so; eight leaves room and stays far below those caps.
pub const MAX_FOREIGN_DNSKEYS: usize = 8;

/// The foreign DNSKEYs a provider may be asked to publish for `zone`: each a DNSSEC zone
/// key (flags bit 7, protocol 3) of an algorithm validators implement
/// ([`crate::dnssec::algorithm_supported`]), duplicates once, at most
/// [`MAX_FOREIGN_DNSKEYS`]. Anything else is [`ProviderError::Invalid`], before any
/// request: a key validators cannot use would only make the RRset larger.
pub fn foreign_dnskey_set(zone: &str, keys: &[Dnskey]) -> Result<Vec<Dnskey>, ProviderError> {
    let mut set: Vec<Dnskey> = Vec::with_capacity(keys.len().min(MAX_FOREIGN_DNSKEYS));
    for key in keys {
        let why = if !key.is_zone_key() {
            Some("not a zone key (flags bit 7 clear)")
        } else if key.protocol != crate::dnssec::PROTOCOL_DNSSEC {
            Some("not protocol 3")
        } else if !crate::dnssec::algorithm_supported(key.algorithm) {
            Some("an algorithm validators do not implement")
        } else if key.public_key.is_empty() {
            Some("an empty public key")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(ProviderError::Invalid(format!(
                "foreign DNSKEY {} (flags {}, algorithm {}) for {zone}: {why}",
                key.key_tag(),
                key.flags,
                key.algorithm
            )));
        }
        if !set.contains(key) {
            set.push(key.clone());
        }
    }
    if set.len() > MAX_FOREIGN_DNSKEYS {
        return Err(ProviderError::Invalid(format!(
            "{} foreign DNSKEYs for {zone}: at most {MAX_FOREIGN_DNSKEYS} (the DNSKEY set validators must check stays small)",
            set.len()
        )));
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dnssec::test_key;

    #[test]
    fn foreign_keys_are_zone_keys_validators_use_each_once_and_few() {
        let key = test_key();
        let set = foreign_dnskey_set("ex.test.", &[key.clone(), key.clone()]).unwrap();
        assert_eq!(set, vec![key.clone()]);
        assert_eq!(foreign_dnskey_set("ex.test.", &[]).unwrap(), vec![]);

        let not_zone = Dnskey {
            flags: 1,
            ..key.clone()
        };
        let refused = foreign_dnskey_set("ex.test.", &[not_zone]).unwrap_err();
        assert!(
            matches!(&refused, ProviderError::Invalid(m) if m.contains("not a zone key") && m.contains("ex.test.")),
            "{refused:?}"
        );
        let dsa = Dnskey {
            algorithm: 3,
            ..key.clone()
        };
        assert!(matches!(
            foreign_dnskey_set("ex.test.", &[dsa]),
            Err(ProviderError::Invalid(_))
        ));

        let many: Vec<Dnskey> = (0..=MAX_FOREIGN_DNSKEYS).map(|_| test_key()).collect();
        assert!(matches!(
            foreign_dnskey_set("ex.test.", &many),
            Err(ProviderError::Invalid(m)) if m.contains("at most")
        ));
        assert_eq!(
            foreign_dnskey_set("ex.test.", &many[..MAX_FOREIGN_DNSKEYS])
                .unwrap()
                .len(),
            MAX_FOREIGN_DNSKEYS
        );
    }
}
