//! The console's TLS: the certificate chain and key from PEM files, re-read on SIGHUP
//! (a renewed certificate takes no restart; a file that does not load keeps the running
//! one and says why). rustls on the ring provider, as the provider client's.

use std::path::Path;
use std::sync::{Arc, RwLock};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;

use super::TlsFiles;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("web TLS: cannot read the certificate {path}: {error}")]
    Certificate { path: String, error: String },
    #[error("web TLS: the certificate file {path} holds no certificate")]
    NoCertificate { path: String },
    #[error("web TLS: cannot read the private key {path}: {error}")]
    Key { path: String, error: String },
    #[error("web TLS: the certificate and key do not make a server configuration: {0}")]
    Config(String),
}

/// The server configuration from the files: the chain as written (leaf first), the key
/// (PKCS#8, PKCS#1 or SEC1), HTTP/1.1 only.
pub fn load(files: &TlsFiles) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let shown = |p: &Path| p.display().to_string();
    let certificates: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(&files.certificate)
            .and_then(Iterator::collect)
            .map_err(|e| TlsError::Certificate {
                path: shown(&files.certificate),
                error: e.to_string(),
            })?;
    if certificates.is_empty() {
        return Err(TlsError::NoCertificate {
            path: shown(&files.certificate),
        });
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| TlsError::Key {
        path: shown(&files.key),
        error: e.to_string(),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certificates, key)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The configuration in use; each new connection takes the current one.
pub struct Reloadable {
    current: RwLock<Arc<rustls::ServerConfig>>,
}

impl Reloadable {
    pub fn new(files: &TlsFiles) -> Result<Self, TlsError> {
        Ok(Self {
            current: RwLock::new(load(files)?),
        })
    }

    /// Loads the files again (named anew by a reloaded configuration); on an error the
    /// running certificate stays.
    pub fn reload(&self, files: &TlsFiles) -> Result<(), TlsError> {
        let config = load(files)?;
        if let Ok(mut current) = self.current.write() {
            *current = config;
        }
        Ok(())
    }

    pub fn acceptor(&self) -> Option<TlsAcceptor> {
        self.current
            .read()
            .ok()
            .map(|config| TlsAcceptor::from(config.clone()))
    }
}
