//! Recipe strings that become path components under the venv or rocbuild's cache.
//!
//! A recipe of the user's (`--recipes DIR`) is as untrusted as anything in site-packages: its
//! `name` becomes directory and file names in the cache (`build/NAME-…`, `src/NAME-…`, the run
//! log, the lock), its `import-dir` the directory under site-packages that rocbuild installs
//! into and `status`/`restore` read back. A `../` there would put a build, a log or libraries
//! outside both, where nothing can undo it. So these are plain names, and the strings that name
//! a path below a directory rocbuild owns (the checkout, site-packages) are relative paths of
//! plain components, checked when the recipe is loaded, before anything runs.

use serde::Deserialize;
use toml::Spanned;

use crate::error::RecipeError;
use crate::load::Checker;
use crate::schema::{RawRecipe, Text};
use crate::template;

/// Placeholders whose value is a word, never a path (versions, names, OS and flavour names,
/// `;`-separated lists): the only ones a relative path may hold.
const WORD_VARIABLES: &[&str] = &[
    "name",
    "version",
    "os",
    "flavor",
    "jobs",
    "python.version",
    "python.ext-suffix",
    "torch.version",
    "torch.hip",
    "torch.hip-short",
    "ffmpeg.major",
    "ffmpeg.version",
    "backend",
    "rocm.version",
    "gpu.archs",
    "cuda.archs",
    "cuda.cmake-archs",
    "cuda.sm",
    "cuda.findcuda-archs",
    "cuda.findcuda-gencode",
    "cuda.version",
    "cuda.version-short",
];

/// Why a string is not what its field must be: the label under it and the help line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotPlain {
    pub label: &'static str,
    pub why: String,
}

fn not_plain(label: &'static str, why: impl Into<String>) -> Result<(), NotPlain> {
    Err(NotPlain {
        label,
        why: why.into(),
    })
}

/// A plain name: letters, digits, `-`, `_` and `.`, and not `.` or `..`.
pub fn plain_name(s: &str) -> Result<(), NotPlain> {
    if s.is_empty() {
        return not_plain("empty", "it is empty");
    }
    if s == "." || s == ".." {
        return not_plain(
            "a directory, not a name",
            format!("`{s}` is a directory, not a name"),
        );
    }
    match s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        Some(c) => not_plain("not a plain name", format!("it holds {}", describe(c))),
        None => Ok(()),
    }
}

/// A distribution (project) name as PEP 508 spells one: ASCII letters and digits, with `-`,
/// `_` and `.` inside.
pub fn distribution_name(s: &str) -> Result<(), NotPlain> {
    plain_name(s)?;
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if alnum(s.chars().next()) && alnum(s.chars().last()) {
        Ok(())
    } else {
        not_plain(
            "not a distribution name",
            "a distribution name starts and ends with a letter or a digit",
        )
    }
}

/// A path below a directory rocbuild owns, `/`-separated: every component plain (no `..`,
/// no `.`, none empty), not absolute, no backslash, no drive or `:`, and no placeholder
/// whose value is a path. `dot`: `.` alone (the directory itself) is allowed. Glob syntax
/// is allowed in the components; a `..` inside `{a,..}` counts as one.
pub fn relative_path(s: &str, dot: bool) -> Result<(), NotPlain> {
    let found = template::placeholders(s).unwrap_or_default();
    if let Some(p) = found
        .iter()
        .find(|p| !WORD_VARIABLES.contains(&p.name.as_str()))
    {
        return not_plain(
            "a path, not a name",
            format!("`{{{}}}` is a path: a relative path may use only placeholders whose value is a name ({})", p.name, WORD_VARIABLES.join(", ")),
        );
    }
    // The literal text, each placeholder standing for one plain word.
    let mut literal = String::new();
    let mut last = 0;
    for p in &found {
        literal.push_str(&s[last..p.range.start]);
        literal.push('x');
        last = p.range.end;
    }
    literal.push_str(&s[last..]);
    let literal = literal.replace("{{", "{").replace("}}", "}");
    if dot && literal == "." {
        return Ok(());
    }
    if literal.starts_with('/') {
        return not_plain("absolute", "it is absolute");
    }
    if let Some(c) = literal
        .chars()
        .find(|c| matches!(c, '\\' | ':') || c.is_control())
    {
        return not_plain("not a relative path", format!("it holds {}", describe(c)));
    }
    for part in literal.split('/') {
        if part.is_empty() || part == "." {
            return not_plain(
                "not a plain path",
                format!(
                    "it has {} component",
                    if part.is_empty() { "an empty" } else { "a `.`" }
                ),
            );
        }
        if part.split(['{', '}', ',']).any(|p| p == "..") {
            return not_plain("climbs out", "it climbs out with `..`");
        }
    }
    Ok(())
}

