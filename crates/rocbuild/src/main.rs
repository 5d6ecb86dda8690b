//! rocbuild: the binary. clap structs (cli.rs), the settings layer (settings.rs), one file per
//! command (commands/), dispatch and the exit status. The work is in the library crates.

mod cli;
#[macro_use]
mod out;
mod commands;
mod reference;
mod settings;

use std::process::ExitCode;

use clap::Parser;
use miette::Result;
use rocbuild_engine::Verbosity;
use rocbuild_recipe::RecipeSet;

use cli::{Cli, Command, Global};

/// How a run ended, the one place exit codes are decided (docs/manual.md: "Exit status").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// 0: done, or all is well.
    Success,
    /// 1: something is wrong (a failed build, a stale status, doctor's findings).
    Failure,
    /// 2: the command line cannot be acted on (a bad option or value, an unknown package).
    Usage,
    /// 3 (`doctor`, `deps`, `repair`, `bundle`): a library the loader does not find (a
    /// dependency, FFmpeg, a DLL), and no ABI break.
    MissingLibrary,
    /// 4 (`doctor`, `deps`, `repair`): an import nothing exports (built for another version),
    /// and no missing library.
    AbiBreak,
    /// 5 (`doctor`, `deps`, `repair`): both a missing library and an ABI break.
    MissingLibraryAndAbiBreak,
    /// 128 + N: stopped by signal N (130 for Ctrl-C, 143 for SIGTERM), after undoing what
    /// was not committed.
    Signal(u8),
}

impl From<ExitStatus> for ExitCode {
    fn from(s: ExitStatus) -> ExitCode {
        ExitCode::from(s.code())
    }
}

impl From<rocbuild_doctor::Verdict> for ExitStatus {
    fn from(v: rocbuild_doctor::Verdict) -> ExitStatus {
        use rocbuild_doctor::Verdict;
        match v {
            Verdict::Ok => ExitStatus::Success,
            Verdict::Other => ExitStatus::Failure,
            Verdict::MissingLibrary => ExitStatus::MissingLibrary,
            Verdict::AbiBreak => ExitStatus::AbiBreak,
            Verdict::MissingLibraryAndAbiBreak => ExitStatus::MissingLibraryAndAbiBreak,
        }
    }
}

/// The reporter of the use cases: their lines go to stderr.
pub struct Stderr;

impl rocbuild_engine::Reporter for Stderr {
    fn note(&mut self, line: &str) {
        errln!("{line}");
    }
}

