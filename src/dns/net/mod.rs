//! Asking name servers: the wire form, one socket per server with many queries on it,
//! the querier with its caps and retries, an observation's budget, this host's IPv6,
//! discovery of whom to ask (zone cuts and their servers, from the root hints), and
//! NOTIFY to a parent's notification target. Names nothing of validation or the observer.

pub mod budget;
pub mod discovery;
pub mod episodes;
pub mod ipv6;
pub mod notify;
pub mod query;
pub mod silence;
pub mod transport;
pub mod wire;

/// The maps every exchange visits (questions in flight, a socket's waiting IDs, the
/// sockets, the delegation cache). Their keys are ours (names we ask, IDs we drew), not
/// an attacker's choice; SipHash's cost shows at tens of thousands of exchanges a second.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
