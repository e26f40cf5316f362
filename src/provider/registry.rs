//! The providers the daemon speaks to, listed once ([`providers!`], invoked in
//! `provider/mod.rs`), and what the list asks of each provider's folder ([`Kind`]): its
//! `kind` name, its configuration block, its settings, how its client is built, what its
//! API cannot do. Everything that goes over the kinds (the `Client` and `ProviderOptions`
//! enums, a block read by its `kind`, every call handed to the account's client) is
//! generated from the list, never written arm by arm.

use std::sync::Arc;
use std::time::Duration;

use serde::de::{DeserializeOwned, Visitor};

use super::{Provider, ProviderError};
use crate::condition::Condition;
use crate::de::{FileDir, KeyError};
use crate::secret::{SecretError, SecretSource};

/// Default of a provider block's `request_timeout`: one HTTP attempt.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Default of a provider block's `max_attempts`, the first included.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;
/// Default of a provider block's `retry_budget`: the time one call may spend on retries.
pub const DEFAULT_RETRY_BUDGET: Duration = Duration::from_secs(120);

/// `#[serde(default = ...)]` of `request_timeout`.
pub fn default_request_timeout() -> Duration {
    DEFAULT_REQUEST_TIMEOUT
}
/// `#[serde(default = ...)]` of `max_attempts`.
pub fn default_max_attempts() -> u32 {
    DEFAULT_MAX_ATTEMPTS
}
/// `#[serde(default = ...)]` of `retry_budget`.
pub fn default_retry_budget() -> Duration {
    DEFAULT_RETRY_BUDGET
}

/// What the list needs of a provider, implemented by its client: the provider's folder
/// holds all of it.
pub trait Kind: Provider + Sized {
    /// The `kind` its configuration blocks are written with.
    const KIND: &'static str;
    /// Why an account of this kind cannot publish another signer's DNSKEY, when it says
    /// it cannot ([`Provider::foreign_dnskeys_supported`]): what a refused signed move
    /// tells the operator.
    const FOREIGN_DNSKEYS_WHY: &'static str;
    /// Its block as written (`[providers.NAME]` without `kind`): every key typed and
    /// checked on its own, unknown keys refused (`deny_unknown_fields`).
    type Block: DeserializeOwned;
    /// What its client is built from: the block after the checks across its keys, its
    /// secrets by source (read only when the client is built).
    type Settings: std::fmt::Debug + Clone + Send + Sync;

    /// The checks across the block's keys; relative paths taken from `dir`. The error's
    /// key is relative to the block (`config` names the block).
    fn settings(block: Self::Block, dir: FileDir<'_>) -> Result<Self::Settings, KeyError>;
    /// Where its secrets live (for the warnings about files anyone can read).
    fn secret_sources(settings: &Self::Settings) -> Vec<&SecretSource>;
    /// The client, its secrets read.
    fn build(settings: &Self::Settings) -> Result<Self, SetupError>;
    /// The account's daemon-wide conditions (credentials refused, configuration the
    /// provider does not know).
    fn account_conditions(&self) -> Vec<Arc<Condition>>;
    /// What the provider says of the account's configuration where its API can say it
    /// without a zone (`check-config`): `Misconfigured` names the key at fault.
    fn check_account(&self) -> impl Future<Output = Result<(), ProviderError>> + Send {
        async { Ok(()) }
    }
}

/// Why a client could not be built (`fleet` adds the account's name).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Secret(#[from] SecretError),
    #[error(transparent)]
    Client(#[from] ProviderError),
}

/// The keys a block type reads, as its derived `Deserialize` names them: asked of the
/// type itself, so that a key of another kind's block is said to be that kind's.
pub fn fields_of<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Fields(&mut fields));
    fields
}

/// A deserializer that only notes the fields a struct asks for, then stops.
struct Fields<'a>(&'a mut &'static [&'static str]);

#[derive(Debug)]
struct Stop;

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("only the fields are asked for")
    }
}

impl std::error::Error for Stop {}

impl serde::de::Error for Stop {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Stop
    }
}

impl<'de> serde::Deserializer<'de> for Fields<'_> {
    type Error = Stop;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
        Err(Stop)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Stop> {
        *self.0 = fields;
        Err(Stop)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
        byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
        identifier ignored_any
    }
}

