//! The console's TLS: the certificate and key files, reloaded on SIGHUP.
