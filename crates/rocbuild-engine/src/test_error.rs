//! What stops `rocbuild test` (usecase/test): each says what, where and how to fix it. Apart
//! from the use case, so that `error` needs nothing of the use cases.

use miette::Diagnostic;
use thiserror::Error;

#[derive(Debug, Error, Diagnostic)]
pub enum TestError {
    #[error("no rocbuild build of {recipe} in {venv}")]
    #[diagnostic(
        code(rocbuild::test::not_built),
        help("`rocbuild test` runs upstream's tests on rocbuild's build: build it first (rocbuild {recipe} --venv {venv})")
    )]
    NotBuilt { recipe: String, venv: String },

    #[error("the recipe {recipe} ({file}) has no [test] table: rocbuild does not know how to run its tests")]
    #[diagnostic(
        code(rocbuild::test::no_tests),
        help("add a [test] table naming the checkout's test files (files = [\"test\"]), their requirements and known failures (docs/recipes.md, \"[test]\")")
    )]
    NoTestTable { recipe: String, file: String },

    #[error("the source {recipe} {version} was built from is gone from the cache and cannot be fetched again: {reason}")]
    #[diagnostic(code(rocbuild::test::source_gone), help("{help}"))]
    SourceGone {
        recipe: String,
        version: String,
        reason: String,
        help: String,
    },

    #[error("the recipe's [test] files names `{file}`, which the source of {recipe} {version} ({source_dir}) does not have")]
    #[diagnostic(
        code(rocbuild::test::missing_file),
        help("fix `[test] files` in the recipe (paths relative to the checkout), or limit the entry to the releases that have it")
    )]
    MissingFile {
        recipe: String,
        version: String,
        file: String,
        source_dir: String,
    },

    #[error("the test requirements {requirements} could not be installed into the overlay {overlay}: {reason}")]
    #[diagnostic(
        code(rocbuild::test::requirements),
        help("pip needs the package index (or PIP_FIND_LINKS / PIP_INDEX_URL pointing at one); the venv was not changed")
    )]
    Requirements {
        requirements: String,
        overlay: String,
        reason: String,
    },

    #[error("pytest could not run the tests of {recipe} (exit status {status}): {last}")]
    #[diagnostic(code(rocbuild::test::pytest), help("{help}"))]
    Pytest {
        recipe: String,
        status: String,
        last: String,
        help: String,
    },
}
