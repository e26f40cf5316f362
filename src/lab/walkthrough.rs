//! The provider side of dnssec-warden, shown end to end: the simulator on loopback and the
//! real client walking a zone through creation, signing and unsigning, checking the DS
//! against the public key on the way. This is what `dnssec-warden demo` runs until the
//! lifecycle engine takes over the demo.

use std::io::Write;
use std::time::Duration;

use crate::config::Credentials;
use crate::lab::{ProviderSim, SimOptions};
use crate::provider::{
    GcoreClient, NewZone, ProviderError, ResourceRecord, RetryPolicy, RrsetBody,
};
use crate::secret::Secret;

#[derive(Debug, thiserror::Error)]
pub enum WalkthroughError {
    #[error("cannot start the provider simulator: {0}")]
    Start(#[from] std::io::Error),
    #[error("provider call failed: {0}")]
    Provider(#[from] ProviderError),
    #[error("check failed: {0}")]
    Check(String),
}

/// Runs the walk-through, printing each step to `out`.
pub async fn run(out: &mut impl Write) -> Result<(), WalkthroughError> {
    let api_key = format!("lab-{:016x}", fastrand::u64(..));
    let sim = ProviderSim::start(
        "127.0.0.1:0"
            .parse()
            .map_err(|_| WalkthroughError::Check("address".into()))?,
        SimOptions {
            api_keys: vec![api_key.clone()],
            ..SimOptions::default()
        },
    )
    .await?;
    let client = GcoreClient::with_policy(
        sim.base_url(),
        Credentials::ApiKey(Secret::new(api_key)),
        RetryPolicy::default(),
        Duration::from_secs(10),
    )?;
    let say = |out: &mut dyn Write, text: String| {
        let _ = writeln!(out, "{text}");
    };
    say(out, format!("provider simulator on {}", sim.base_url()));

    let zone = "example.test";
    let created = client
        .create_zone(&NewZone {
            name: zone.into(),
            ..NewZone::default()
        })
        .await?;
    say(out, format!("created zone {zone} (id {})", created.id));

    client
        .create_rrset(
            zone,
            "www.example.test",
            "A",
            &RrsetBody {
                ttl: 300,
                resource_records: vec![ResourceRecord {
                    id: None,
                    content: vec!["192.0.2.1".into()],
                    enabled: true,
                }],
            },
        )
        .await?;
    say(out, "created www.example.test A 192.0.2.1".into());

    let switched = client.set_dnssec(zone, true).await?;
    say(
        out,
        format!(
            "switched DNSSEC on: {}",
            switched.message.unwrap_or_default()
        ),
    );
    let key = client.get_dnssec(zone).await?;
    say(
        out,
        format!(
            "provider key: flags {} algorithm {} key tag {}; tag and digest recomputed from the public key and matched",
            key.dnskey.flags,
            key.dnskey.algorithm,
            key.key_tag()
        ),
    );
    say(
        out,
        format!("DS to enter at the registrar: {}", key.ds_line()),
    );
    let sim_key = sim
        .handle()
        .dnskey(zone)
        .ok_or_else(|| WalkthroughError::Check("the simulator holds no key".into()))?;
    if sim_key != key.dnskey {
        return Err(WalkthroughError::Check(
            "the key the API returned is not the key the simulator signs with".into(),
        ));
    }

    let zones = client.list_zones().await?;
    for z in &zones {
        say(
            out,
            format!(
                "zone {}: dnssec_enabled={} dnssec_status={:?}",
                z.name, z.dnssec_enabled, z.dnssec_status
            ),
        );
    }

    client.set_dnssec(zone, false).await?;
    match client.get_dnssec(zone).await {
        Err(ProviderError::DnssecDisabled) => say(
            out,
            "switched DNSSEC off; GET …/dnssec now answers \"dnssec is disabled\"".into(),
        ),
        other => {
            return Err(WalkthroughError::Check(format!(
                "DNSSEC should be off, GET …/dnssec gave {other:?}"
            )));
        }
    }
    say(out, "state-changing calls the simulator logged:".into());
    for call in sim.handle().calls() {
        say(
            out,
            format!(
                "  {} {} {} -> {}",
                call.method, call.path, call.body, call.status
            ),
        );
    }
    Ok(())
}
