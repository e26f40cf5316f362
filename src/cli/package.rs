//! The files the Debian package carries besides the binary, written from the sources
//! they describe so that they cannot drift from them: a man page per command and the
//! bash, zsh and fish completions (from the command-line definition in `main`), and the
//! package's `/etc/dnssec-warden/config.toml` (from `config.example.toml`).
//!
//! `debian/build.sh` runs `dnssec-warden __package-files DIR` (a hidden command, in no
//! help, man page or completion) before `cargo deb`, which takes the files from `DIR`.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use clap::Command;
use clap_complete::Shell;

/// The example configuration, documented option by option.
const EXAMPLE_CONFIG: &str = include_str!("../../config.example.toml");

/// Writes `DIR/man/*.1`, `DIR/completions/{dnssec-warden.bash,_dnssec-warden,
/// dnssec-warden.fish}` and `DIR/config.toml`; returns the paths written.
pub fn write(cmd: Command, dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let man = dir.join("man");
    let completions = dir.join("completions");
    for sub in [&man, &completions] {
        if sub.exists() {
            std::fs::remove_dir_all(sub)?;
        }
        std::fs::create_dir_all(sub)?;
    }
    let mut cmd = cmd.disable_help_subcommand(true).long_about(DESCRIPTION);
    cmd.build();
    let source = format!(
        "{} {}",
        cmd.get_name(),
        cmd.get_version().unwrap_or_default()
    );
    man_pages(&cmd, &source, &man, &mut written)?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let name = cmd.get_name().to_string();
        written.push(clap_complete::generate_to(
            shell,
            &mut cmd,
            name,
            &completions,
        )?);
    }
    let config = dir.join("config.toml");
    std::fs::write(&config, packaged_config()?)?;
    written.push(config);
    Ok(written)
}

/// `dnssec-warden.1` and one page per visible subcommand (`dnssec-warden-status.1`, …).
fn man_pages(
    cmd: &Command,
    source: &str,
    dir: &Path,
    written: &mut Vec<PathBuf>,
) -> io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        man_pages(sub, source, dir, written)?;
    }
    let page = clap_mangen::Man::new(cmd.clone())
        .source(source)
        .manual("dnssec-warden manual");
    let path = dir.join(page.get_filename());
    let mut out = Vec::new();
    page.render_title(&mut out)?;
    page.render_name_section(&mut out)?;
    page.render_synopsis_section(&mut out)?;
    page.render_description_section(&mut out)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        page.render_options_section(&mut out)?;
    }
    if cmd.has_subcommands() {
        page.render_subcommands_section(&mut out)?;
    }
    out.write_all(COMMON_SECTIONS.as_bytes())?;
    if cmd.get_version().is_some() {
        page.render_version_section(&mut out)?;
    }
    std::fs::write(&path, out)?;
    written.push(path);
    Ok(())
}

/// The DESCRIPTION of `dnssec-warden(1)`.
const DESCRIPTION: &str = "Switching DNSSEC on at a managed DNS provider is one API call; \
doing it without taking the domain down is not. dnssec-warden walks each zone through the \
steps in the safe order (the provider signs, the DS is entered at the registrar, the parent \
publishes it; on the way back the DS is removed and every cache has forgotten it before \
signing stops), keeps where every zone stands in a SQLite file, observes the provider's API \
and every parent and child name server directly, and alerts when a human step is overdue or \
something is already broken.\n\n\
The daemon (run) runs as the systemd service dnssec-warden.service; the other commands read \
or record in the same database while it runs.";

/// Exit status, files and where to read more: the same for every command.
const COMMON_SECTIONS: &str = r#".SH "EXIT STATUS"
.TP
\fB0\fR
Done (for \fBcheck\fR: the chain of trust is consistent).
.TP
\fB1\fR
The command ran and the answer is "no", or it failed at run time: a zone the database
does not know, an inconsistent chain, a database, provider or network failure.
.TP
\fB2\fR
What was given cannot be used: the command line, a zone name, or the configuration
file (syntax, a bad key, or a start-up check such as an unreadable secret).
.SH FILES
.TP
\fI/etc/dnssec-warden/config.toml\fR
The configuration, every option documented with its default.
.TP
\fI/etc/dnssec-warden/api\-key\fR
The provider's API key (mode 0600, root), passed to the daemon by systemd as the
credential \fBgcore\-api\-key\fR.
.TP
\fI/var/lib/dnssec\-warden/state.db\fR
The state of every zone, the audit trail and the alerts (SQLite), readable by the
group \fBdnssec\-warden\fR.
.TP
\fI/usr/share/dnssec\-warden/prometheus/dnssec\-warden.rules.yml\fR
Prometheus alerting rules for the metrics endpoint.
.SH "SEE ALSO"
\fBsystemctl\fR(1), \fBjournalctl\fR(1), \fI/usr/share/doc/dnssec\-warden/README.md\fR
"#;

/// The package's configuration file: the example with the paths and the credential the
/// package's unit uses, and no zone yet. Fails if the example no longer has a line this
/// rewrites (the package would silently ship the example otherwise).
pub fn packaged_config() -> io::Result<String> {
    let replacements = [
        (
            "# dnssec-warden configuration.\n",
            "# dnssec-warden configuration, as installed by the Debian package.\n\
             #\n\
             # The service starts once /etc/dnssec-warden/api-key exists (mode 0600, owner\n\
             # root): systemd passes it to the daemon as the credential \"gcore-api-key\"\n\
             # (LoadCredential= in dnssec-warden.service), so the daemon's group, whose\n\
             # members may read this file and the state, never reads the key. List the\n\
             # zones below, then: systemctl start dnssec-warden\n",
        ),
        (
            "\napi_key_file = \"/etc/dnssec-warden/api-key\"\n",
            "\n# api_key_file = \"/etc/dnssec-warden/api-key\"\n",
        ),
        (
            "\n# api_key_credential = \"gcore-api-key\"\n",
            "\napi_key_credential = \"gcore-api-key\"\n",
        ),
        ("\nnames = [\"example.com\"]\n", "\nnames = []\n"),
    ];
    let mut text = EXAMPLE_CONFIG.to_string();
    for (from, to) in replacements {
        if text.matches(from).count() != 1 {
            return Err(io::Error::other(format!(
                "config.example.toml: expected exactly one {from:?} to rewrite for the package"
            )));
        }
        text = text.replacen(from, to, 1);
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;
    use crate::provider::gcore::CredentialSource;
    use crate::secret::SecretSource;

    #[test]
    fn the_packaged_config_reads_the_credential_and_has_no_zone() {
        let text = packaged_config().unwrap();
        let settings = Settings::parse(&text, Path::new("/etc/dnssec-warden/config.toml")).unwrap();
        assert_eq!(
            settings.providers[0]
                .gcore()
                .expect("[provider]")
                .credentials,
            CredentialSource::ApiKey(SecretSource::Credential("gcore-api-key".into()))
        );
        assert!(text.contains("\nnames = []\n"));
        assert_eq!(
            settings.database.sqlite_path(),
            Some(Path::new("/var/lib/dnssec-warden/state.db"))
        );
    }
}
