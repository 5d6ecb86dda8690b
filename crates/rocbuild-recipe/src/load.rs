//! Reading and validating one recipe file.

use std::ops::Range;
use std::str::FromStr;

use pep440_rs::{Version, VersionSpecifiers};
use sha2::{Digest, Sha256};

use crate::error::{nearest, RecipeError};
use crate::names::Below;
use crate::schema::{Overlay, RawRecipe, Text};
use crate::template;
use crate::Recipe;

mod test_table;

const OS_NAMES: &[&str] = &["linux", "macos", "windows"];
/// CPU architectures as Rust names them (`std::env::consts::ARCH`), for `[platform."os-arch"]`.
const ARCH_NAMES: &[&str] = &[
    "x86_64",
    "aarch64",
    "x86",
    "arm",
    "powerpc64",
    "riscv64",
    "s390x",
    "loongarch64",
];
/// Every `<os>-<arch>` a `[platform]` key or a dependency's `platforms` may name.
fn platform_names() -> Vec<String> {
    OS_NAMES
        .iter()
        .flat_map(|os| ARCH_NAMES.iter().map(move |a| format!("{os}-{a}")))
        .collect()
}

const FLAVOR_NAMES: &[&str] = &["cpu", "cuda", "rocm"];

/// Parse and validate the recipe `text`, read from `file`.
pub fn parse(file: &str, text: &str) -> Result<Recipe, RecipeError> {
    let raw: RawRecipe = toml::from_str(text).map_err(|e| toml_error(file, text, &e))?;
    let checker = Checker { file, text };
    checker.check(&raw)?;
    // `[test]` says how to test a build, not how to make one: editing it leaves builds fresh.
    let hash = hex(&Sha256::digest(
        crate::test_suite::without_test_tables(text).as_bytes(),
    ));
    Ok(Recipe {
        file: file.to_string(),
        text: text.to_string(),
        hash,
        raw,
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Turn a toml/serde error into a diagnostic with the span, and a "did you mean" when the
/// error is an unknown key.
fn toml_error(file: &str, text: &str, e: &toml::de::Error) -> RecipeError {
    let span = e.span().unwrap_or(0..0);
    let message = e.message().trim().to_string();
    let mut help = None;
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let (field, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let valid: Vec<&str> = expected
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 1)
            .map(|(_, s)| s)
            .collect();
        help = Some(match nearest(field, valid.iter().copied()) {
            Some(n) => format!("did you mean `{n}`? valid keys here: {}", valid.join(", ")),
            None => format!("valid keys here: {}", valid.join(", ")),
        });
    } else if message.starts_with("invalid type") {
        help =
            Some("check the value's type against the recipe reference in docs/recipes.md".into());
    } else if message.starts_with("missing field") {
        help = Some("add the missing key to this table".into());
    } else if e.span().is_some() {
        help = Some("this is not valid TOML; see https://toml.io for the syntax".into());
    }
    RecipeError::at(file, text, span, message, "here", help)
}

pub(crate) struct Checker<'a> {
    file: &'a str,
    pub(crate) text: &'a str,
}

impl Checker<'_> {
    pub(crate) fn err(
        &self,
        span: Range<usize>,
        msg: impl Into<String>,
        label: &str,
        help: Option<String>,
    ) -> RecipeError {
        RecipeError::at(self.file, self.text, span, msg, label, help)
    }

    fn check(&self, raw: &RawRecipe) -> Result<(), RecipeError> {
        // First: a name that climbs out of the cache or the venv is never used for anything.
        self.names(raw)?;
        if raw.releases.is_empty() {
            return Err(self.err(
                0..0,
                "the recipe declares no [[release]]",
                "",
                Some("add at least one [[release]] with `version` and `torch`".into()),
            ));
        }
        for r in &raw.releases {
            self.version(&r.version)?;
            self.specifier(&r.torch)?;
            for spec in r.ffmpeg.iter().chain(r.hip.iter()).chain(r.cuda.iter()) {
                self.specifier(spec)?;
            }
            if let Some(c) = &r.commit {
                let ok =
                    c.get_ref().len() == 40 && c.get_ref().chars().all(|c| c.is_ascii_hexdigit());
                if !ok {
                    return Err(self.err(
                        c.span(),
                        "`commit` must be a full 40-digit hex commit id",
                        "not a commit id",
                        None,
                    ));
                }
            }
        }
        self.source_kind(raw)?;
        for t in [&raw.source.git, &raw.source.tag, &raw.source.sdist]
            .into_iter()
            .flatten()
        {
            self.template(t)?;
        }
        for t in &raw.needs.python_build {
            self.template(t)?;
        }
        self.overlay_body(&Overlay {
            build: Some(raw.build.clone()),
            install: Some(raw.install.clone()),
            verify: Some(raw.verify.clone()),
            python: Some(raw.python.clone()),
            source: None,
        })?;
        for b in &raw.package.backends {
            self.key_in(b, crate::BACKEND_NAMES, "backend")?;
        }
        let backends: Vec<&str> = raw
            .package
            .backends
            .iter()
            .map(|b| b.get_ref().as_str())
            .collect();
        for (key, overlay) in &raw.backend {
            self.key_in(key, crate::BACKEND_NAMES, "backend")?;
            if !backends.contains(&key.get_ref().as_str()) {
                return Err(self.err(
                    key.span(),
                    format!("`[backend.{}]` is not in `package.backends`", key.get_ref()),
                    "never used",
                    Some(format!(
                        "add \"{}\" to `backends` in [package], or remove this table",
                        key.get_ref()
                    )),
                ));
            }
            self.overlay_body(overlay)?;
        }
        for (key, overlay) in &raw.rocm_versions {
            self.specifier(key)?;
            self.overlay_body(overlay)?;
        }
        // `[with.X]`: rocbuild's own (mkl) and the recipe's optional `[[needs.library]]`.
        let optional: Vec<&str> = crate::FEATURE_NAMES
            .iter()
            .copied()
            .chain(
                raw.needs
                    .library
                    .iter()
                    .filter(|l| l.optional)
                    .map(|l| l.name.as_str()),
            )
            .collect();
        for (key, overlay) in &raw.with {
            self.key_in(key, &optional, "optional library")?;
            self.overlay_body(overlay)?;
        }
        if let Some(w) = &raw.wheel_compiler {
            for t in [&w.linux, &w.macos, &w.windows].into_iter().flatten() {
                if crate::schema::CompilerSpec::parse(t.get_ref()).is_none() {
                    return Err(self.err(
                        t.span(),
                        format!("`{}` is not a compiler and major version", t.get_ref()),
                        "not a compiler",
                        Some(format!(
                            "write a family ({}) and a major version, such as \"gcc 14\"",
                            crate::schema::CompilerSpec::FAMILIES.join(", ")
                        )),
                    ));
                }
            }
            for b in &w.backends {
                self.key_in(b, crate::BACKEND_NAMES, "backend")?;
            }
        }
        self.extension_declared(raw)?;
        if raw.python.from == Some(crate::PythonFrom::Source) && raw.python.dir.is_none() {
            return Err(self.err(
                0..0,
                "`[python] from = \"source\"` needs `dir`",
                "",
                Some("name the directory of the checkout that holds setup.py or pyproject.toml, such as dir = \"python\"".into()),
            ));
        }
        for (key, overlay) in &raw.os {
            self.key_in(key, OS_NAMES, "operating system")?;
            self.overlay_body(overlay)?;
        }
        for (key, overlay) in &raw.platform {
            let valid = platform_names();
            let valid: Vec<&str> = valid.iter().map(String::as_str).collect();
            self.key_in(key, &valid, "platform (`<os>-<arch>`)")?;
            self.overlay_body(overlay)?;
        }
        self.stock_wheels(raw)?;
        for (key, d) in &raw.dependency {
            self.dependency(raw, key, d, &backends)?;
        }
        for (key, overlay) in &raw.flavor {
            self.key_in(key, FLAVOR_NAMES, "torch flavor")?;
            self.overlay_body(overlay)?;
        }
        for (key, overlay) in &raw.versions {
            self.specifier(key)?;
            self.overlay_body(overlay)?;
        }
        self.test_table(raw)
    }

    /// `[dependency.NAME]`: it stands for an optional `[[needs.library]]` of that name, its
    /// commit is pinned, and its backends and platforms are known names.
    fn dependency(
        &self,
        raw: &RawRecipe,
        key: &Text,
        d: &crate::schema::Dependency,
        backends: &[&str],
    ) -> Result<(), RecipeError> {
        let optional: Vec<&str> = raw
            .needs
            .library
            .iter()
            .filter(|l| l.optional)
            .map(|l| l.name.as_str())
            .collect();
        if !optional.contains(&key.get_ref().as_str()) {
            return Err(self.err(
                key.span(),
                format!(
                    "`[dependency.{}]` stands for no optional `[[needs.library]]` of that name",
                    key.get_ref()
                ),
                "no such library",
                Some(match nearest(key.get_ref(), optional.iter().copied()) {
                    Some(n) => format!("did you mean `{n}`?"),
                    None => format!(
                        "declare the library it builds: [[needs.library]] name = \"{}\", optional = true",
                        key.get_ref()
                    ),
                }),
            ));
        }
        self.template(&d.git)?;
        self.template(&d.tag)?;
        let c = d.commit.get_ref();
        if c.len() != 40 || !c.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(self.err(
                d.commit.span(),
                "`commit` must be a full 40-digit hex commit id",
                "not a commit id",
                Some("the commit the tag points at: git rev-parse 'TAG^{commit}'".into()),
            ));
        }
        for b in &d.backends {
            self.key_in(b, backends, "backend of this recipe")?;
        }
        let valid = platform_names();
        let valid: Vec<&str> = valid.iter().map(String::as_str).collect();
        for p in &d.platforms {
            self.key_in(p, &valid, "platform (`<os>-<arch>`)")?;
        }
        for v in d.define.values() {
            self.template(v)?;
        }
        for (os, o) in &d.os {
            self.key_in(os, OS_NAMES, "operating system")?;
            for v in o.define.values() {
                self.template(v)?;
            }
        }
        Ok(())
    }

    fn key_in(&self, key: &Text, valid: &[&str], what: &str) -> Result<(), RecipeError> {
        if valid.contains(&key.get_ref().as_str()) {
            return Ok(());
        }
        let help = match nearest(key.get_ref(), valid.iter().copied()) {
            Some(n) => format!("did you mean `{n}`? valid: {}", valid.join(", ")),
            None => format!("valid: {}", valid.join(", ")),
        };
        Err(self.err(
            key.span(),
            format!("unknown {what} `{}`", key.get_ref()),
            "unknown",
            Some(help),
        ))
    }

    fn version(&self, v: &Text) -> Result<(), RecipeError> {
        Version::from_str(v.get_ref()).map(|_| ()).map_err(|e| {
            self.err(
                v.span(),
                format!("`{}` is not a version: {e}", v.get_ref()),
                "not a PEP 440 version",
                Some("write a version such as \"0.9.1\"".into()),
            )
        })
    }

    fn specifier(&self, v: &Text) -> Result<(), RecipeError> {
        VersionSpecifiers::from_str(v.get_ref())
            .map(|_| ())
            .map_err(|e| {
                self.err(
                    v.span(),
                    format!("`{}` is not a version range: {e}", v.get_ref()),
                    "not a PEP 440 specifier",
                    Some("write a range such as \">=2.9,<2.10\"".into()),
                )
            })
    }

    fn overlay_body(&self, o: &Overlay) -> Result<(), RecipeError> {
        if let Some(b) = &o.build {
            for t in b
                .define
                .values()
                .chain(b.env.values())
                .chain(b.config_settings.values())
                .chain(b.cmake_source.iter())
                .chain(b.generator.iter())
            {
                self.template(t)?;
            }
            for c in &b.hip_compat {
                self.key_in(c, crate::HIP_COMPAT_NAMES, "HIP compatibility definition")?;
            }
            if let Some(t) = &b.cmake_source {
                self.relative(t, "cmake-source", Below::Checkout, true)?;
            }
        }
        if let Some(i) = &o.install {
            for t in i.artifacts.iter().chain(&i.finds).chain(&i.park) {
                self.template(t)?;
            }
        }
        if let Some(v) = &o.verify {
            if let Some(t) = &v.python {
                self.template(t)?;
            }
        }
        if let Some(i) = &o.install {
            for t in &i.python_libs {
                self.template(t)?;
                self.relative(t, "python-libs", Below::Site, false)?;
            }
            for t in &i.park {
                self.relative(t, "park", Below::Site, false)?;
            }
        }
        for t in o.source.iter().flat_map(|s| &s.submodules) {
            self.relative(t, "submodules", Below::Checkout, false)?;
        }
        if let Some(p) = &o.python {
            for t in p.env.values().chain(p.dir.iter()) {
                self.template(t)?;
            }
            if let Some(t) = &p.dir {
                self.relative(t, "dir", Below::Checkout, true)?;
            }
            if let Some(e) = &p.extension {
                self.extension(e)?;
            }
        }
        Ok(())
    }

    /// `[source]`: a git repository with its tag, or a PyPI sdist whose releases are pinned by
    /// their sha256.
    fn source_kind(&self, raw: &RawRecipe) -> Result<(), RecipeError> {
        let s = &raw.source;
        let bad = |msg: &str, help: &str| {
            Err(self.err(0..0, msg.to_string(), "", Some(help.to_string())))
        };
        match (&s.git, &s.tag, &s.sdist) {
            (Some(_), Some(_), None) => Ok(()),
            (Some(_), None, None) => bad(
                "`[source] git` needs a `tag` template",
                "add tag = \"v{version}\"",
            ),
            (None, None, Some(_)) => {
                let unpinned: Vec<&str> = raw
                    .releases
                    .iter()
                    .filter(|r| r.sha256.is_none())
                    .map(|r| r.version.get_ref().as_str())
                    .collect();
                match unpinned.first() {
                    None => Ok(()),
                    Some(v) => bad(
                        &format!("release {v} of an sdist source has no `sha256`"),
                        "pin each release's sdist: sha256 = \"<the sha256 the index lists for it>\"",
                    ),
                }
            }
            (None, _, None) => bad(
                "`[source]` names no source",
                "give git = URL with tag = TEMPLATE, or sdist = PYPI-PROJECT",
            ),
            _ => bad(
                "`[source]` names both a git repository and an sdist",
                "keep one of them",
            ),
        }
    }

    /// `[[stock-wheel]]`: known OSes and flavours, specifiers that parse.
    fn stock_wheels(&self, raw: &RawRecipe) -> Result<(), RecipeError> {
        for w in &raw.stock_wheel {
            for o in &w.os {
                self.key_in(o, OS_NAMES, "operating system")?;
            }
            for f in &w.flavors {
                self.key_in(f, &["cpu", "cuda", "rocm"], "torch flavour")?;
            }
            for b in &w.backends {
                self.key_in(b, &["cpu", "cuda", "rocm"], "backend")?;
            }
            self.specifier(&w.versions)?;
            if let Some(c) = &w.cuda {
                self.specifier(c)?;
            }
            for h in &w.hip {
                let ok = h.get_ref().split_once('.').is_some_and(|(a, b)| {
                    !a.is_empty()
                        && !b.is_empty()
                        && (a.to_owned() + b).bytes().all(|c| c.is_ascii_digit())
                });
                if !ok {
                    return Err(self.err(
                        h.span(),
                        format!("`{}` is not a HIP version", h.get_ref()),
                        "MAJOR.MINOR",
                        Some(
                            "write the HIP version as torch.version.hip begins: \"6.4\", \"7.14\""
                                .into(),
                        ),
                    ));
                }
            }
            for a in &w.gpu_archs {
                let t = a.get_ref();
                let ok = t.len() > 3
                    && t.starts_with("gfx")
                    && t[3..]
                        .bytes()
                        .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c));
                if !ok {
                    return Err(self.err(
                        a.span(),
                        format!("`{t}` is not an AMD GPU target"),
                        "a gfx name",
                        Some(
                            "write the targets as the libraries hold them: \"gfx1030\", \"gfx90a\""
                                .into(),
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// `from = "extension"` (in `[python]` or an OS's) needs a `[python.extension]`.
    fn extension_declared(&self, raw: &RawRecipe) -> Result<(), RecipeError> {
        let pythons = || {
            std::iter::once(&raw.python).chain(raw.os.values().filter_map(|o| o.python.as_ref()))
        };
        let named = pythons().any(|p| p.extension.is_some());
        let used = pythons().any(|p| p.from == Some(crate::PythonFrom::Extension));
        if used && !named {
            return Err(self.err(
                0..0,
                "`from = \"extension\"` needs a `[python.extension]` table",
                "",
                Some("say which module rocbuild compiles: module, sources, package (docs/recipes.md)".into()),
            ));
        }
        Ok(())
    }

    /// `[python.extension]`: a dotted module name with a package, sources, templates.
    fn extension(&self, e: &crate::schema::Extension) -> Result<(), RecipeError> {
        let m = e.module.get_ref();
        let ident = |p: &str| {
            !p.is_empty()
                && !p.starts_with(|c: char| c.is_ascii_digit())
                && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        if !m.contains('.') || !m.split('.').all(ident) {
            return Err(self.err(
                e.module.span(),
                format!("`module = \"{m}\"` is not a dotted module name inside a package"),
                "not package.module",
                Some(
                    "name the module as Python imports it, such as module = \"ctranslate2._ext\""
                        .into(),
                ),
            ));
        }
        if e.sources.is_empty() {
            return Err(self.err(
                e.module.span(),
                "`[python.extension]` has no `sources`",
                "no sources",
                Some("list the module's C++ files as globs relative to the checkout, such as sources = [\"python/cpp/*.cc\"]".into()),
            ));
        }
        for t in e
            .sources
            .iter()
            .chain(&e.include)
            .chain(&e.link)
            .chain([&e.package])
        {
            self.template(t)?;
        }
        self.relative(&e.package, "package", Below::Checkout, false)?;
        for t in &e.sources {
            self.relative(t, "sources", Below::Checkout, false)?;
        }
        Ok(())
    }

    /// Check every placeholder in `t` against the known variables.
    fn template(&self, t: &Text) -> Result<(), RecipeError> {
        let value = t.get_ref();
        let base = self.content_start(t);
        let at = |r: Range<usize>| match base {
            Some(b) => b + r.start..b + r.end,
            None => t.span(),
        };
        let found = template::placeholders(value)
            .map_err(|e| self.err(at(e.offset..e.offset + 1), e.message.clone(), "here", None))?;
        for p in found {
            if template::is_known(&p.name) {
                continue;
            }
            let names = template::VARIABLES.iter().map(|(n, _)| *n);
            let help = match nearest(&p.name, names) {
                Some(n) => {
                    format!("did you mean `{{{n}}}`? see `rocbuild recipes --variables` for all")
                }
                None => "see `rocbuild recipes --variables` for the placeholders a recipe may use"
                    .to_string(),
            };
            return Err(self.err(
                at(p.range.clone()),
                format!("unknown template variable `{{{}}}`", p.name),
                "unknown variable",
                Some(help),
            ));
        }
        Ok(())
    }

    /// Byte offset in the file where the string's content starts, when the raw text between
    /// the quotes is exactly the value (no escapes), so offsets inside the value are exact.
    fn content_start(&self, t: &Text) -> Option<usize> {
        let raw = self.text.get(t.span())?;
        for q in ["'''", "\"\"\"", "'", "\""] {
            if let Some(inner) = raw.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
                // A multi-line string drops one newline right after the opening quotes.
                let (skip, inner) = match inner.strip_prefix('\n') {
                    Some(rest) if q.len() == 3 => (1, rest),
                    _ => (0, inner),
                };
                return (inner == t.get_ref()).then_some(t.span().start + q.len() + skip);
            }
        }
        None
    }
}