/// The list of providers: `Variant(folder::ClientType)`, each client a [`Kind`] (the
/// folder a module of `provider`). Generates
/// `Client` (one account's client, whichever its kind), `ProviderOptions` (its settings),
/// `Block` (its block as read), `KINDS`, the `Registered` trait (an account's settings
/// of a known kind), and the dispatch macros `on_client!` and `on_options!`, each a
/// `match` with one arm per provider, as the store's `on_backend!`.
macro_rules! providers {
    ($($variant:ident($module:ident::$client:ident)),+ $(,)?) => {
        $crate::provider::registry::providers!(
            @with ($) $($variant($crate::provider::$module::$client)),+
        );
    };
    (@with ($d:tt) $($variant:ident($client:ty)),+) => {
        /// One account's client, whichever its kind. A handful live for the daemon's
        /// life: their size difference costs nothing.
        #[derive(Debug)]
        #[allow(clippy::large_enum_variant)]
        pub enum Client {
            $($variant($client),)+
        }

        /// What an account of each kind is built from: its kind's settings.
        #[derive(Debug, Clone)]
        pub enum ProviderOptions {
            $($variant(<$client as $crate::provider::registry::Kind>::Settings),)+
        }

        /// A provider block as read, by its kind.
        pub enum Block {
            $($variant(<$client as $crate::provider::registry::Kind>::Block),)+
        }

        $(
            impl From<$client> for Client {
                fn from(client: $client) -> Self {
                    Client::$variant(client)
                }
            }
        )+

        /// Every provider's `kind`, in the list's order.
        pub const KINDS: &[&str] = &[$(<$client as $crate::provider::registry::Kind>::KIND,)+];

        impl Block {
            /// The block of `kind` (its keys but `kind`) read from `d`; `None`: no
            /// provider is of that kind.
            pub fn read<'de, D: serde::Deserializer<'de>>(
                kind: &str,
                d: D,
            ) -> Option<Result<Self, D::Error>> {
                $(
                    if kind == <$client as $crate::provider::registry::Kind>::KIND {
                        return Some(
                            <<$client as $crate::provider::registry::Kind>::Block as serde::Deserialize>::deserialize(d)
                                .map(Block::$variant),
                        );
                    }
                )+
                None
            }

            /// The keys a block of `kind` reads (none for an unknown kind).
            pub fn fields(kind: &str) -> &'static [&'static str] {
                $(
                    if kind == <$client as $crate::provider::registry::Kind>::KIND {
                        return $crate::provider::registry::fields_of::<
                            <$client as $crate::provider::registry::Kind>::Block,
                        >();
                    }
                )+
                &[]
            }

            /// The checks across the block's keys: the account's settings.
            pub fn settings(
                self,
                dir: $crate::de::FileDir<'_>,
            ) -> Result<ProviderOptions, $crate::de::KeyError> {
                match self {
                    $(Block::$variant(b) => {
                        <$client as $crate::provider::registry::Kind>::settings(b, dir)
                            .map(ProviderOptions::$variant)
                    })+
                }
            }
        }

        /// An account's settings when it is of this kind.
        pub trait Registered: $crate::provider::registry::Kind {
            fn settings_in(options: &ProviderOptions) -> Option<&Self::Settings>;
        }

        $(
            impl Registered for $client {
                fn settings_in(options: &ProviderOptions) -> Option<&Self::Settings> {
                    #[allow(unreachable_patterns)]
                    match options {
                        ProviderOptions::$variant(s) => Some(s),
                        _ => None,
                    }
                }
            }
        )+

        /// `$body` with `$c` bound to the account's client, whichever its kind.
        macro_rules! on_client {
            ($d client:expr, |$d c:ident| $d body:expr) => {
                match $d client {
                    $(Client::$variant($d c) => $d body,)+
                }
            };
        }

        /// `$body` with `$s` bound to the account's settings and `$k` naming its
        /// client's type (a [`Kind`](crate::provider::registry::Kind)).
        macro_rules! on_options {
            ($d options:expr, |$d s:ident: $d k:ident| $d body:expr) => {
                match $d options {
                    $(ProviderOptions::$variant($d s) => {
                        type $d k = $client;
                        $d body
                    })+
                }
            };
        }
    };
}

pub(crate) use providers;

#[cfg(test)]
mod tests {
    use super::super::{Block, KINDS};

    #[test]
    fn every_kind_is_listed_once_and_its_block_names_its_keys() {
        for (i, kind) in KINDS.iter().enumerate() {
            assert!(!KINDS[..i].contains(kind), "{kind} twice");
            let fields = Block::fields(kind);
            assert!(!fields.is_empty(), "{kind}");
            assert!(!fields.contains(&"kind"), "{kind}: {fields:?}");
        }
        assert!(Block::fields("powerdns").contains(&"server_id"));
        assert!(!Block::fields("gcore").contains(&"server_id"));
        assert!(Block::fields("bind").is_empty());
    }
}
