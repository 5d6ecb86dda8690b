//! The unit tests that do not pass for the Windows target under Wine, each named with what
//! stops it ([`Cause`]). A listed test still runs (unless it hangs), and its result is
//! printed with the reason: nothing is skipped silently, and a listed test that passes is
//! said so (take it off the list). docs/rocbuild-exe.md shows the same list.
//!
//! Only Wine's own limits are listed here. A test that cannot run on any Windows host (it runs
//! `sh`, `git`, `cc` or a `python3` script, or plans a Linux build whose paths a Windows host
//! joins with `\`) carries `#[cfg_attr(windows, ignore = "a Unix-host test: …")]` in its own
//! source, so a real Windows runner (the release workflow's test job) skips the same tests, and
//! the runner prints each one with its reason.

/// How a listed test behaves under Wine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(dead_code)] // no test hangs today; the runner handles the kind
pub enum Kind {
    /// It fails: it is run, and its failure is expected.
    Fails,
    /// It never finishes: it is not run (`--skip NAME --exact`), and said so.
    Hangs,
}

/// What stops a listed test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// Wine behaves unlike Windows.
    Wine,
}

impl Cause {
    pub fn label(self) -> &'static str {
        match self {
            Cause::Wine => "Wine",
        }
    }
}

/// One listed test.
pub struct Limit {
    /// The crate's test target name (`rocbuild_engine`).
    pub krate: &'static str,
    /// The test's full name (`module::tests::name`).
    pub test: &'static str,
    pub kind: Kind,
    pub cause: Cause,
    /// What stops it, in words.
    pub why: &'static str,
}

pub const LIMITS: &[Limit] = &[
    Limit {
        krate: "rocbuild_engine",
        test: "clean::tests::sizes_by_kind_and_removal_of_one_kind",
        kind: Kind::Fails,
        cause: Cause::Wine,
        why: "std's remove_dir_all of a tree with no open handle fails with error 145 (directory not empty) under Wine 8, whose delete lacks the POSIX semantics (FILE_DISPOSITION_POSIX_SEMANTICS) of Windows 10 1809+ on NTFS: a deleted file's name stays until its handle closes, so its directory is not empty yet",
    },
    Limit {
        krate: "rocbuild_engine",
        test: "source::apply::tests::a_zero_context_fix_without_a_git_header_applies_where_it_says",
        kind: Kind::Fails,
        cause: Cause::Wine,
        why: "the patch applies, but the scratch repository libgit2 used is left beside the tree: its remove_dir_all fails under Wine 8 as clean's does (error 145, no POSIX delete semantics); the next patch reuses it",
    },
];

/// The listing for a test, if any.
pub fn find(krate: &str, test: &str) -> Option<&'static Limit> {
    LIMITS.iter().find(|l| l.krate == krate && l.test == test)
}
