//! `--dry-run`: the whole plan as text, every command line, env var and path.

use std::fmt;

use rocbuild_recipe::SubmoduleSel;

use crate::link::{preload_paths, Link};
use crate::plan::Plan;
use crate::source::plan::SourcePlan;

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_header(f)?;
        self.fmt_backend(f)?;
        self.fmt_found(f)?;
        self.fmt_index(f)?;
        if let Some(p) = &self.prebuilt {
            writeln!(f, "1. install the wheel {} instead of building", p.file)?;
            writeln!(f, "      from: {}", p.url)?;
            writeln!(f, "      sha256: {}", p.sha256)?;
            writeln!(f, "      unpacked: {}", p.unpacked.display())?;
            return self.fmt_requirements(f, &mut Steps(1));
        }
        let mut s = Steps(0);
        self.fmt_preparation(f, &mut s)?;
        self.fmt_build(f, &mut s)?;
        self.fmt_requirements(f, &mut s)?;
        self.fmt_install(f, &mut s)?;
        if let Some(v) = &self.verify {
            s.step(f, "verify in a fresh interpreter; roll back on failure")?;
            write!(f, "{v}")?;
        }
        writeln!(f, "log: {}", self.log_dir.display())
    }
}

/// The numbered steps of a plan.
struct Steps(usize);

impl Steps {
    fn step(&mut self, f: &mut fmt::Formatter<'_>, title: &str) -> fmt::Result {
        self.0 += 1;
        writeln!(f, "{}. {title}", self.0)
    }
}

