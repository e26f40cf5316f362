//! A tiny `sd_notify(3)` client: one Unix datagram to `$NOTIFY_SOCKET` per message, for
//! `Type=notify` with `WatchdogSec=`. Without `NOTIFY_SOCKET` (not under systemd) every
//! call is a no-op, so the daemon runs the same from a terminal.
//!
//! ```no_run
//! use dnssec_warden::systemd;
//! systemd::ready();
//! systemd::status("12 zones: 10 active, 1 awaiting_ds, 1 ttl_wait"); // see status_line
//! if let Some(every) = systemd::watchdog_interval() {
//!     // Ping at half the interval, from a loop that proves the daemon makes progress.
//!     let _ = every / 2;
//!     systemd::watchdog();
//! }
//! systemd::stopping();
//! ```

use std::ffi::OsStr;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::Path;
use std::time::Duration;

use crate::lifecycle::State;

#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("NOTIFY_SOCKET {0:?} is neither an absolute path nor an abstract name (@...)")]
    BadAddress(String),
    #[error("cannot notify systemd at {address:?}: {error}")]
    Send {
        address: String,
        error: std::io::Error,
    },
}

/// Where notifications go: a socket path, or an abstract name (`@` in `NOTIFY_SOCKET`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SdNotify {
    address: String,
}

impl SdNotify {
    /// From `$NOTIFY_SOCKET`; `None` when it is unset or empty.
    pub fn from_env() -> Option<Self> {
        std::env::var_os("NOTIFY_SOCKET")
            .filter(|v| !v.is_empty())
            .map(|v| Self::at(&v.to_string_lossy()))
    }

    /// `"/run/systemd/notify"` or `"@abstract-name"`.
    pub fn at(address: &str) -> Self {
        Self {
            address: address.to_string(),
        }
    }

    fn socket_addr(&self) -> Result<SocketAddr, NotifyError> {
        let bad = || NotifyError::BadAddress(self.address.clone());
        if let Some(name) = self.address.strip_prefix('@') {
            #[cfg(target_os = "linux")]
            {
                use std::os::linux::net::SocketAddrExt;
                return SocketAddr::from_abstract_name(name.as_bytes()).map_err(|_| bad());
            }
            #[cfg(not(target_os = "linux"))]
            {
                let _ = name;
                return Err(bad());
            }
        }
        if !self.address.starts_with('/') {
            return Err(bad());
        }
        SocketAddr::from_pathname(Path::new(OsStr::new(&self.address))).map_err(|_| bad())
    }

    /// Sends one notification: newline-separated `KEY=VALUE` assignments.
    pub fn send(&self, state: &str) -> Result<(), NotifyError> {
        let addr = self.socket_addr()?;
        let send_error = |error| NotifyError::Send {
            address: self.address.clone(),
            error,
        };
        let socket = UnixDatagram::unbound().map_err(send_error)?;
        // One datagram; systemd reads it whole. Never blocks for long: the socket is
        // local and systemd drains it.
        socket
            .send_to_addr(state.as_bytes(), &addr)
            .map_err(send_error)?;
        Ok(())
    }
}

/// Sends `state` if running under systemd; errors are logged, never fatal.
fn notify(state: &str) {
    if let Some(target) = SdNotify::from_env()
        && let Err(e) = target.send(state)
    {
        tracing::warn!("{e}");
    }
}

/// Start-up is complete (`READY=1`), with a first status line.
pub fn ready() {
    notify("READY=1");
}

/// A one-line status for `systemctl status` (`STATUS=...`). Newlines are flattened: a
/// newline would start a new assignment.
pub fn status(text: &str) {
    notify(&format!("STATUS={}", text.replace(['\n', '\r'], " ")));
}

/// The daemon is alive and making progress (`WATCHDOG=1`).
pub fn watchdog() {
    notify("WATCHDOG=1");
}

/// Shutdown has begun (`STOPPING=1`).
pub fn stopping() {
    notify("STOPPING=1");
}

