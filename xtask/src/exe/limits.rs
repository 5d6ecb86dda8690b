//! The unit tests that do not pass under Wine for a reason that is Wine's, not rocbuild's:
//! each named with that reason. A listed test still runs (unless it hangs), and its result is
//! printed with the reason: nothing is skipped silently, and a listed test that passes is
//! said so (take it off the list). docs/guides/rocbuild-exe.md shows the same list.

/// How a listed test behaves under Wine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// It fails: it is run, and its failure is expected.
    Fails,
    /// It never finishes: it is not run (`--skip NAME --exact`), and said so.
    Hangs,
}

/// One listed test.
pub struct Limit {
    /// The crate's test target name (`rocbuild_engine`).
    pub krate: &'static str,
    /// The test's full name (`module::tests::name`).
    pub test: &'static str,
    pub kind: Kind,
    /// The Wine limitation, in words.
    pub why: &'static str,
}

pub const LIMITS: &[Limit] = &[];

/// The listing for a test, if any.
pub fn find(krate: &str, test: &str) -> Option<&'static Limit> {
    LIMITS.iter().find(|l| l.krate == krate && l.test == test)
}
