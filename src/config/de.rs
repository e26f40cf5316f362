//! The `deserialize_with` helpers of `config`'s own sections: each one type of value, and
//! what is wrong with it on its own. The key is added by `serde_path_to_error`. Those a
//! provider's block reads too are `crate::de`'s, named here as well.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use serde::de::{DeserializeSeed, Error, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use url::Url;

pub use crate::de::{
    credential_name, env_name, http_url, in_range, non_empty_path, secret_file, secs,
};
use crate::dns::AddressFamilies;
use crate::dns::net::budget::MAX_OBSERVATION_TIMEOUT;
use crate::time::format::positive_duration as duration;
use crate::zone_name::ZoneName;

/// An optional positive duration (`"1d"`).
pub fn some_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    duration(d).map(Some)
}

/// A count of at least one.
pub fn some_count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    in_range::<1, { u64::MAX }, _, u32>(d).map(Some)
}

/// A port, 1 to 65535.
pub fn some_port<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u16>, D::Error> {
    let port = u64::deserialize(d)?;
    match u16::try_from(port) {
        Ok(p) if p > 0 => Ok(Some(p)),
        _ => Err(D::Error::custom("must be a port, 1 to 65535")),
    }
}

/// A NOTIFY target: an IP address, or a host name (normalised as a zone name).
pub fn notify_target<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let text = String::deserialize(d)?;
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok(Some(ip.to_string()));
    }
    ZoneName::parse(&text)
        .map(|name| Some(name.as_str().to_string()))
        .map_err(|e| D::Error::custom(format!("not an address or a host name: {e}")))
}

/// `dns.observation_timeout`: at most [`MAX_OBSERVATION_TIMEOUT`].
pub fn observation_timeout<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let value = duration(d)?;
    if value > MAX_OBSERVATION_TIMEOUT {
        return Err(D::Error::custom(format!(
            "must be at most {}s (the engine abandons a step after 120s)",
            MAX_OBSERVATION_TIMEOUT.as_secs()
        )));
    }
    Ok(value)
}

/// `dns.address_families`: `["ipv4", "ipv6"]`, at least one of them.
pub fn address_families<'de, D: Deserializer<'de>>(d: D) -> Result<AddressFamilies, D::Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Family {
        Ipv4,
        Ipv6,
    }
    let families = Vec::<Family>::deserialize(d)?;
    let has = |f: fn(&Family) -> bool| families.iter().any(f);
    let out = AddressFamilies {
        ipv4: has(|f| matches!(f, Family::Ipv4)),
        ipv6: has(|f| matches!(f, Family::Ipv6)),
    };
    if !out.ipv4 && !out.ipv6 {
        return Err(D::Error::custom("needs \"ipv4\", \"ipv6\" or both"));
    }
    Ok(out)
}

/// `metrics.listen`: `IP:port`. Parsed here rather than by serde's own impl, whose
/// message ("invalid socket address syntax") would lose the value and the form.
pub fn listen<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
    let text = String::deserialize(d)?;
    text.parse()
        .map(Some)
        .map_err(|_| D::Error::custom(format!("{text:?} is not IP:port (e.g. \"127.0.0.1:9753\")")))
}

/// `dns.root_hints`: IP addresses, at least one (each named by its value when wrong,
/// which serde's own impl does not).
pub fn root_hints<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<IpAddr>, D::Error> {
    struct Ip(IpAddr);
    impl<'de> Deserialize<'de> for Ip {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let text = String::deserialize(d)?;
            text.parse()
                .map(Ip)
                .map_err(|_| D::Error::custom(format!("{text:?} is not an IP address")))
        }
    }
    let hints: Vec<IpAddr> = Vec::<Ip>::deserialize(d)?
        .into_iter()
        .map(|ip| ip.0)
        .collect();
    if hints.is_empty() {
        return Err(D::Error::custom("needs at least one address"));
    }
    Ok(hints)
}