impl Plan {
    /// What the plan is for: recipe, venv, Python, torch, FFmpeg.
    fn fmt_header(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "plan: {} {} ({})",
            self.recipe, self.version, self.version_reason
        )?;
        if let Some(n) = &self.upstream {
            writeln!(f, "  upstream: {}", n.line())?;
        }
        writeln!(
            f,
            "  recipe: {} (sha256 {})",
            self.recipe_file,
            &self.recipe_hash[..16.min(self.recipe_hash.len())]
        )?;
        writeln!(
            f,
            "  venv:   {} (chosen by {})",
            self.venv.display(),
            self.venv_chosen_by
        )?;
        writeln!(f, "  python: {}", self.python.display())?;
        if let Some(t) = &self.torch_version {
            writeln!(
                f,
                "  torch:  {t} ({}, git {})",
                self.flavor.as_str(),
                self.torch_git.as_deref().unwrap_or("unknown")
            )?;
        }
        if let Some(m) = self.ffmpeg_major {
            writeln!(f, "  ffmpeg: {m}")?;
        }
        if let Some(s) = &self.stock {
            match (&s.pip, self.options.no_binary) {
                (Some(pip), false) => writeln!(
                    f,
                    "  stock wheel: works here, no build needed: `{pip}` ({}); a run builds only with --no-binary",
                    s.why
                )?,
                (Some(_), true) => writeln!(f, "  stock wheel: would work ({}); built anyway (--no-binary)", s.why)?,
                (None, _) => writeln!(f, "  stock wheel: a build is needed: {}", s.why)?,
            }
        }
        Ok(())
    }

    /// The backend chosen, and the ROCm SDK or torch GPU targets behind it.
    fn fmt_backend(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.backend;
        writeln!(f, "  backend: {} ({})", b.backend, b.reason)?;
        if let Some(r) = &b.rocm {
            writeln!(
                f,
                "  rocm:   {} {} ({})",
                r.root.display(),
                r.version.as_deref().unwrap_or("(version unknown)"),
                r.kind
            )?;
            writeln!(
                f,
                "  archs:  {} (from {})",
                r.archs.join(";"),
                r.archs_found_by
            )?;
            writeln!(f, "  ROCm SDKs found (* = used):")?;
            for c in &r.candidates {
                writeln!(f, "    {c}")?;
            }
            for n in &r.notes {
                writeln!(f, "  note:   {n}")?;
            }
            for w in &r.warnings {
                writeln!(f, "  warning: {w}")?;
            }
        }
        if let Some(t) = &b.torch_gpu {
            writeln!(
                f,
                "  gpu:    {} (from {}; torch's ROCm: HIP {})",
                if t.archs.is_empty() {
                    "none named".to_string()
                } else {
                    t.archs.join(";")
                },
                if t.archs_found_by.is_empty() {
                    "nothing"
                } else {
                    &t.archs_found_by
                },
                t.hip
            )?;
            for n in &t.notes {
                writeln!(f, "  note:   {n}")?;
            }
            for w in &t.warnings {
                writeln!(f, "  warning: {w}")?;
            }
        }
        Ok(())
    }

    /// The system libraries, compiler and CUDA toolkit found.
    fn fmt_found(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.backend;
        for l in &self.libraries {
            if l.root.as_os_str().is_empty() {
                writeln!(f, "  {:<8}not found: {}", format!("{}:", l.name), l.why)?;
                continue;
            }
            writeln!(
                f,
                "  {:<8}{} ({}{})",
                format!("{}:", l.name),
                l.root.display(),
                if l.used { "used: " } else { "" },
                l.why
            )?;
        }
        if let Some(c) = &self.compiler_found {
            writeln!(f, "  compiler: {}", c.line())?;
        }
        if let Some(c) = &self.compiler {
            writeln!(f, "  compiler: {}", c.line())?;
        }
        if let Some(c) = &b.cuda {
            writeln!(
                f,
                "  cuda:   {} (archs {}, from {})",
                c.home.display(),
                c.archs.join(";"),
                c.archs_from
            )?;
            for n in &c.notes {
                writeln!(f, "          {n}")?;
            }
        }
        Ok(())
    }

    /// The package index looked at, and each wheel's verdict.
    fn fmt_index(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(ix) = &self.index {
            writeln!(f, "  index:  {}", ix.sources.join(", "))?;
            writeln!(f, "    wanted: {}", ix.wanted)?;
            if ix.candidates.is_empty() {
                writeln!(f, "    no wheels of {} listed", self.install.distribution)?;
            }
            for c in &ix.candidates {
                let chosen = self
                    .prebuilt
                    .as_ref()
                    .is_some_and(|p| p.url == c.listed.url);
                match (&c.rejected, chosen) {
                    (_, true) => writeln!(f, "    chosen:   {}", c.listed.file)?,
                    (Some(r), _) => writeln!(f, "    rejected: {}: {r}", c.listed.file)?,
                    (None, _) => writeln!(
                        f,
                        "    fits:     {} (torch build and ABI checked after download)",
                        c.listed.file
                    )?,
                }
            }
        }
        Ok(())
    }

    /// The steps before the build: tools, source, compiler cache, dependencies, HIP
    /// compatibility header, torch's CMake package.
    fn fmt_preparation(&self, f: &mut fmt::Formatter<'_>, s: &mut Steps) -> fmt::Result {
        if let Some(t) = &self.tools {
            s.step(
                f,
                "install build-only Python requirements and tools (not into the venv)",
            )?;
            for w in &t.why {
                writeln!(f, "      {w}")?;
            }
            write!(f, "{}", t.install)?;
        }
        match &self.source {
            SourcePlan::Git { .. } => {
                s.step(f, "fetch the source (git)")?;
                git_lines(f, &self.source)?;
            }
            SourcePlan::Local { dir } => {
                s.step(f, "use the source directory as it is")?;
                writeln!(f, "      dir: {}", dir.display())?;
            }
            SourcePlan::Sdist {
                project,
                version,
                sha256,
                index,
                offline,
                unpacked,
                ..
            } => {
                s.step(f, "fetch the source (the release's sdist)")?;
                let index = rocbuild_secret::strip_userinfo(index);
                writeln!(f, "      sdist: {project} {version} from {index}")?;
                writeln!(f, "      sha256: {sha256}")?;
                for d in offline {
                    writeln!(f, "      offline, first: {}", d.display())?;
                }
                writeln!(f, "      unpacked: {}", unpacked.display())?;
            }
        }
        if let Some(c) = &self.compiler_cache {
            s.step(
                f,
                &format!(
                    "compile through {} ({}), for {}",
                    c.kind.as_str(),
                    c.backend,
                    c.languages.join(", ")
                ),
            )?;
            if let Some(i) = &c.install {
                writeln!(f, "      from PyPI into the tools area:")?;
                write!(f, "{i}")?;
            }
            for (k, v) in &c.env {
                writeln!(f, "      {k}={v}")?;
            }
        }
        for d in &self.dependencies {
            s.step(
                f,
                &format!(
                    "build the dependency {} ({}) from source, once, into the cache",
                    d.name, d.tag
                ),
            )?;
            writeln!(f, "      {}", d.describe)?;
            if d.is_built() {
                writeln!(
                    f,
                    "      built before: {} (nothing to do)",
                    d.prefix.display()
                )?;
                continue;
            }
            git_lines(f, &d.source)?;
            writeln!(f, "      build tree: {}", d.build_dir.display())?;
            writeln!(f, "      prefix: {}", d.prefix.display())?;
            for c in [&d.configure, &d.build, &d.install] {
                write!(f, "{c}")?;
            }
        }
        if let Some(hc) = &self.hip_compat {
            s.step(
                f,
                &format!(
                    "write rocbuild's HIP compatibility header {} (force-included into HIP sources)",
                    hc.path.display()
                ),
            )?;
            for r in &hc.reasons {
                writeln!(f, "      {r}")?;
            }
        }
        if let Some(tc) = &self.torch_cmake {
            match &tc.contents {
                Some(text) => {
                    s.step(
                        f,
                        &format!(
                            "write the lite torch CMake package {}",
                            tc.dir.join("TorchConfig.cmake").display()
                        ),
                    )?;
                    for line in text.lines() {
                        writeln!(f, "      | {line}")?;
                    }
                }
                None => {
                    s.step(f, "use torch's own CMake package")?;
                    writeln!(f, "      Torch_DIR: {}", tc.dir.display())?;
                }
            }
        }
        Ok(())
    }

    /// Configure, build, install into the staging prefix, the Python part.
    fn fmt_build(&self, f: &mut fmt::Formatter<'_>, s: &mut Steps) -> fmt::Result {
        let titles = self.system().titles();
        s.step(f, titles.configure)?;
        write!(f, "{}", self.configure)?;
        s.step(f, titles.build)?;
        write!(f, "{}", self.build)?;
        if let Some(c) = &self.install_prefix {
            s.step(f, titles.install)?;
            write!(f, "{c}")?;
        }
        if let Some(p) = &self.python_part {
            if let Some(b) = &p.build {
                s.step(
                    f,
                    &format!("build the {} wheel from the checkout", p.distribution),
                )?;
                write!(f, "{b}")?;
            }
            if let Some(x) = &p.extension {
                s.step(
                    f,
                    &format!(
                        "compile {} with rocbuild's CMake project ({}), make the {} wheel ({}-{}-{})",
                        x.module,
                        x.project_dir.display(),
                        p.distribution,
                        x.tags.python,
                        x.tags.abi,
                        x.tags.platform
                    ),
                )?;
                write!(f, "{}{}{}", x.configure, x.build, x.install)?;
            }
            s.step(
                f,
                &format!(
                    "python part: {}=={} replacing {}",
                    p.distribution,
                    p.version,
                    p.replaces.as_deref().unwrap_or("nothing")
                ),
            )?;
            write!(f, "{}", p.install)?;
        }
        Ok(())
    }

    /// The run-time requirements the venv lacks, installed with the package, the venv pinned.
    fn fmt_requirements(&self, f: &mut fmt::Formatter<'_>, s: &mut Steps) -> fmt::Result {
        let Some(r) = &self.requirements else {
            return Ok(());
        };
        s.step(
            f,
            &format!(
                "install the missing run-time requirements in the same transaction: {}",
                r.missing.join(", ")
            ),
        )?;
        writeln!(
            f,
            "      pinned as installed ({} distributions): {}",
            r.constraints.len(),
            r.constraints_file.display()
        )?;
        writeln!(
            f,
            "      staged from: {}",
            r.prefix.join(&r.site_in_prefix).display()
        )?;
        write!(f, "{}", r.install)
    }

    /// The install into the venv: where, what, how the files find their libraries.
    fn fmt_install(&self, f: &mut fmt::Formatter<'_>, s: &mut Steps) -> fmt::Result {
        let i = &self.install;
        s.step(
            f,
            "install into the venv as a transaction (stage, journal, back up, swap)",
        )?;
        writeln!(f, "      into: {}", i.dest.display())?;
        let from = match i.artifacts_in {
            rocbuild_recipe::schema::ArtifactsIn::Prefix => "",
            rocbuild_recipe::schema::ArtifactsIn::Build => " (from the build tree)",
            rocbuild_recipe::schema::ArtifactsIn::Source => {
                " (from the checkout, where the build writes them)"
            }
        };
        writeln!(f, "      artifacts: {}{from}", i.artifacts.join(", "))?;
        for d in &i.finds {
            writeln!(f, "      must find: {}", d.display())?;
        }
        if !i.python_libs.is_empty() {
            writeln!(f, "      linked like them: {}", i.python_libs.join(", "))?;
        }
        match &i.link {
            Link::Runpath { entries } => writeln!(f, "      RUNPATH: {}", entries.join(":"))?,
            Link::MachO { rpaths, resign } => {
                writeln!(f, "      LC_RPATH added: {}", rpaths.join(", "))?;
                if *resign {
                    writeln!(
                        f,
                        "      then re-signed ad hoc (codesign -s - -f), rpaths read back"
                    )?;
                }
            }
            Link::Preload(p) => {
                let (module, pth) = preload_paths(self.os, &i.site, p);
                writeln!(
                    f,
                    "      DLL preload hook: {} (imports {}), run on `import {}`",
                    pth.display(),
                    module.display(),
                    p.trigger
                )?;
                for d in &p.dirs {
                    writeln!(
                        f,
                        "        add_dll_directory + preload the DLLs needed from: {}",
                        d.display()
                    )?;
                }
            }
        }
        if !i.park.is_empty() {
            writeln!(f, "      park (moved to the backup): {}", i.park.join(", "))?;
        }
        writeln!(
            f,
            "      RECORD of {} updated; manifest {}",
            i.distribution,
            rocbuild_venv::layout::manifest(&i.site, &self.recipe).display()
        )?;
        Ok(())
    }
}