fn main() -> ExitCode {
    // `--version X` picks a recipe's release; alone, it can only mean rocbuild's own, as in
    // every other tool (-V and --rocbuild-version say the same).
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    // Every secret this process was given (a URL's password in an argument or a variable, a
    // secret variable's value) is known before anything is printed or logged.
    rocbuild_secret::register_process(args.iter().filter_map(|a| a.to_str()));
    if args.len() == 1 && args[0] == "--version" {
        outln!("rocbuild {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    let cli = match Cli::try_parse_from(cli::subcommand_first(std::env::args_os())) {
        Ok(cli) => cli,
        Err(e) => return command_line_error(e),
    };
    // The flags every command shares and the environment, resolved once for this command.
    let st = settings::Settings::resolve(&cli.global, settings::Vars::capture());
    if st.test_hook(settings::ROCBUILD_TEST_PARSE_ONLY) == Some(1) {
        return ExitCode::SUCCESS;
    }
    let json = wants_json(&cli);
    // Where the key that seals rocbuild's journals lives: this user's cache, when it is safe.
    rocbuild_venv::state_key::configure(st.state_key_dir());
    if let Some(n) = st.test_hook(settings::ROCBUILD_TEST_KILL_AFTER_STEP) {
        rocbuild_venv::txn_fs::arm_kill(n);
    }
    if let Some(n) = st.test_hook(settings::ROCBUILD_TEST_FAIL_AFTER_STEP) {
        rocbuild_venv::txn_fs::arm_disk_full(n);
    }
    let signalled = || rocbuild_engine::interrupt::received().is_some();
    if let Some(n) = st.test_hook(settings::ROCBUILD_TEST_PAUSE_AFTER_STEP) {
        rocbuild_venv::txn_fs::arm_pause(n, signalled);
    }
    if let Some(n) = st.test_hook_in_swap(settings::ROCBUILD_TEST_PAUSE_AFTER_STEP) {
        rocbuild_venv::txn_fs::arm_pause_in_swap(n, signalled);
    }
    // Commands that change a venv catch Ctrl-C and SIGTERM: they stop their children, undo
    // what is not committed and exit with 128 + the signal. The others keep the default.
    let changes_a_venv = matches!(
        cli.command,
        None | Some(Command::Rebuild(_)) | Some(Command::Restore(_))
    );
    // `test` changes no venv, but its pytest (a group of its own) must stop with it and its
    // run folder under the cache (the test requirements' overlay) must go.
    let catches_signals = changes_a_venv || matches!(cli.command, Some(Command::Test(_)));
    // A closed stdout (`| head -1`) ends a command that only reads, quietly; one that changes
    // a venv (repair too) goes on without its output, so that it ends as it would have.
    if changes_a_venv || matches!(cli.command, Some(Command::Repair(_))) {
        out::keep_going_on_closed_stdout();
    }
    if catches_signals {
        if let Err(e) = rocbuild_engine::interrupt::catch() {
            tracing::warn!("cannot catch Ctrl-C: {e}");
        }
    }
    // `-v` adds what rocbuild's own crates note on the way (which host Python was passed over
    // and why); ROCBUILD_LOG, when set, decides alone.
    let default_log = if cli.global.verbose {
        VERBOSE_LOG
    } else {
        "warn"
    };
    let filter = st
        .log_filter()
        .and_then(|f| tracing_subscriber::EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new(default_log));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(out::tracing_writer)
        .without_time()
        .init();
    let _ = miette::set_hook(Box::new(|_| {
        Box::new(
            miette::MietteHandlerOpts::new()
                .width(text_width())
                // Never inside a word: a package name (`libavcodec-dev`), a command or a path
                // stays whole, on the next line when it does not fit.
                .break_words(false)
                .word_separator(textwrap::WordSeparator::AsciiSpace)
                .word_splitter(textwrap::WordSplitter::NoHyphenation)
                .build(),
        )
    }));
    match dispatch(cli, &st) {
        Ok(status) => status.into(),
        Err(report) => {
            errln!("{report:?}");
            let status = exit_status_of(&report);
            if json {
                print_json_error(&json_error(&report, status));
            }
            status.into()
        }
    }
}

/// The log filter of `-v`: warnings from everything, and rocbuild's own notes.
const VERBOSE_LOG: &str = "warn,rocbuild=info,rocbuild_probe=info,rocbuild_engine=info,rocbuild_fetch=info,rocbuild_venv=info,rocbuild_doctor=info,rocbuild_native=info,rocbuild_link=info,rocbuild_recipe=info";

/// The width to wrap messages at: the terminal's (stderr), else `$COLUMNS`, else 100 columns
/// (as clap does for `--help`).
fn text_width() -> usize {
    out::stderr_terminal_width()
        .or_else(|| std::env::var("COLUMNS").ok()?.trim().parse().ok())
        .filter(|w| *w >= 20)
        .unwrap_or(100)
}

/// Does the command print JSON (`--json`)? Then its errors are JSON on stdout too.
fn wants_json(cli: &Cli) -> bool {
    match &cli.command {
        None => cli.build.json,
        Some(Command::Status(a)) => a.json,
        Some(Command::Ffmpeg(a)) => a.json,
        Some(Command::Doctor(a)) => a.json,
        Some(Command::Deps(a)) => a.json,
        Some(Command::Bundle(a)) => a.json(),
        Some(Command::Repair(a)) => a.json,
        Some(Command::Test(a)) => a.json,
        Some(_) => false,
    }
}

impl ExitStatus {
    fn code(self) -> u8 {
        match self {
            ExitStatus::Success => 0,
            ExitStatus::Failure => 1,
            ExitStatus::Usage => 2,
            ExitStatus::MissingLibrary => 3,
            ExitStatus::AbiBreak => 4,
            ExitStatus::MissingLibraryAndAbiBreak => 5,
            ExitStatus::Signal(n) => 128u8.saturating_add(n),
        }
    }
}

/// One JSON object for an error: its code, message, help, the causes under it, the exit code.
pub(crate) fn json_error(report: &miette::Report, status: ExitStatus) -> serde_json::Value {
    let causes: Vec<String> = report.chain().skip(1).map(|e| e.to_string()).collect();
    serde_json::json!({
        "error": {
            "code": report.code().map(|c| c.to_string()),
            "message": report.to_string(),
            "help": report.help().map(|h| h.to_string()),
            "causes": causes,
        },
        "exit_code": status.code(),
    })
}

pub(crate) fn print_json_error(v: &serde_json::Value) {
    outln!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
    );
}