fn describe(c: char) -> String {
    match c {
        '/' => "`/`".into(),
        '\\' => "a backslash".into(),
        ':' => "`:` (a drive or a stream)".into(),
        c if c.is_control() => format!("a control character (U+{:04X})", c as u32),
        c => format!("`{c}`"),
    }
}

/// A plain name near `s` to suggest: its last component, other characters made `-`.
pub fn suggestion(s: &str) -> Option<String> {
    let last = s.rsplit(['/', '\\']).find(|p| !p.is_empty())?;
    let name: String = last
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let name = name.trim_matches('-').to_string();
    (plain_name(&name).is_ok() && name != s).then_some(name)
}

/// The spans of the strings the schema keeps as plain `String`s, read again from the text so
/// that an error points at them (unknown keys are ignored here: the schema refused them).
#[derive(Deserialize)]
struct Spans {
    package: PackageSpans,
    #[serde(default)]
    source: Option<SourceSpans>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct PackageSpans {
    name: Text,
    distribution: Text,
    import_dir: Text,
    #[serde(default)]
    windows_dll_dirs: Option<DllDirSpans>,
}

#[derive(Deserialize)]
struct DllDirSpans {
    dirs: Vec<Text>,
}

#[derive(Deserialize)]
struct SourceSpans {
    #[serde(default)]
    submodules: Option<Spanned<toml::Value>>,
}

/// What a plain name is, for the help line.
const PLAIN: &str = "a plain name is letters, digits, `-`, `_` and `.`";

impl Checker<'_> {
    /// `[package]` names, `[dependency.NAME]` keys, the Windows DLL directories and the
    /// submodule paths: plain names and relative paths.
    pub(crate) fn names(&self, raw: &RawRecipe) -> Result<(), RecipeError> {
        let spans: Spans = toml::from_str(self.text)
            .map_err(|e| self.err(e.span().unwrap_or(0..0), e.message(), "here", None))?;
        let p = &spans.package;
        self.plain(
            &p.name,
            "name",
            "a recipe's name names its build trees, checkout, lock and log in rocbuild's cache",
            plain_name,
        )?;
        self.plain(&p.import_dir, "import-dir", "the import directory is the package's directory directly under site-packages, where rocbuild installs", plain_name)?;
        self.plain(
            &p.distribution,
            "distribution",
            "the distribution is pip's name of the package, which names its dist-info directory",
            distribution_name,
        )?;
        for key in raw.dependency.keys() {
            self.plain(
                key,
                "[dependency.NAME]",
                "a dependency's name names its build in rocbuild's cache",
                plain_name,
            )?;
        }
        for d in p.windows_dll_dirs.iter().flat_map(|w| &w.dirs) {
            self.relative(d, "dirs", Below::Site, false)?;
        }
        let Some(subs) = spans.source.and_then(|s| s.submodules) else {
            return Ok(());
        };
        for path in subs
            .get_ref()
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
        {
            let text = Spanned::new(subs.span(), path.to_string());
            self.relative(&text, "submodules", Below::Checkout, false)?;
        }
        Ok(())
    }

    /// `t` (the value of `field`) is a plain name by `check`; `why` says what it names.
    fn plain(
        &self,
        t: &Text,
        field: &str,
        why: &str,
        check: fn(&str) -> Result<(), NotPlain>,
    ) -> Result<(), RecipeError> {
        let value = t.get_ref();
        check(value).map_err(|e| {
            let mean = suggestion(value).map_or(String::new(), |s| format!("did you mean `{s}`? "));
            self.err(
                t.span(),
                format!("`{field} = {value:?}` is not a plain name: {}", e.why),
                e.label,
                Some(format!("{mean}{why}; {PLAIN}, and not `.` or `..`")),
            )
        })
    }

    /// `t` (the value of `field`) is a relative path inside `below` (`.` alone when `dot`).
    pub(crate) fn relative(
        &self,
        t: &Text,
        field: &str,
        below: Below,
        dot: bool,
    ) -> Result<(), RecipeError> {
        let value = t.get_ref();
        relative_path(value, dot).map_err(|e| {
            let (inside, example) = match below {
                Below::Site => ("site-packages", "torchcodec/lib*"),
                Below::Checkout => ("the source checkout", "python"),
            };
            self.err(
                t.span(),
                format!("`{field} = {value:?}` is not a path inside {inside}: {}", e.why),
                e.label,
                Some(format!(
                    "write it relative to {inside}, as plain names joined by `/` (such as \"{example}\"): no `..`, `.` or empty component, no leading `/`, backslash or drive"
                )),
            )
        })
    }
}

