//! The public DNS as dnssec-warden sees it: the DS at every parent server, the DNSKEY at
//! every child server, and whether the chain validates.
//!
//! Three layers, imports pointing down only (as hickory keeps protocol, networking and
//! DNSSEC proof apart):
//! - [`observe`]: the observer and its vocabulary (answers, verdicts, the delegation),
//!   `check`'s look, the `[dns]` settings; uses both below.
//! - [`validate`]: the chain from the trust anchor, the DS proofs, verified signatures;
//!   uses `net`.
//! - [`net`]: the wire form, sockets, the querier and its caps, an observation's budget,
//!   and discovery of whom to ask (zone cuts from the root hints); uses neither above.

pub mod net;
pub mod observe;
pub mod validate;

// The paths the rest of the crate and the tests name.
pub use net::budget::{Budget, Exhausted, ObservationBudget};
pub use net::discovery::AddressFamilies;
pub use net::transport::{ExchangeError, NetTransport, Transport};
pub use net::{budget, notify, wire};
pub use observe::delegation::{
    DelegationAssessment, DelegationDetail, DelegationMatch, DelegationVerdict, NsAnswer,
};
pub use observe::dsync::{DsyncAnswer, DsyncVerdict, DsyncView, NotifyTarget};
pub use observe::model::{
    ChildKeys, ChildView, DnskeyAnswer, DsAnswer, Evidence, ParentDsVerdict, ParentView,
    ServedKeys, ServerAnswer, SignatureWindow, UnknownReason, VerdictReason,
};
pub use observe::observer::{DnsObserver, ObserverOptions, ObserverSetupError};
pub use observe::settings::DnsSettings;
pub use observe::signals::{Published, Signals, SignalsVerdict};
pub use observe::{ObserveError, Observer, classify, delegation};
pub use validate::{ValidationProbe, ValidationVerdict, combine_validation};
pub use validate::{anchor, proof, validator};