/// `dns.validating_resolvers`: `IP`, `IP:port` or `[IPv6]:port`, port 53 by default.
pub fn servers<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<SocketAddr>, D::Error> {
    struct Server(SocketAddr);
    impl<'de> Deserialize<'de> for Server {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let text = String::deserialize(d)?;
            super::parse_server(&text, 53).map(Server).ok_or_else(|| {
                D::Error::custom(format!(
                    "{text:?} is not an address (IP or IP:port, [v6]:port)"
                ))
            })
        }
    }
    Ok(Vec::<Server>::deserialize(d)?
        .into_iter()
        .map(|s| s.0)
        .collect())
}

/// `""` is no path (`dns.trust_anchor_file`: the built-in root anchor).
pub fn empty_is_none<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
    let path = PathBuf::deserialize(d)?;
    Ok((!path.as_os_str().is_empty()).then_some(path))
}

pub fn some_non_empty_path<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
    non_empty_path(d).map(Some)
}

/// A PostgreSQL URL without a password: the password comes from `password_file`,
/// `password_env` or `password_credential`, so that the file can be shown and logged.
pub fn postgres_url<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Url>, D::Error> {
    let text = String::deserialize(d)?;
    // The text is never echoed back: it might hold a password.
    let url = Url::parse(&text).map_err(|e| D::Error::custom(format!("is not a URL: {e}")))?;
    if !matches!(url.scheme(), "postgres" | "postgresql") {
        return Err(D::Error::custom(
            "must be a postgres:// or postgresql:// URL",
        ));
    }
    if url.password().is_some() {
        return Err(D::Error::custom(
            "holds a password: put it in database.password_file, password_env or password_credential instead",
        ));
    }
    Ok(Some(url))
}

/// A command line: at least the program (`command[0]`, not blank), then its arguments.
pub fn command<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    struct Argv;
    struct Program;
    impl<'de> DeserializeSeed<'de> for Program {
        type Value = String;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
            let program = String::deserialize(d)?;
            if program.trim().is_empty() {
                return Err(D::Error::custom("the program must not be empty"));
            }
            Ok(program)
        }
    }
    impl<'de> Visitor<'de> for Argv {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a command line: [\"/path/to/program\", \"arg\", ...]")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
            let Some(program) = seq.next_element_seed(Program)? else {
                return Err(A::Error::custom(
                    "must name a program: [\"/path/to/program\", \"arg\", ...]",
                ));
            };
            let mut argv = vec![program];
            while let Some(arg) = seq.next_element()? {
                argv.push(arg);
            }
            Ok(argv)
        }
    }
    d.deserialize_seq(Argv)
}

/// HTTP headers, `{ Name = "value" }`, sorted by name. The value's check runs as the
/// value is read, so the error's key is `headers.<Name>`.
pub fn headers<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, String)>, D::Error> {
    struct Headers;
    struct Value<'a>(&'a str);
    impl<'de> DeserializeSeed<'de> for Value<'_> {
        type Value = String;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
            if reqwest::header::HeaderName::from_bytes(self.0.as_bytes()).is_err() {
                return Err(D::Error::custom("not a valid HTTP header name"));
            }
            let value = String::deserialize(d)?;
            if reqwest::header::HeaderValue::from_str(&value).is_err() {
                return Err(D::Error::custom(
                    "not a valid HTTP header value (control characters?)",
                ));
            }
            Ok(value)
        }
    }
    impl<'de> Visitor<'de> for Headers {
        type Value = Vec<(String, String)>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a table of header names and values")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(name) = map.next_key::<String>()? {
                let value = map.next_value_seed(Value(&name))?;
                out.push((name, value));
            }
            out.sort();
            Ok(out)
        }
    }
    d.deserialize_map(Headers)
}

/// One of `zones.names`: the name as written (for messages) and its canonical form.
#[derive(Debug)]
pub struct ZoneEntry {
    pub text: String,
    pub zone: ZoneName,
}

impl<'de> Deserialize<'de> for ZoneEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let zone = ZoneName::parse(&text).map_err(D::Error::custom)?;
        Ok(Self { text, zone })
    }
}
