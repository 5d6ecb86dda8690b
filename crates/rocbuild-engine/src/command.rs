use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

/// Set for every child rocbuild starts: Python writes no `.pyc` files (into the venv).
pub const NO_BYTECODE: &str = "PYTHONDONTWRITEBYTECODE";

/// One process to run: argv, the env it adds (and removes) and where. Never a shell string.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Command {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Variables set on top of rocbuild's own environment.
    pub env: BTreeMap<String, String>,
    /// Variables removed from the environment.
    pub env_remove: Vec<String>,
    pub cwd: Option<PathBuf>,
}

impl Command {
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Command {
            program: program.into(),
            args: Vec::new(),
            env: BTreeMap::new(),
            env_remove: Vec::new(),
            cwd: None,
        }
    }

    pub fn arg(mut self, a: impl Into<String>) -> Self {
        self.args.push(a.into());
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, a: I) -> Self {
        self.args.extend(a.into_iter().map(Into::into));
        self
    }

    /// The process to run. Every child gets `PYTHONDONTWRITEBYTECODE=1`, pip and the Pythons
    /// cmake starts included: a run (above all a failed one) must not leave `__pycache__`
    /// directories in the venv. The command's own `env` may still set it otherwise.
    pub fn to_duct(&self) -> duct::Expression {
        // An OsString, not a Path: duct would run a bare `Path("sh")` as `./sh`.
        let mut e =
            duct::cmd(self.program.as_os_str().to_os_string(), &self.args).env(NO_BYTECODE, "1");
        for (k, v) in &self.env {
            e = e.env(k, v);
        }
        for k in &self.env_remove {
            e = e.env_remove(k);
        }
        if let Some(d) = &self.cwd {
            e = e.dir(d);
        }
        own_process_group(e)
    }

    /// A line a user can paste into a POSIX shell to run exactly this.
    pub fn shell_line(&self) -> String {
        let mut parts = Vec::new();
        if let Some(d) = &self.cwd {
            parts.push(format!(
                "cd {} &&",
                shell_words::quote(&d.display().to_string())
            ));
        }
        if !self.env.is_empty() || !self.env_remove.is_empty() {
            parts.push("env".into());
            for k in &self.env_remove {
                parts.push(format!("-u {k}"));
            }
            for (k, v) in &self.env {
                parts.push(shell_words::quote(&format!("{k}={v}")).into_owned());
            }
        }
        parts.push(shell_words::quote(&self.program.display().to_string()).into_owned());
        parts.extend(self.args.iter().map(|a| shell_words::quote(a).into_owned()));
        parts.join(" ")
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(d) = &self.cwd {
            writeln!(f, "      cwd: {}", d.display())?;
        }
        for (k, v) in &self.env {
            writeln!(f, "      env: {k}={v}")?;
        }
        for k in &self.env_remove {
            writeln!(f, "      env: unset {k}")?;
        }
        write!(
            f,
            "      $ {}",
            shell_words::quote(&self.program.display().to_string())
        )?;
        for a in &self.args {
            if a.contains('\n') {
                write!(f, " \\\n        <<'EOF'\n{}\nEOF", a.trim_end())?;
            } else if a.starts_with("-D") || a.len() > 50 {
                write!(f, " \\\n        {}", shell_words::quote(a))?;
            } else {
                write!(f, " {}", shell_words::quote(a))?;
            }
        }
        writeln!(f)
    }
}

/// The child leads a process group of its own: on Ctrl-C or SIGTERM rocbuild stops it and
/// everything it started (ninja's compilers, pip's builds) as one group, after which it
/// undoes its own work; the terminal's Ctrl-C reaches rocbuild alone. Nothing a child runs
/// reads the terminal (pip gets `--no-input`).
pub(crate) fn own_process_group(e: duct::Expression) -> duct::Expression {
    e.before_spawn(|cmd| {
        rocbuild_probe::platform::host::own_process_group(cmd);
        Ok(())
    })
}
