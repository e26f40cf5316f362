//! The seam between the product and the simulated world (`dnssec-warden-lab`), only in
//! builds with the `demo` feature: DNS settings that point the observer at the lab, and
//! DNSSEC records carried across. The lab has its own record types and arithmetic on
//! purpose; these conversions copy fields, they compute nothing.

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use dnssec_warden_lab::dns::{LabDns, ROOT};
use dnssec_warden_lab::{ProviderSim, SimOptions};

use crate::dns::DnsSettings;
use crate::dnssec::{Dnskey, Ds};

/// The observer's settings for the lab hierarchy.
pub trait LabSettings {
    /// Root hints, port, trust anchor; fast timeouts, for a lab on loopback never needs
    /// long ones. The same as [`LabDns::config_section`] in a file.
    fn settings(&self) -> DnsSettings;
    /// [`settings`](Self::settings) with the lab's validating resolver(s) configured.
    fn settings_with_resolvers(&self, resolvers: &[SocketAddr]) -> DnsSettings;
}

impl LabSettings for LabDns {
    fn settings(&self) -> DnsSettings {
        DnsSettings {
            root_hints: vec![ROOT.into()],
            port: self.port(),
            trust_anchor_file: Some(self.trust_anchor_path()),
            validating_resolvers: Vec::new(),
            query_timeout: Duration::from_millis(400),
            query_attempts: 2,
            ..DnsSettings::default()
        }
    }

    fn settings_with_resolvers(&self, resolvers: &[SocketAddr]) -> DnsSettings {
        DnsSettings {
            validating_resolvers: resolvers.to_vec(),
            ..self.settings()
        }
    }
}

impl From<dnssec_warden_lab::Dnskey> for Dnskey {
    fn from(key: dnssec_warden_lab::Dnskey) -> Self {
        Self {
            flags: key.flags,
            protocol: key.protocol,
            algorithm: key.algorithm,
            public_key: key.public_key,
        }
    }
}

impl From<Dnskey> for dnssec_warden_lab::Dnskey {
    fn from(key: Dnskey) -> Self {
        Self {
            flags: key.flags,
            protocol: key.protocol,
            algorithm: key.algorithm,
            public_key: key.public_key,
        }
    }
}

impl From<dnssec_warden_lab::Ds> for Ds {
    fn from(ds: dnssec_warden_lab::Ds) -> Self {
        Self {
            key_tag: ds.key_tag,
            algorithm: ds.algorithm,
            digest_type: ds.digest_type,
            digest: ds.digest,
        }
    }
}

impl From<Ds> for dnssec_warden_lab::Ds {
    fn from(ds: Ds) -> Self {
        Self {
            key_tag: ds.key_tag,
            algorithm: ds.algorithm,
            digest_type: ds.digest_type,
            digest: ds.digest,
        }
    }
}

/// Why `lab provider` did not serve.
#[derive(Debug, thiserror::Error)]
pub enum LabProviderError {
    #[error("--user {0:?}: expected USER:PASSWORD")]
    User(String),
    #[error("give at least one --api-key or --user, or no request can authenticate")]
    NoCredentials,
    #[error("cannot listen on {listen}: {source}")]
    Listen {
        listen: SocketAddr,
        source: std::io::Error,
    },
}

impl LabProviderError {
    /// The operator's arguments are wrong (exit 2), or the simulator could not start.
    pub fn is_usage(&self) -> bool {
        !matches!(self, Self::Listen { .. })
    }
}

/// `lab provider`: the provider simulator on `listen` until SIGINT or SIGTERM.
pub async fn serve_provider(
    listen: SocketAddr,
    api_keys: Vec<String>,
    users: &[String],
    out: &mut dyn Write,
) -> Result<(), LabProviderError> {
    let users = users
        .iter()
        .map(|u| {
            u.split_once(':')
                .map(|(name, pw)| (name.to_string(), pw.to_string()))
                .ok_or_else(|| LabProviderError::User(u.clone()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if api_keys.is_empty() && users.is_empty() {
        return Err(LabProviderError::NoCredentials);
    }
    if !listen.ip().is_loopback() {
        tracing::warn!(%listen, "the simulator is listening beyond loopback");
    }
    let options = SimOptions {
        api_keys,
        users,
        ..SimOptions::default()
    };
    let sim = ProviderSim::start(listen, options)
        .await
        .map_err(|source| LabProviderError::Listen { listen, source })?;
    // What is printed is for the operator's eyes; a closed stdout stops nothing.
    let _ = writeln!(out, "provider simulator listening on {}", sim.base_url());
    let _ = out.flush();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate() => {}
    }
    let _ = writeln!(out, "provider simulator stopped");
    Ok(())
}

async fn terminate() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut sig) => {
            sig.recv().await;
        }
        Err(_) => std::future::pending().await,
    }
}
