//! Login tokens as the provider issues them: RS256 JWTs with `exp` and `token_type`
//! claims, an access token living 1 hour and a single-use refresh token living 24 hours.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};

/// A lab-only RSA key, generated for this simulator; it protects nothing.
const SIGNING_KEY: &[u8] = include_bytes!("../jwt-signing-key.der");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TokenType {
    Access,
    Refresh,
}

impl TokenType {
    fn claim(self) -> &'static str {
        match self {
            Self::Access => "access",
            Self::Refresh => "refresh",
        }
    }
}

struct Issued {
    kind: TokenType,
    expires: Instant,
}

pub(super) struct TokenStore {
    signer: Option<RsaKeyPair>,
    issued: HashMap<String, Issued>,
    pub access_lifetime: Duration,
    pub refresh_lifetime: Duration,
}

impl TokenStore {
    pub fn new(access_lifetime: Duration, refresh_lifetime: Duration) -> Self {
        Self {
            signer: RsaKeyPair::from_pkcs8(SIGNING_KEY).ok(),
            issued: HashMap::new(),
            access_lifetime,
            refresh_lifetime,
        }
    }

    /// A new access + refresh pair for `user`.
    pub fn issue_pair(&mut self, user: &str) -> (String, String) {
        let access = self.issue(user, TokenType::Access, self.access_lifetime);
        let refresh = self.issue(user, TokenType::Refresh, self.refresh_lifetime);
        (access, refresh)
    }

    fn issue(&mut self, user: &str, kind: TokenType, lifetime: Duration) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let exp = (now + lifetime).as_secs();
        let jti = format!("{:032x}", fastrand::u128(..));
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256","typ":"JWT"}"#);
        let claims = serde_json::json!({
            "token_type": kind.claim(),
            "exp": exp,
            "iat": now.as_secs(),
            "jti": jti,
            "username": user,
        });
        let claims = URL_SAFE_NO_PAD.encode(claims.to_string());
        let signing_input = format!("{header}.{claims}");
        let signature = self
            .signer
            .as_ref()
            .and_then(|key| {
                let mut sig = vec![0; key.public().modulus_len()];
                key.sign(
                    &RSA_PKCS1_SHA256,
                    &SystemRandom::new(),
                    signing_input.as_bytes(),
                    &mut sig,
                )
                .ok()
                .map(|()| sig)
            })
            .unwrap_or_default();
        let token = format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature));
        self.issued.insert(
            token.clone(),
            Issued {
                kind,
                expires: Instant::now() + lifetime,
            },
        );
        token
    }

    /// Whether `token` is a live access token.
    pub fn access_valid(&self, token: &str) -> bool {
        self.issued
            .get(token)
            .is_some_and(|t| t.kind == TokenType::Access && t.expires > Instant::now())
    }

    /// Uses up a refresh token: true once for a live one, false ever after.
    pub fn redeem_refresh(&mut self, token: &str) -> bool {
        match self.issued.remove(token) {
            Some(t) if t.kind == TokenType::Refresh => t.expires > Instant::now(),
            Some(other) => {
                self.issued.insert(token.to_string(), other);
                false
            }
            None => false,
        }
    }

    /// Ends every access token now, as if an hour had passed.
    pub fn expire_access_tokens(&mut self) {
        let now = Instant::now();
        for t in self.issued.values_mut() {
            if t.kind == TokenType::Access {
                t.expires = now;
            }
        }
    }

    pub fn expire_refresh_tokens(&mut self) {
        self.issued.retain(|_, t| t.kind != TokenType::Refresh);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_signed_jwts_and_refresh_works_once() {
        let mut store = TokenStore::new(Duration::from_secs(3600), Duration::from_secs(86400));
        assert!(store.signer.is_some(), "the lab signing key loads");
        let (access, refresh) = store.issue_pair("ops@example.com");
        let parts: Vec<&str> = access.split('.').collect();
        assert_eq!(parts.len(), 3);
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims["token_type"], "access");
        assert!(claims["exp"].as_u64().unwrap() > 1_700_000_000);
        assert!(!parts[2].is_empty());
        assert!(store.access_valid(&access));
        assert!(!store.access_valid(&refresh));
        assert!(!store.redeem_refresh(&access));
        assert!(
            store.access_valid(&access),
            "a refused redeem keeps the token"
        );
        assert!(store.redeem_refresh(&refresh));
        assert!(!store.redeem_refresh(&refresh));
        store.expire_access_tokens();
        assert!(!store.access_valid(&access));
    }
}