/// The directory a relative path of a recipe is inside.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Below {
    Site,
    Checkout,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_are_letters_digits_dash_underscore_and_dot() {
        for ok in [
            "torchcodec",
            "llama-cpp-python",
            "llama_cpp",
            "a.b",
            "X1",
            "..a",
            "a..",
        ] {
            assert_eq!(plain_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "", ".", "..", "../x", "a/b", "/abs", "a\\b", "C:", "a b", "é", "a\0", "~x", "$HOME",
        ] {
            assert!(plain_name(bad).is_err(), "{bad:?} passed");
        }
        assert_eq!(plain_name("../x").unwrap_err().why, "it holds `/`");
        assert_eq!(
            plain_name("..").unwrap_err().why,
            "`..` is a directory, not a name"
        );
    }

    #[test]
    fn distribution_names_start_and_end_alphanumeric() {
        assert!(distribution_name("llama-cpp-python").is_ok());
        assert!(distribution_name("Fake_Codec.x2").is_ok());
        for bad in ["-x", "x-", ".x", "x/y", "..", ""] {
            assert!(distribution_name(bad).is_err(), "{bad:?} passed");
        }
    }

    #[test]
    fn relative_paths_stay_below_their_directory() {
        for ok in [
            "python",
            "python/cpp/*.cc",
            "torchcodec/libtorchcodec_*",
            "torchcodec.libs/*",
            "_rocm_sdk_core/bin",
            "pkg/_ext{python.ext-suffix}",
            "lib{{a,b}}/x",
            "a/**/b",
            "..a/b..",
        ] {
            assert_eq!(relative_path(ok, false), Ok(()), "{ok}");
        }
        assert_eq!(relative_path(".", true), Ok(()));
        for bad in [
            ".",
            "..",
            "../x",
            "a/../../b",
            "a/..",
            "./a",
            "a//b",
            "a/",
            "",
            "/etc",
            "a\\b",
            "..\\x",
            "C:/x",
            "C:x",
            "x/{{a,..}}/y",
            "{torch.lib}/x",
            "{source}",
            "{lib.dnnl.dir}/x",
        ] {
            assert!(relative_path(bad, false).is_err(), "{bad:?} passed");
        }
        assert!(relative_path("..", true).is_err());
        assert_eq!(
            relative_path("a/../../b", false).unwrap_err().why,
            "it climbs out with `..`"
        );
    }

    #[test]
    fn the_suggestion_is_the_last_plain_component() {
        assert_eq!(suggestion("../../evil").as_deref(), Some("evil"));
        assert_eq!(suggestion("..\\x y").as_deref(), Some("x-y"));
        assert_eq!(suggestion("x"), None);
        assert_eq!(suggestion(".."), None);
        assert_eq!(suggestion("/"), None);
    }
}

/// The loader refuses each field that becomes a path component, pointing at it.
#[cfg(test)]
mod loader {
    use crate::{parse, RecipeError};

    const GOOD: &str = r#"[package]
name = "x"
distribution = "x"
import-dir = "x"

[source]
git = "https://example.invalid/x"
tag = "v{version}"

[[release]]
version = "1.0.0"
torch = ">=0"

[install]
artifacts = ["libx*"]
"#;

    /// The error (text, label, help) of `GOOD` with `from` replaced by `to`.
    fn refused(from: &str, to: &str) -> (RecipeError, String) {
        let text = GOOD.replace(from, to);
        assert_ne!(text, GOOD, "{from} is not in the recipe");
        let e = parse("x.toml", &text).expect_err(to);
        let help = miette::Diagnostic::help(&e)
            .map(|h| h.to_string())
            .unwrap_or_default();
        let said = format!("{e} | {help}");
        (e, said)
    }

