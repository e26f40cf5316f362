//! Whether this host can reach IPv6 at all. With `dns.address_families` allowing IPv6 on
//! a host that cannot, every IPv6 parent address is unknown, and no zone can leave a state
//! that needs every parent address. Said once for the host (the daemon-wide
//! `host_ipv6_unreachable`, naming the key to set), never as an unknown per zone: found at
//! start (no IPv6 route) or by the exchanges (every IPv6 one failing at once with
//! "network unreachable").

use std::io;
use std::net::{Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use crate::alert_kind::AlertKind;
use crate::condition::Condition;

/// What to do about it.
pub const FIX: &str = "if this host has no IPv6, set dns.address_families = [\"ipv4\"]";

/// IPv6 exchanges in a row failing with "network unreachable", none answered between,
/// that say the host cannot reach IPv6 (one alone can be one network's trouble).
pub const UNREACHABLE_IN_A_ROW: u32 = 8;

/// A global IPv6 address (the documentation prefix) whose route is asked for: `connect`
/// on a UDP socket only consults the routing table and sends nothing.
const PROBE: SocketAddr = SocketAddr::new(
    std::net::IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)),
    53,
);

/// Whether this host has a route to the IPv6 Internet; the reason when not.
///
/// Test builds only: `DNSSEC_WARDEN_TEST_NO_IPV6_ROUTE` set makes it say no, since a test
/// host may well have IPv6 (the answer otherwise comes from the host's routing table).
pub fn route() -> Result<(), String> {
    #[cfg(any(test, feature = "test-hooks"))]
    if std::env::var_os("DNSSEC_WARDEN_TEST_NO_IPV6_ROUTE").is_some() {
        return Err("network unreachable (DNSSEC_WARDEN_TEST_NO_IPV6_ROUTE)".into());
    }
    let socket = UdpSocket::bind((Ipv6Addr::UNSPECIFIED, 0)).map_err(|e| e.to_string())?;
    socket.connect(PROBE).map_err(|e| e.to_string())
}

/// What `route()`'s failure means, said in `check-config`, at start and in `status`.
pub fn no_route(cause: &str) -> String {
    format!(
        "this host has no IPv6 route ({cause}): every IPv6 parent address is unknown, so no \
         zone can leave a state that needs every parent address; {FIX}"
    )
}

/// An error sending to or connecting to an address that says the host cannot reach its
/// network at all (no route, no source address of its family).
pub fn is_unreachable(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NetworkUnreachable | io::ErrorKind::AddrNotAvailable
    )
}

/// The host's IPv6 as the exchanges and the start-up probe see it.
#[derive(Debug)]
pub struct Ipv6Health {
    condition: Arc<Condition>,
    in_a_row: AtomicU32,
    flagged: AtomicBool,
}

impl Default for Ipv6Health {
    fn default() -> Self {
        Self {
            condition: Arc::new(Condition::new(AlertKind::HostIpv6Unreachable)),
            in_a_row: AtomicU32::new(0),
            flagged: AtomicBool::new(false),
        }
    }
}

impl Ipv6Health {
    pub fn condition(&self) -> Arc<Condition> {
        self.condition.clone()
    }

    /// An IPv6 server answered (or at least the network carried the query).
    pub fn reached(&self) {
        if self.in_a_row.swap(0, Ordering::Relaxed) > 0
            || self.flagged.swap(false, Ordering::Relaxed)
        {
            self.condition.clear();
        }
    }

    /// An IPv6 exchange failed with "network unreachable".
    pub fn unreachable(&self, detail: &str) {
        let n = self
            .in_a_row
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1);
        if n >= UNREACHABLE_IN_A_ROW {
            self.flag(format!(
                "this host cannot reach IPv6: {n} IPv6 exchanges in a row failed ({detail}); \
                 every IPv6 parent address is unknown, so no zone can leave a state that needs \
                 every parent address; {FIX}"
            ));
        }
    }

    /// The start-up probe: no route (`Err`), or one (`Ok`: judged clear until the
    /// exchanges say otherwise).
    pub fn probed(&self, route: Result<(), String>) {
        match route {
            Ok(()) => self.condition.clear(),
            Err(cause) => self.flag(no_route(&cause)),
        }
    }

    fn flag(&self, message: String) {
        self.flagged.store(true, Ordering::Relaxed);
        self.condition.holds(message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_exchange_unreachable_flags_the_host_and_one_answer_clears_it() {
        let health = Ipv6Health::default();
        for _ in 1..UNREACHABLE_IN_A_ROW {
            health.unreachable("Network is unreachable (os error 101)");
        }
        assert!(!health.condition().holding(), "a few alone say nothing");
        health.reached();
        for _ in 1..UNREACHABLE_IN_A_ROW {
            health.unreachable("Network is unreachable (os error 101)");
        }
        assert!(
            !health.condition().holding(),
            "an answer between starts again"
        );
        health.unreachable("Network is unreachable (os error 101)");
        assert!(health.condition().holding());
        health.reached();
        assert!(!health.condition().holding());

        health.probed(Err("Network is unreachable (os error 101)".into()));
        let crate::condition::Seen::Holds(episode) = health.condition().seen() else {
            panic!("holds")
        };
        assert!(
            episode
                .message
                .contains("dns.address_families = [\"ipv4\"]")
        );
        health.reached();
        assert!(!health.condition().holding());
    }

    #[test]
    fn unreachable_errors_are_told_from_others() {
        let unreachable = io::Error::from(io::ErrorKind::NetworkUnreachable);
        assert!(is_unreachable(&unreachable));
        assert!(is_unreachable(&io::Error::from(
            io::ErrorKind::AddrNotAvailable
        )));
        assert!(!is_unreachable(&io::Error::from(
            io::ErrorKind::ConnectionRefused
        )));
    }
}
