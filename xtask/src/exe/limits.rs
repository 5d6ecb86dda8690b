//! The unit tests that do not pass for the Windows target under Wine, each named with what
//! stops it ([`Cause`]). A listed test still runs (unless it hangs), and its result is
//! printed with the reason: nothing is skipped silently, and a listed test that passes is
//! said so (take it off the list). docs/rocbuild-exe.md shows the same list.
//!
//! Only [`Cause::Wine`] is Wine's own; the other two are the tests' (they would fail on a
//! real Windows runner too) and are work left: issue 39.

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
    /// The test runs a Unix program (`sh`, `cc`/`gcc`, `git`, `python3`, a MinGW gcc) that the
    /// Wine environment has no Windows program for.
    UnixTool,
    /// The test expects `/` where a Windows host's `Path::join` writes `\` (a plan or a
    /// message for a Linux or macOS target, made on a Windows host), or a Linux path where
    /// Windows canonicalizes to `\\?\C:\…`.
    UnixPaths,
}

impl Cause {
    pub fn label(self) -> &'static str {
        match self {
            Cause::Wine => "Wine",
            Cause::UnixTool => "needs a Unix tool",
            Cause::UnixPaths => "expects Unix paths",
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
        krate: "rocbuild_doctor",
        test: "checks::gpu::tests::rocblas_without_kernels_for_the_gpu",
        kind: Kind::Fails,
        cause: Cause::UnixPaths,
        why: "the message joins a Linux ROCm path with `\\`: `/opt/rocm-6.2/lib\\rocblas/library`",
    },
    Limit {
        krate: "rocbuild_doctor",
        test: "loadtest::tests::a_crash_names_the_step",
        kind: Kind::Fails,
        cause: Cause::UnixTool,
        why: "runs `python3`",
    },
    Limit {
        krate: "rocbuild_doctor",
        test: "loadtest::tests::a_hang_is_killed_and_named",
        kind: Kind::Fails,
        cause: Cause::UnixTool,
        why: "runs `python3`",
    },
    Limit {
        krate: "rocbuild_doctor",
        test: "loadtest::tests::reports_each_step_with_the_loaders_words",
        kind: Kind::Fails,
        cause: Cause::UnixTool,
        why: "runs `python3`",
    },
    Limit {
        krate: "rocbuild_engine",
        test: "clean::tests::sizes_by_kind_and_removal_of_one_kind",
        kind: Kind::Fails,
        cause: Cause::Wine,
        why: "std's remove_dir_all of a tree with no open handle fails with error 145 (directory not empty) under Wine 8, whose delete lacks the POSIX semantics (FILE_DISPOSITION_POSIX_SEMANTICS) of Windows 10 1809+ on NTFS: a deleted file's name stays until its handle closes, so its directory is not empty yet",
    },
    Limit {
        krate: "rocbuild_engine",
        test: "plan::configure::tests::user_defines_come_last_and_name_another_build_tree",
        kind: Kind::Fails,
        cause: Cause::UnixPaths,
        why: "a Linux plan's Torch_DIR is `/cache\\torch-lite\\…`",
    },
    Limit {
        krate: "rocbuild_engine",
        test: "plan::install::tests::each_os_links_its_own_way",
        kind: Kind::Fails,
        cause: Cause::UnixPaths,
        why: "a Linux RUNPATH made on a Windows host is `$ORIGIN/..\\torch\\lib`",
    },
    Limit {
        krate: "rocbuild_engine",
        test: "plan::libraries::tests::ctranslate2_takes_onednn_from_source_on_linux_x86_64_and_from_the_venv_elsewhere",
        kind: Kind::Fails,
        cause: Cause::UnixPaths,
        why: "a Linux plan's text shows `/cache\\deps\\dnnl-…`",
    },
    Limit {
        krate: "rocbuild_engine",
        test: "plan::python_part::tests::a_source_python_part_is_built_from_the_checkout",
        kind: Kind::Fails,
        cause: Cause::UnixPaths,
        why: "`/src\\python` where the test expects `/src/python`",
    },
    Limit {
        krate: "rocbuild_engine",
        test: "plan::torch_cmake::tests::a_rocm_torch_needs_its_root_for_the_native_package",
        kind: Kind::Fails,
        cause: Cause::UnixPaths,
        why: "`/opt/rocm-6.4.3\\lib\\llvm\\bin`",
    },
    Limit {
        krate: "rocbuild_engine",
        test: "plan::wheel_compiler::tests::a_versioned_driver_is_taken_only_when_its_version_says_so",
        kind: Kind::Fails,
        cause: Cause::UnixTool,
        why: "its `gcc-14` is a shell script",
    },
    Limit {
        krate: "rocbuild_engine",
        test: "plan::wheel_compiler::tests::the_wheels_gcc_on_path_is_chosen_unless_the_user_named_a_compiler",
        kind: Kind::Fails,
        cause: Cause::UnixTool,
        why: "its `gcc` is a shell script",
    },
    Limit {
        krate: "rocbuild_engine",
        test: "source::preflight_tests::an_unreachable_source_fails_fast_and_says_what_works_offline",
        kind: Kind::Fails,
        cause: Cause::UnixPaths,
        why: "the mirror path in the message is `DIR/unreachable.invalid\\owner\\repo.git`",
    },
    Limit {
        krate: "rocbuild_engine",
        test: "source::tests::a_broken_unrelated_ref_in_the_mirror_does_not_stop_the_release",
        kind: Kind::Fails,
        cause: Cause::UnixTool,
        why: "runs `git`",
    },
    Limit {
        krate: "rocbuild_engine",
        test: "source::tests::a_mirror_without_the_release_says_so",
        kind: Kind::Fails,
        cause: Cause::UnixTool,
        why: "runs `git`",
    },
    Limit {
        krate: "rocbuild_engine",
        test: "source::tests::only_the_nested_submodules_named_are_fetched",
        kind: Kind::Fails,
        cause: Cause::UnixTool,
        why: "runs `git`",
    },
    Limit {
        krate: "rocbuild_engine",
        test: "step::tests::a_step_that_found_the_disk_full_says_so_first",
        kind: Kind::Fails,
        cause: Cause::UnixTool,
        why: "runs `sh`",
    },
    Limit {
        krate: "rocbuild_engine",
        test: "step::tests::failing_step_reports_tail_log_and_reproducer",
        kind: Kind::Fails,
        cause: Cause::UnixTool,
        why: "runs `sh`",
    },
    Limit {
        krate: "rocbuild_engine",
        test: "step::tests::failure_excerpt_leaves_out_ninja_progress",
        kind: Kind::Fails,
        cause: Cause::UnixTool,
        why: "runs `sh`",
    },
    Limit {
        krate: "rocbuild_link",
        test: "tests::preloads_the_dlls_the_artifacts_need_dependencies_first",
        kind: Kind::Fails,
        cause: Cause::UnixTool,
        why: "runs `x86_64-w64-mingw32-gcc`",
    },
    Limit {
        krate: "rocbuild_link",
        test: "tests::search_entries_per_platform",
        kind: Kind::Fails,
        cause: Cause::UnixPaths,
        why: "a Linux RUNPATH made on a Windows host is `$ORIGIN/..\\torch\\lib`",
    },
    Limit {
        krate: "rocbuild_link",
        test: "tests::the_venvs_own_lib_directory_is_relative",
        kind: Kind::Fails,
        cause: Cause::UnixPaths,
        why: "a Linux RUNPATH made on a Windows host is `$ORIGIN/..\\..\\..`",
    },
    Limit {
        krate: "rocbuild_native",
        test: "kpack::tests::the_search_paths_are_read_and_a_broken_reference_is_an_error",
        kind: Kind::Fails,
        cause: Cause::UnixTool,
        why: "runs `cc` to make an ELF",
    },
    Limit {
        krate: "rocbuild_native",
        test: "rpath::tests::sets_runpath_on_a_real_library",
        kind: Kind::Fails,
        cause: Cause::UnixTool,
        why: "runs `cc` to make an ELF",
    },
    Limit {
        krate: "rocbuild_probe",
        test: "rocblas::tests::amd_layout_and_missing_directory",
        kind: Kind::Fails,
        cause: Cause::UnixPaths,
        why: "canonicalize gives `\\\\?\\C:\\…` on Windows; the test expects the path as joined",
    },
    Limit {
        krate: "rocbuild_probe",
        test: "rocblas::tests::debian_versioned_directory_is_found_from_the_library_name",
        kind: Kind::Fails,
        cause: Cause::UnixPaths,
        why: "canonicalize gives `\\\\?\\C:\\…` on Windows; the test expects the path as joined",
    },
    Limit {
        krate: "rocbuild_venv",
        test: "install::tests::roll_back_is_byte_identical_and_recover_undoes_a_killed_run",
        kind: Kind::Fails,
        cause: Cause::Wine,
        why: "`.rocbuild/` is left: the lock file is removed while its handle is open, and Wine 8's DeleteFile keeps the name until the handle closes (Windows 10 1903+ on NTFS removes it at once: POSIX delete semantics), so the directory is not empty when it is removed",
    },
    Limit {
        krate: "rocbuild_venv",
        test: "lock::tests::a_second_lock_on_the_venv_fails_fast_or_waits_and_leaves_no_trace",
        kind: Kind::Fails,
        cause: Cause::Wine,
        why: "as above: `.rocbuild/` is left because Wine 8 keeps an open file's name after DeleteFile",
    },
];

/// The listing for a test, if any.
pub fn find(krate: &str, test: &str) -> Option<&'static Limit> {
    LIMITS.iter().find(|l| l.krate == krate && l.test == test)
}