    /// The diagnostic as the CLI prints it without colour.
    fn render(e: &RecipeError) -> String {
        let mut out = String::new();
        let theme = miette::GraphicalTheme {
            characters: miette::ThemeCharacters::ascii(),
            styles: miette::ThemeStyles::none(),
        };
        miette::GraphicalReportHandler::new_themed(theme)
            .with_width(100)
            .render_report(&mut out, e)
            .unwrap();
        out.lines()
            .map(str::trim_end)
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn the_built_in_recipes_and_the_plain_recipe_load() {
        parse("x.toml", GOOD).unwrap();
        crate::RecipeSet::load(&[]).unwrap();
    }

    #[test]
    fn a_name_that_climbs_out_of_the_cache_is_refused_where_it_is() {
        let (e, said) = refused("name = \"x\"", "name = \"../../evil\"");
        assert!(
            said.starts_with(
                "x.toml:2:8: `name = \"../../evil\"` is not a plain name: it holds `/`"
            ),
            "{said}"
        );
        assert!(said.contains("did you mean `evil`?"), "{said}");
        insta::assert_snapshot!("name_climbs_out", render(&e));
        for bad in ["..", ".", "", "a/b", "a\\\\b", "C:x", "a b"] {
            let (_, said) = refused("name = \"x\"", &format!("name = \"{bad}\""));
            assert!(said.contains("is not a plain name"), "{bad}: {said}");
        }
    }

    #[test]
    fn an_import_dir_that_climbs_out_of_site_packages_is_refused_where_it_is() {
        let (e, said) = refused("import-dir = \"x\"", "import-dir = \"../../../../canary\"");
        assert!(
            said.starts_with(
                "x.toml:4:14: `import-dir = \"../../../../canary\"` is not a plain name"
            ),
            "{said}"
        );
        assert!(said.contains("directly under site-packages"), "{said}");
        insta::assert_snapshot!("import_dir_climbs_out", render(&e));
        // No built-in recipe uses a nested import dir: none is allowed.
        for bad in ["x/y", "/abs", "..", "."] {
            let (_, said) = refused("import-dir = \"x\"", &format!("import-dir = \"{bad}\""));
            assert!(said.contains("is not a plain name"), "{bad}: {said}");
        }
        let (_, said) = refused("distribution = \"x\"", "distribution = \"../x\"");
        assert!(
            said.contains("`distribution = \"../x\"` is not a plain name"),
            "{said}"
        );
    }

    /// Every other field that becomes a path below the checkout or site-packages.
    #[test]
    fn paths_below_site_packages_and_the_checkout_stay_below_them() {
        let install = "artifacts = [\"libx*\"]";
        for (table, field) in [
            (format!("{install}\npark = [\"x/../../../y/*\"]"), "park"),
            (
                format!("{install}\npython-libs = [\"../x/*.so\"]"),
                "python-libs",
            ),
            (
                format!("{install}\n\n[build]\ncmake-source = \"../..\""),
                "cmake-source",
            ),
            (
                format!("{install}\n\n[python]\nfrom = \"source\"\ndir = \"/etc\""),
                "dir",
            ),
            (
                format!("{install}\n\n[os.linux.install]\npark = [\"{{torch.lib}}/*\"]"),
                "park",
            ),
            (
                format!("{install}\n\n[os.linux.source]\nsubmodules = [\"../x\"]"),
                "submodules",
            ),
        ] {
            let (_, said) = refused(install, &table);
            assert!(
                said.contains(&format!("`{field} = ")) && said.contains("is not a path inside"),
                "{field}: {said}"
            );
        }
        let (e, said) = refused(install, &format!("{install}\npark = [\"x/../../../y/*\"]"));
        assert!(
            said.contains("x.toml:16:9:") && said.contains("climbs out with `..`"),
            "{said}"
        );
        insta::assert_snapshot!("park_climbs_out", render(&e));
        // `.` is the checkout itself where a directory of it is asked for.
        let text = GOOD.replace(
            install,
            &format!("{install}\n\n[build]\ncmake-source = \".\""),
        );
        parse("x.toml", &text).unwrap();
    }

    #[test]
    fn dll_dirs_submodules_extensions_and_dependencies_are_checked_too() {
        let pkg = "import-dir = \"x\"";
        let (_, said) = refused(
            pkg,
            &format!("{pkg}\n[package.windows-dll-dirs]\ndirs = [\"x\", \"..\\\\bin\"]"),
        );
        assert!(
            said.contains("`dirs = \"..\\\\bin\"` is not a path inside site-packages"),
            "{said}"
        );
        let (_, said) = refused(
            "tag = \"v{version}\"",
            "tag = \"v{version}\"\nsubmodules = [\"a\", \"/b\"]",
        );
        assert!(said.contains("`submodules = \"/b\"`"), "{said}");
        let ext = "[python]\nfrom = \"extension\"\n\n[python.extension]\nmodule = \"x._ext\"\n";
        let (_, said) = refused(
            "[install]",
            &format!("{ext}sources = [\"cpp/*.cc\"]\npackage = \"../x\"\n\n[install]"),
        );
        assert!(said.contains("`package = \"../x\"`"), "{said}");
        let (_, said) = refused(
            "[install]",
            &format!("{ext}sources = [\"../../*.cc\"]\npackage = \"x\"\n\n[install]"),
        );
        assert!(said.contains("`sources = \"../../*.cc\"`"), "{said}");
        let dep = format!(
            "[[needs.library]]\nname = \"a/b\"\ndescribe = \"a\"\noptional = true\n\n\
             [dependency.\"a/b\"]\ndescribe = \"a\"\ngit = \"https://example.invalid/a\"\n\
             tag = \"v1\"\ncommit = \"{}\"\n\n[install]",
            "ab".repeat(20)
        );
        let (_, said) = refused("[install]", &dep);
        assert!(
            said.contains("`[dependency.NAME] = \"a/b\"` is not a plain name"),
            "{said}"
        );
    }
}