/// clap's message as clap prints it (in colour on a terminal), unless it would show a secret
/// (a credentialed URL given to the wrong option): then redacted, without colour.
fn print_clap(e: &clap::Error) {
    let plain = e.render().to_string();
    if rocbuild_secret::redact(&plain) == plain {
        let _ = e.print();
    } else if e.use_stderr() {
        errln!("{}", plain.trim_end());
    } else {
        outln!("{}", plain.trim_end());
    }
}

/// clap's own errors (and `--help`, `--rocbuild-version`) as clap prints them; with `--json`
/// on the command line, a usage error is also one JSON object on stdout.
fn command_line_error(e: clap::Error) -> ExitCode {
    use clap::error::{ContextKind, ErrorKind};
    let is_error = !matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    if is_error && std::env::args_os().any(|a| a == "--json") {
        print_clap(&e);
        let help = match e.get(ContextKind::SuggestedArg) {
            Some(s) => format!("did you mean {s}? see rocbuild --help"),
            None => "see rocbuild --help".into(),
        };
        let message = e
            .render()
            .to_string()
            .lines()
            .next()
            .unwrap_or("")
            .trim_start_matches("error: ")
            .to_string();
        print_json_error(&serde_json::json!({
            "error": {
                "code": "rocbuild::usage",
                "message": message,
                "help": help,
                "causes": [],
            },
            "exit_code": 2,
        }));
        return ExitCode::from(2);
    }
    print_clap(&e);
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
}

/// A usage error (a bad option or value) exits 2, like clap's own; anything else 1.
fn exit_status_of(report: &miette::Report) -> ExitStatus {
    match report.downcast_ref::<rocbuild_engine::EngineError>() {
        Some(rocbuild_engine::EngineError::Usage { .. }) => ExitStatus::Usage,
        Some(
            rocbuild_engine::EngineError::Interrupted { signal, .. }
            | rocbuild_engine::EngineError::Venv(rocbuild_venv::VenvError::Interrupted {
                signal,
                ..
            }),
        ) => ExitStatus::Signal(u8::try_from(*signal).unwrap_or(0)),
        _ => match report.downcast_ref::<rocbuild_venv::VenvError>() {
            Some(rocbuild_venv::VenvError::Interrupted { signal, .. }) => {
                ExitStatus::Signal(u8::try_from(*signal).unwrap_or(0))
            }
            _ => ExitStatus::Failure,
        },
    }
}

fn dispatch(cli: Cli, st: &settings::Settings) -> Result<ExitStatus> {
    use commands::{build, clean, doctor, publish, rebuild, restore, schedule, status, wheel};
    let recipes = || -> Result<RecipeSet> { Ok(RecipeSet::load(&st.recipe_dirs)?) };
    match cli.command {
        Some(Command::Ffmpeg(a)) => commands::ffmpeg::ffmpeg(&a, st),
        Some(Command::Recipes { variables, json }) => {
            commands::recipes::list_recipes(&recipes()?, variables, json, st)?;
            Ok(ExitStatus::Success)
        }
        Some(Command::Status(a)) => status::status(&recipes()?, &a, st),
        Some(Command::Rebuild(a)) => rebuild::rebuild(&recipes()?, &a, st),
        Some(Command::Schedule(a)) => schedule::schedule(&a, st),
        Some(Command::Restore(a)) => restore::restore(&a, st),
        Some(Command::Wheel(a)) => wheel::wheel(&a, st),
        Some(Command::Test(a)) => commands::test::test(&recipes()?, &a, st),
        Some(Command::Publish(a)) => publish::publish(&a, st),
        Some(Command::Clean(a)) => clean::clean(&a, st),
        Some(Command::Doctor(a)) => doctor::doctor(&recipes()?, &a, st),
        Some(Command::Deps(a)) => doctor::deps(&a, st),
        Some(Command::Bundle(a)) => doctor::bundle(&a, st),
        Some(Command::Repair(a)) => doctor::repair(&a, st),
        Some(Command::Completions { shell }) => commands::completions::completions(shell),
        Some(Command::Man) => commands::man::man(),
        None => build::build(&recipes()?, &cli.build, st),
    }
}

pub(crate) fn verbosity(g: &Global) -> Verbosity {
    if g.quiet {
        Verbosity::Quiet
    } else if g.verbose {
        Verbosity::Verbose
    } else {
        Verbosity::Normal
    }
}