/// `a, b (of its own submodules only x), c`: each named submodule with all of its own,
/// unless the nested ones it needs are named.
/// The lines of a git source: URL, mirror, reference, commit, submodules, where it goes, and
/// the patches applied to it.
fn git_lines(f: &mut fmt::Formatter<'_>, source: &SourcePlan) -> fmt::Result {
    let SourcePlan::Git {
        url,
        reference,
        expected_commit,
        submodules,
        mirror,
        git_cache,
        checkout,
        patches,
        shipped,
    } = source
    else {
        return Ok(());
    };
    writeln!(f, "      url: {url}")?;
    if let Some(m) = mirror {
        writeln!(f, "      mirror: {} (tried first)", m.display())?;
    }
    writeln!(f, "      ref: {reference}")?;
    if let Some(c) = expected_commit {
        writeln!(f, "      expect commit: {c}")?;
    }
    let subs = match submodules {
        SubmoduleSel::None => "no".to_string(),
        SubmoduleSel::All => "yes, recursively".to_string(),
        SubmoduleSel::Only(p) => describe_submodules(p),
    };
    writeln!(f, "      submodules: {subs}")?;
    writeln!(f, "      cache: {}", git_cache.display())?;
    writeln!(f, "      checkout: {}", checkout.display())?;
    for p in shipped {
        writeln!(
            f,
            "      recipe fix: {} (sha256 {}; applied by libgit2): {}",
            p.name,
            &p.sha256[..16],
            p.why
        )?;
    }
    for p in patches {
        writeln!(
            f,
            "      patch: {} (sha256 {}; applied by libgit2)",
            p.path.display(),
            p.sha256.as_deref().unwrap_or("?")
        )?;
    }
    Ok(())
}

fn describe_submodules(paths: &[String]) -> String {
    let nested = |p: &str| -> Vec<&str> {
        let prefix = format!("{}/", p.trim_end_matches('/'));
        paths
            .iter()
            .filter_map(|q| q.strip_prefix(prefix.as_str()))
            .collect()
    };
    let top: Vec<&String> = paths
        .iter()
        .filter(|p| {
            !paths
                .iter()
                .any(|q| p.starts_with(&format!("{}/", q.trim_end_matches('/'))))
        })
        .collect();
    let parts: Vec<String> = top
        .iter()
        .map(|p| match nested(p).as_slice() {
            [] => p.to_string(),
            n => format!("{p} (of its own submodules only {})", n.join(", ")),
        })
        .collect();
    parts.join(", ")
}
