//! What the validating resolvers the world uses think of the zone: the AD bit on a
//! recursive `zone SOA`, or SERVFAIL with its Extended DNS Error (RFC 8914).

use std::net::SocketAddr;

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;
use hickory_proto::rr::rdata::opt::EdnsOption;

use crate::dns::net::query::Querier;
use crate::dns::net::transport::Transport;
use crate::dns::net::wire;
use crate::dns::validate::{ValidationProbe, ValidationVerdict};

/// The EDNS option code of Extended DNS Errors (RFC 8914).
const EDE_OPTION: u16 = 15;

/// The Extended DNS Errors of an answer: (info code, extra text).
pub fn extended_errors(message: &Message) -> Vec<(u16, String)> {
    let Some(edns) = &message.edns else {
        return Vec::new();
    };
    edns.options()
        .options
        .iter()
        .filter_map(|(code, option)| match option {
            EdnsOption::Unknown(c, data) if u16::from(*code) == EDE_OPTION || *c == EDE_OPTION => {
                let info = u16::from_be_bytes([*data.first()?, *data.get(1)?]);
                let text = String::from_utf8_lossy(data.get(2..).unwrap_or_default()).into_owned();
                Some((info, text))
            }
            _ => None,
        })
        .collect()
}

/// RFC 8914 section 4: the codes that say the data failed validation.
fn ede_is_bogus(code: u16) -> bool {
    matches!(code, 1 | 2 | 5..=12)
}

fn ede_name(code: u16) -> &'static str {
    match code {
        1 => "Unsupported DNSKEY Algorithm",
        2 => "Unsupported DS Digest Type",
        5 => "DNSSEC Indeterminate",
        6 => "DNSSEC Bogus",
        7 => "Signature Expired",
        8 => "Signature Not Yet Valid",
        9 => "DNSKEY Missing",
        10 => "RRSIGs Missing",
        11 => "No Zone Key Bit Set",
        12 => "NSEC Missing",
        22 => "No Reachable Authority",
        23 => "Network Error",
        _ => "",
    }
}

fn describe(errors: &[(u16, String)]) -> String {
    errors
        .iter()
        .map(|(code, text)| {
            let mut s = format!("EDE {code}");
            let name = ede_name(*code);
            if !name.is_empty() {
                s.push_str(&format!(" ({name})"));
            }
            if !text.is_empty() {
                s.push_str(&format!(": {text}"));
            }
            s
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Asks `resolver` for `zone SOA` with RD=1, DO=1.
pub async fn probe<T: Transport>(
    querier: &Querier<T>,
    resolver: SocketAddr,
    zone: &str,
) -> ValidationProbe {
    let source = resolver.to_string();
    let verdict = |verdict, detail: String| ValidationProbe {
        source: source.clone(),
        verdict,
        detail,
    };
    let Some(qname) = wire::parse_name(zone) else {
        return verdict(
            ValidationVerdict::Unknown,
            format!("{zone} is not a valid name"),
        );
    };
    let answer = match querier
        .query(resolver, &qname, RecordType::SOA, true, false)
        .await
    {
        Ok(m) => m,
        Err(e) => return verdict(ValidationVerdict::Unknown, e.to_string()),
    };
    let code = answer.metadata.response_code;
    // A resolver asked without EDNS got no DO bit: its answer's AD bit (or its absence)
    // is no verdict on the chain.
    if code == ResponseCode::NoError && answer.edns.is_none() {
        return verdict(ValidationVerdict::Unknown, wire::WITHOUT_EDNS.into());
    }
    match code {
        ResponseCode::NoError if answer.metadata.authentic_data => {
            verdict(ValidationVerdict::Secure, "AD set".into())
        }
        ResponseCode::NoError => verdict(
            ValidationVerdict::Insecure,
            "answer without AD (the resolver found no chain of trust)".into(),
        ),
        ResponseCode::ServFail => {
            let errors = extended_errors(&answer);
            if errors.iter().any(|(c, _)| ede_is_bogus(*c)) {
                return verdict(
                    ValidationVerdict::Bogus,
                    format!("SERVFAIL, {}", describe(&errors)),
                );
            }
            // Without an EDE, SERVFAIL may be validation or an unreachable zone: asking
            // again with CD=1 tells them apart.
            let unchecked = querier
                .query(resolver, &qname, RecordType::SOA, true, true)
                .await;
            let suffix = if errors.is_empty() {
                String::new()
            } else {
                format!(", {}", describe(&errors))
            };
            match unchecked {
                Ok(m) if m.metadata.response_code == ResponseCode::NoError => verdict(
                    ValidationVerdict::Bogus,
                    format!("SERVFAIL{suffix}, but the answer comes with CD=1: validation fails"),
                ),
                _ => verdict(
                    ValidationVerdict::Unknown,
                    format!("SERVFAIL{suffix}, also with CD=1: the zone is unreachable"),
                ),
            }
        }
        other => verdict(ValidationVerdict::Unknown, format!("{other}")),
    }
}
