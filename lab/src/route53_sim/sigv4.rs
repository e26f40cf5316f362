//! The simulator's own check of a request's Signature Version 4 (AWS's "Create a signed
//! AWS API request": canonical request, string to sign, the derived key), written here
//! from the specification so that a signer's mistake is not mirrored. Held to the first
//! example of AWS's SigV4 test suite (`get-vanilla`) below.

use ring::{digest, hmac};

/// What a signature check refuses, as AWS's code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: &'static str,
    pub message: String,
}

fn refuse(code: &'static str, message: impl Into<String>) -> Refusal {
    Refusal {
        code,
        message: message.into(),
    }
}

/// The parts of an `Authorization: AWS4-HMAC-SHA256 …` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    pub access_key_id: String,
    pub date: String,
    pub region: String,
    pub service: String,
    pub signed_headers: Vec<String>,
    pub signature: String,
}

impl Authorization {
    /// The header read strictly: the algorithm, `Credential=ID/DATE/REGION/SERVICE/aws4_request`,
    /// `SignedHeaders=` in lower case and sorted, `Signature=` 64 lower-case hex digits.
    pub fn parse(header: &str) -> Result<Self, Refusal> {
        let incomplete = |what: &str| {
            refuse(
                "IncompleteSignature",
                format!("Authorization header requires {what}"),
            )
        };
        let rest = header
            .strip_prefix("AWS4-HMAC-SHA256 ")
            .ok_or_else(|| incomplete("the AWS4-HMAC-SHA256 algorithm"))?;
        let mut credential = None;
        let mut signed = None;
        let mut signature = None;
        for part in rest.split(',') {
            let part = part.trim();
            if let Some(v) = part.strip_prefix("Credential=") {
                credential = Some(v);
            } else if let Some(v) = part.strip_prefix("SignedHeaders=") {
                signed = Some(v);
            } else if let Some(v) = part.strip_prefix("Signature=") {
                signature = Some(v);
            } else {
                return Err(incomplete("only Credential, SignedHeaders and Signature"));
            }
        }
        let credential = credential.ok_or_else(|| incomplete("a 'Credential' parameter"))?;
        let signed = signed.ok_or_else(|| incomplete("a 'SignedHeaders' parameter"))?;
        let signature = signature.ok_or_else(|| incomplete("a 'Signature' parameter"))?;
        let scope: Vec<&str> = credential.split('/').collect();
        if scope.len() != 5 || scope[4] != "aws4_request" || scope[1].len() != 8 {
            return Err(incomplete(
                "a Credential of the form ID/YYYYMMDD/REGION/SERVICE/aws4_request",
            ));
        }
        let signed_headers: Vec<String> = signed.split(';').map(str::to_string).collect();
        let mut sorted = signed_headers.clone();
        sorted.sort();
        if sorted != signed_headers
            || signed_headers
                .iter()
                .any(|h| h.is_empty() || h.to_ascii_lowercase() != *h)
        {
            return Err(incomplete("SignedHeaders in lower case, sorted"));
        }
        if signature.len() != 64
            || !signature
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        {
            return Err(incomplete("a Signature of 64 lower-case hex digits"));
        }
        Ok(Self {
            access_key_id: scope[0].to_string(),
            date: scope[1].to_string(),
            region: scope[2].to_string(),
            service: scope[3].to_string(),
            signed_headers,
            signature: signature.to_string(),
        })
    }
}

/// Characters SigV4 leaves unescaped.
fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~')
}

fn encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if unreserved(b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The path as sent, each segment escaped again (every service but S3 escapes twice).
pub fn canonical_uri(path: &str) -> String {
    if path.is_empty() {
        return "/".into();
    }
    path.split('/').map(encode).collect::<Vec<_>>().join("/")
}

/// The query's pairs decoded, escaped, sorted by name then value.
pub fn canonical_query(query: &str) -> String {
    let mut pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (encode(&k), encode(&v)))
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn mac(key: &[u8], data: &str) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data.as_bytes())
        .as_ref()
        .to_vec()
}

/// One request, as the simulator received it.
pub struct Signed<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub query: &'a str,
    /// Every header, names in lower case.
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
}

/// The signature the request should carry with `secret`, under `auth`'s scope and
/// signed headers, at `amz_date` (`YYYYMMDDTHHMMSSZ`).
pub fn signature(
    request: &Signed<'_>,
    auth: &Authorization,
    amz_date: &str,
    secret: &str,
) -> String {
    let header = |name: &str| {
        request
            .headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
            .join(",")
    };
    let canonical_headers: String = auth
        .signed_headers
        .iter()
        .map(|h| format!("{h}:{}\n", header(h)))
        .collect();
    let canonical = format!(
        "{}\n{}\n{}\n{}\n{}\n{}",
        request.method,
        canonical_uri(request.path),
        canonical_query(request.query),
        canonical_headers,
        auth.signed_headers.join(";"),
        hex(digest::digest(&digest::SHA256, request.body).as_ref())
    );
    let scope = format!(
        "{}/{}/{}/aws4_request",
        auth.date, auth.region, auth.service
    );
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
        hex(digest::digest(&digest::SHA256, canonical.as_bytes()).as_ref())
    );
    let k_date = mac(format!("AWS4{secret}").as_bytes(), &auth.date);
    let k_region = mac(&k_date, &auth.region);
    let k_service = mac(&k_region, &auth.service);
    let k_signing = mac(&k_service, "aws4_request");
    hex(&mac(&k_signing, &to_sign))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AWS's SigV4 test suite, `get-vanilla`: its published signature.
    #[test]
    fn the_test_suites_vanilla_get() {
        let auth = Authorization::parse(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
        )
        .unwrap();
        let headers = vec![
            ("host".to_string(), "example.amazonaws.com".to_string()),
            ("x-amz-date".to_string(), "20150830T123600Z".to_string()),
        ];
        let request = Signed {
            method: "GET",
            path: "/",
            query: "",
            headers: &headers,
            body: b"",
        };
        assert_eq!(
            signature(
                &request,
                &auth,
                "20150830T123600Z",
                "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
            ),
            auth.signature
        );
        assert_eq!(canonical_query("b=2&a=1&a=0"), "a=0&a=1&b=2");
        assert!(Authorization::parse("Bearer x").is_err());
        assert!(
            Authorization::parse(
                "AWS4-HMAC-SHA256 Credential=A/20150830/us-east-1/route53/aws4_request, SignedHeaders=x-amz-date;host, Signature=00"
            )
            .is_err()
        );
    }
}