/// The STATUS line from `Store::state_counts`: `"12 zones: 10 active, 1 awaiting_ds,
/// 1 ttl_wait"`, largest first (`unobserved`: zones not yet adopted).
pub fn status_line(counts: &[(Option<State>, i64)]) -> String {
    let total: i64 = counts.iter().map(|(_, n)| n).sum();
    let mut parts: Vec<(i64, &str)> = counts
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(s, n)| (*n, s.map(State::as_str).unwrap_or("unobserved")))
        .collect();
    parts.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    let noun = if total == 1 { "zone" } else { "zones" };
    let detail: Vec<String> = parts.iter().map(|(n, s)| format!("{n} {s}")).collect();
    if detail.is_empty() {
        format!("{total} {noun}")
    } else {
        format!("{total} {noun}: {}", detail.join(", "))
    }
}

/// The watchdog interval systemd expects pings within, if the watchdog is on for this
/// process (`$WATCHDOG_USEC`, and `$WATCHDOG_PID` naming us if set). Ping at half of it.
pub fn watchdog_interval() -> Option<Duration> {
    watchdog_interval_from(
        std::env::var("WATCHDOG_USEC").ok().as_deref(),
        std::env::var("WATCHDOG_PID").ok().as_deref(),
        std::process::id(),
    )
}

/// [`watchdog_interval`] on given values, for tests.
pub fn watchdog_interval_from(usec: Option<&str>, pid: Option<&str>, me: u32) -> Option<Duration> {
    let usec: u64 = usec?.trim().parse().ok().filter(|&u| u > 0)?;
    match pid {
        Some(p) if p.trim().parse::<u32>().ok() != Some(me) => None,
        _ => Some(Duration::from_micros(usec)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_datagrams_to_a_socket_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let listener = UnixDatagram::bind(&path).unwrap();
        listener
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let target = SdNotify::at(path.to_str().unwrap());
        let mut buf = [0u8; 256];
        for message in [
            "READY=1",
            "STATUS=2 zones: 2 active",
            "WATCHDOG=1",
            "STOPPING=1",
        ] {
            target.send(message).unwrap();
            let n = listener.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], message.as_bytes());
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn sends_datagrams_to_an_abstract_socket() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("dnssec-warden-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = UnixDatagram::bind_addr(&addr).unwrap();
        listener
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        SdNotify::at(&format!("@{name}")).send("READY=1").unwrap();
        let mut buf = [0u8; 64];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
    }

    #[test]
    fn bad_addresses_and_missing_listeners_are_errors() {
        assert!(matches!(
            SdNotify::at("relative/path").send("READY=1"),
            Err(NotifyError::BadAddress(_))
        ));
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nobody");
        assert!(matches!(
            SdNotify::at(missing.to_str().unwrap()).send("READY=1"),
            Err(NotifyError::Send { .. })
        ));
    }

    #[test]
    fn status_lines() {
        let counts = [
            (None, 0),
            (Some(State::Active), 10),
            (Some(State::AwaitingDs), 1),
            (Some(State::TtlWait), 1),
        ];
        assert_eq!(
            status_line(&counts),
            "12 zones: 10 active, 1 awaiting_ds, 1 ttl_wait"
        );
        assert_eq!(status_line(&[(None, 1)]), "1 zone: 1 unobserved");
        assert_eq!(status_line(&[]), "0 zones");
    }

    #[test]
    fn watchdog_interval_needs_usec_and_our_pid() {
        let sec = Some(Duration::from_secs(30));
        assert_eq!(watchdog_interval_from(Some("30000000"), None, 7), sec);
        assert_eq!(watchdog_interval_from(Some("30000000"), Some("7"), 7), sec);
        assert_eq!(watchdog_interval_from(Some("30000000"), Some("8"), 7), None);
        assert_eq!(watchdog_interval_from(Some("0"), None, 7), None);
        assert_eq!(watchdog_interval_from(Some("x"), None, 7), None);
        assert_eq!(watchdog_interval_from(None, Some("7"), 7), None);
    }
}
