//! Running an operator's command (an `[[alerts.exec]]` sink, the registrar hook): the
//! event in environment variables and as JSON on stdin, within a time limit.
//!
//! The command runs in a process group of its own; one that overruns is killed with
//! everything it started (the whole group), and reaped, never left behind. Its stdout and
//! stderr are captured, never the daemon's own streams: at most [`OUTPUT_CAP`] bytes of
//! each are kept (the rest is read and dropped, so the command never blocks on a full
//! pipe) and logged as escaped fields of one daemon line, so that what a command prints
//! can neither forge daemon log lines nor break `--log-format json`.

use std::pin::pin;
use std::time::Duration;

use futures::future::{Either, select};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("cannot start {program}: {error}")]
    Spawn {
        program: String,
        error: std::io::Error,
    },
    #[error(
        "{program} did not finish within {timeout:?} and was killed, with every process it started"
    )]
    Timeout { program: String, timeout: Duration },
    #[error("{program} exited with {status}")]
    Failed { program: String, status: String },
    #[error("the command line is empty")]
    Empty,
}

/// Environment variables of ours that must not leak into a child: with them, a child
/// could send readiness or watchdog pings for the daemon.
const NOT_INHERITED: &[&str] = &["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"];

/// Bytes of a command's stdout, and of its stderr, kept for the log.
pub const OUTPUT_CAP: usize = 64 * 1024;

/// How long a command's output is still read once it has exited (or was killed): a
/// process it started may hold the pipes open for good.
const OUTPUT_GRACE: Duration = Duration::from_millis(500);

/// The start of one output stream and how long it was.
#[derive(Debug, Default)]
struct Captured {
    kept: Vec<u8>,
    total: u64,
}

impl Captured {
    fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = OUTPUT_CAP.saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// As text for a log field (escaped there: `?` formats it quoted, newlines and
    /// control characters as escapes).
    fn text(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.kept)
    }
}

/// Reads `pipe` to its end into `kept`, then closes it. Cancel-safe: dropped mid-way,
/// what was read is kept and reading can go on later.
async fn read_into<R: AsyncRead + Unpin>(pipe: &mut Option<R>, kept: &mut Captured) {
    let Some(reader) = pipe.as_mut() else {
        return;
    };
    let mut buf = [0u8; 8192];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => kept.push(&buf[..n]),
        }
    }
    *pipe = None;
}

/// Kills the command's process group when dropped while armed: a run abandoned mid-way
/// (shutdown) leaves nothing behind either. Disarmed once the command is reaped, after
/// which its group id may name other processes.
struct Group(Option<u32>);

