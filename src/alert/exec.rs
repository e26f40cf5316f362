//! Running an operator's command (an `[[alerts.exec]]` sink, the registrar hook): the
//! event in environment variables and as JSON on stdin, within a time limit. A command
//! that overruns is killed and reaped, never left behind.

use std::time::Duration;

use tokio::io::AsyncWriteExt;

#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("cannot start {program}: {error}")]
    Spawn {
        program: String,
        error: std::io::Error,
    },
    #[error("{program} did not finish within {timeout:?} and was killed")]
    Timeout { program: String, timeout: Duration },
    #[error("{program} exited with {status}")]
    Failed { program: String, status: String },
    #[error("the command line is empty")]
    Empty,
}

/// Environment variables of ours that must not leak into a child: with them, a child
/// could send readiness or watchdog pings for the daemon.
const NOT_INHERITED: &[&str] = &["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"];

/// Runs `argv` with `env` added to the environment and `stdin` written to its standard
/// input (then closed). Its stdout and stderr are the daemon's, so they land in the
/// journal. Success is exit status 0 within `timeout`.
pub async fn run(
    argv: &[String],
    env: &[(String, String)],
    stdin: &[u8],
    timeout: Duration,
) -> Result<(), CommandError> {
    let (program, args) = argv.split_first().ok_or(CommandError::Empty)?;
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(std::process::Stdio::piped())
        // Should this task be dropped mid-way (shutdown), the child does not outlive it.
        .kill_on_drop(true);
    for var in NOT_INHERITED {
        command.env_remove(var);
    }
    let mut child = command.spawn().map_err(|error| CommandError::Spawn {
        program: program.clone(),
        error,
    })?;
    let input = child.stdin.take();
    let finished = tokio::time::timeout(timeout, async {
        if let Some(mut pipe) = input {
            // A command that does not read its input is not an error (EPIPE is ignored).
            let _ = pipe.write_all(stdin).await;
            drop(pipe);
        }
        child.wait().await
    })
    .await;
    match finished {
        Err(_) => {
            // SIGKILL, then wait for it, so no zombie and no runaway process remains.
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
