//! Help and error text wrap to the terminal's width (`COLUMNS` when not a terminal) and never
//! inside a word: a package name, a command or a path stays whole (issue 11, item 9).

use crate::common::*;

fn width(text: &str) -> usize {
    text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

#[test]
fn help_wraps_to_the_terminal_width() {
    let narrow = rocbuild(&["--help"], &[("COLUMNS", "60")]);
    ok(&narrow);
    assert!(width(&narrow.stdout) <= 60, "{}", narrow.stdout);
    let wide = rocbuild(&["--help"], &[("COLUMNS", "220")]);
    ok(&wide);
    assert!(width(&wide.stdout) > 100, "{}", wide.stdout);
    // Not one word cut: the words of the wide help are the words of the narrow one.
    let words = |t: &str| t.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    assert_eq!(words(&narrow.stdout), words(&wide.stdout));
}

#[test]
fn errors_wrap_to_the_terminal_width_and_never_split_a_path_or_a_name() {
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp
        .path()
        .join("a-venv-with-a-long-hyphenated-name-libavcodec-dev");
    let v = venv.to_str().unwrap();
    for columns in ["40", "72", "160"] {
        let out = rocbuild(&["status", "--venv", v], &[("COLUMNS", columns)]);
        assert_eq!(out.code, 1, "{}", out.stderr);
        // The path is whole on one line (on a line of its own when it does not fit).
        assert!(
            out.stderr.lines().any(|l| l.contains(v)),
            "COLUMNS={columns}:\n{}",
            out.stderr
        );
        let limit: usize = columns.parse().unwrap();
        for l in out.stderr.lines() {
            assert!(
                l.chars().count() <= limit || l.contains(v),
                "COLUMNS={columns}: {l:?}\n{}",
                out.stderr
            );
        }
    }
}

#[test]
fn version_alone_is_rocbuilds_own_and_with_a_recipe_picks_the_release() {
    for flag in ["--version", "-V", "--rocbuild-version"] {
        let out = rocbuild(&[flag], &[]);
        ok(&out);
        assert_eq!(
            out.stdout.trim(),
            format!("rocbuild {}", env!("CARGO_PKG_VERSION")),
            "{flag}"
        );
    }
    // After a recipe it still takes a value: without one it is a usage error, not the version.
    let out = rocbuild(&["torchcodec", "--version"], &[]);
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("--version"), "{}", out.stderr);
}

/// Every `$ rocbuild …` line of the README and the guides is a command line rocbuild accepts
/// (its real parser: subcommands, flags, values), so a guide naming a flag that does not
/// exist, or no longer does, fails the build.
#[test]
fn every_command_in_the_readme_and_the_guides_is_one_rocbuild_accepts() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut docs = vec![root.join("README.md")];
    let guides = root.join("docs/guides");
    let mut names: Vec<_> = std::fs::read_dir(&guides)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    names.sort();
    docs.extend(names);
    let mut checked = 0;
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        for line in text.lines() {
            let Some(cmd) = line.trim().strip_prefix("$ ") else {
                continue;
            };
            // `VAR=value rocbuild …`: the variables are the shell's.
            let words: Vec<&str> = cmd
                .split_whitespace()
                .skip_while(|w| w.contains('=') && !w.starts_with('-'))
                .collect();
            if words.first() != Some(&"rocbuild") {
                continue;
            }
            let out = rocbuild(&words[1..], &[("ROCBUILD_TEST_PARSE_ONLY", "1")]);
            assert_eq!(
                out.code,
                0,
                "{}: `{cmd}` is not a command line rocbuild accepts:\n{}",
                doc.display(),
                out.stderr
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 15,
        "only {checked} command lines found in the guides"
    );
    // And a wrong one is caught.
    let bad = rocbuild(
        &["torchcodec", "--arhc", "gfx1201"],
        &[("ROCBUILD_TEST_PARSE_ONLY", "1")],
    );
    assert_ne!(bad.code, 0);
}