impl Group {
    fn kill(&mut self) {
        if let Some(pid) = self.0.take() {
            let Some(pgid) = i32::try_from(pid)
                .ok()
                .and_then(rustix::process::Pid::from_raw)
            else {
                return;
            };
            if let Err(error) =
                rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL)
            {
                tracing::warn!(pgid = pid, %error, "cannot kill a command's process group");
            }
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs `argv` with `env` added to the environment and `stdin` written to its standard
/// input (then closed). Success is exit status 0 within `timeout`. What it printed is
/// logged once it ended, as one line.
pub async fn run(
    argv: &[String],
    env: &[(String, String)],
    stdin: &[u8],
    timeout: Duration,
) -> Result<(), CommandError> {
    let (program, args) = argv.split_first().ok_or(CommandError::Empty)?;
    let deadline = Instant::now() + timeout;
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        // Its own group, so that on timeout what it started is ended with it.
        .process_group(0)
        // Should this task be dropped mid-way (shutdown), the child does not outlive it.
        .kill_on_drop(true);
    for var in NOT_INHERITED {
        command.env_remove(var);
    }
    let mut child = command.spawn().map_err(|error| CommandError::Spawn {
        program: program.clone(),
        error,
    })?;
    let mut group = Group(child.id());
    let input = child.stdin.take();
    let (mut stdout, mut stderr) = (child.stdout.take(), child.stderr.take());
    let (mut out, mut err) = (Captured::default(), Captured::default());
    let finished = tokio::time::timeout_at(deadline, async {
        let exited = pin!(async {
            let feed = async {
                if let Some(mut pipe) = input {
                    // A command that does not read its input is not an error (EPIPE is
                    // ignored).
                    let _ = pipe.write_all(stdin).await;
                }
            };
            tokio::join!(feed, child.wait()).1
        });
        // Read while it runs: a command that fills a pipe nobody reads never ends.
        let reading = pin!(async {
            tokio::join!(
                read_into(&mut stdout, &mut out),
                read_into(&mut stderr, &mut err)
            )
        });
        match select(exited, reading).await {
            Either::Left((status, _)) => status,
            Either::Right((_, exited)) => exited.await,
        }
    })
    .await;
    let result = match finished {
        Err(_) => {
            // SIGKILL to the whole group, then reap the command: no zombie and nothing
            // it started remains.
            group.kill();
            if let Err(error) = child.kill().await {
                tracing::warn!(program = program.as_str(), %error, "cannot kill overrunning command");
            }
            Err(CommandError::Timeout {
                program: program.clone(),
                timeout,
            })
        }
        Ok(Err(error)) => Err(CommandError::Spawn {
            program: program.clone(),
            error,
        }),
        Ok(Ok(status)) if status.success() => Ok(()),
        Ok(Ok(status)) => Err(CommandError::Failed {
            program: program.clone(),
            status: status.to_string(),
        }),
    };
    // Reaped: its group id is no longer ours to signal.
    group.0 = None;
    let drained = tokio::time::timeout(OUTPUT_GRACE, async {
        tokio::join!(
            read_into(&mut stdout, &mut out),
            read_into(&mut stderr, &mut err)
        )
    })
    .await
    .is_ok();
    if !drained {
        tracing::warn!(
            program = program.as_str(),
            "a process the command started still holds its output open; not read further"
        );
    }
    log_output(program, &out, &err, result.is_ok());
    result
}

/// One daemon line with what the command printed, each stream an escaped field.
fn log_output(program: &str, out: &Captured, err: &Captured, succeeded: bool) {
    if out.total == 0 && err.total == 0 {
        return;
    }
    macro_rules! line {
        ($level:ident) => {
            tracing::$level!(
                program,
                stdout = ?out.text(),
                stdout_bytes = out.total,
                stderr = ?err.text(),
                stderr_bytes = err.total,
                "output of the command (at most {OUTPUT_CAP} bytes of each stream kept)"
            )
        };
    }
    if succeeded {
        line!(info);
    } else {
        line!(warn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[tokio::test]
    async fn passes_env_and_stdin() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let script = "printf '%s\\n' \"$X_VALUE\" > \"$1\"; cat >> \"$1\"";
        let cmd = argv(&["/bin/sh", "-c", script, "sh", out.to_str().unwrap()]);
        run(
            &cmd,
            &[("X_VALUE".into(), "hello".into())],
            b"{\"a\":1}",
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        let text = std::fs::read_to_string(&out).unwrap();
        assert_eq!(text, "hello\n{\"a\":1}");
    }

    /// A process that is gone: no entry in /proc, or a zombie no one has reaped yet (a
    /// container's init may never reap orphans).
    fn gone(pid: &str) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        }
    }

    /// Waits (at most 2 s) until `pid` is gone.
    async fn ends(pid: &str) -> bool {
        for _ in 0..40 {
            if gone(pid) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        gone(pid)
    }

    /// A command that overruns is ended with what it started.
    #[tokio::test]
    async fn a_command_and_what_it_started_are_ended_on_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let (forked, own) = (dir.path().join("forked"), dir.path().join("own"));
        let script = "sleep 1000 & echo $! > \"$1\"; echo $$ > \"$2\"; sleep 1000";
        let cmd = argv(&[
            "/bin/sh",
            "-c",
            script,
            "sh",
            forked.to_str().unwrap(),
            own.to_str().unwrap(),
        ]);
        let started = std::time::Instant::now();
        let err = run(&cmd, &[], b"", Duration::from_millis(500))
            .await
            .unwrap_err();
        assert!(matches!(err, CommandError::Timeout { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
        for file in [forked, own] {
            let pid = std::fs::read_to_string(&file).unwrap();
            let pid = pid.trim();
            assert!(!pid.is_empty());
            assert!(ends(pid).await, "{} ({pid}) still runs", file.display());
        }
    }

    /// A process a command leaves behind holding its output open does not hold the
    /// daemon: the command's end is its end.
    #[tokio::test]
    async fn a_process_left_holding_the_output_does_not_hold_the_daemon() {
        let dir = tempfile::tempdir().unwrap();
        let forked = dir.path().join("forked");
        let script = "sleep 1000 & echo $! > \"$1\"; echo done";
        let cmd = argv(&["/bin/sh", "-c", script, "sh", forked.to_str().unwrap()]);
        let started = std::time::Instant::now();
        let result = run(&cmd, &[], b"", Duration::from_secs(30)).await;
        let elapsed = started.elapsed();
        let pid = std::fs::read_to_string(&forked).unwrap();
        let pid = pid.trim().to_string();
        // Stopped here, by its PID.
        if let Some(p) = pid.parse().ok().and_then(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
        }
        result.unwrap();
        assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
        assert!(ends(&pid).await);
    }

    #[tokio::test]
    async fn failures_are_typed() {
        let err = run(&argv(&["/bin/false"]), &[], b"", Duration::from_secs(10))
            .await
            .unwrap_err();
        assert!(matches!(err, CommandError::Failed { .. }), "{err}");
        let err = run(
            &argv(&["/nonexistent/program"]),
            &[],
            b"",
            Duration::from_secs(10),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, CommandError::Spawn { .. }), "{err}");
        assert!(matches!(
            run(&[], &[], b"", Duration::from_secs(1)).await,
            Err(CommandError::Empty)
        ));
    }
}
