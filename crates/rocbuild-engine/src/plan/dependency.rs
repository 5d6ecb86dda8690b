//! `[dependency.NAME]`: a library built from source into rocbuild's cache and linked
//! statically, as upstream's wheels link it (CTranslate2's oneDNN on Linux x86-64). It is
//! built once per configuration (its commit, its defines, the compilers, cmake and the
//! generator name its directory) and shared by every venv; it stands for the optional
//! `[[needs.library]]` of the same name, so `[with.NAME]` applies and `{lib.NAME.include}` /
//! `{lib.NAME.dir}` point into its install prefix.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rocbuild_probe::Os;
use rocbuild_recipe::schema::Dependency;
use rocbuild_recipe::SubmoduleSel;
use serde::Serialize;

use super::libraries::OptionalLibrary;
use super::source::SourcePlan;
use super::tools::Toolset;
use super::vars::expand;
use super::Context;
use crate::command::Command;
use crate::error::Result;
use crate::paths::{hash_hex, join, sanitize};

/// One dependency to build (or found built) before the package's configure.
#[derive(Debug, Clone, Serialize)]
pub struct DependencyPlan {
    pub name: String,
    pub describe: String,
    /// Its tag, for messages (`v3.1.1`).
    pub tag: String,
    pub source: SourcePlan,
    /// Hash of everything that decides what is built: names its directory.
    pub key: String,
    pub build_dir: PathBuf,
    /// Where it is installed: `{lib.NAME.include}` is `include/` here, `{lib.NAME.dir}` `lib/`.
    pub prefix: PathBuf,
    pub configure: Command,
    pub build: Command,
    pub install: Command,
}

impl DependencyPlan {
    pub fn include_dir(&self, os: Os) -> PathBuf {
        join(os, &self.prefix, &["include"])
    }

    pub fn lib_dir(&self, os: Os) -> PathBuf {
        join(os, &self.prefix, &["lib"])
    }

    /// The file whose contents say the prefix holds this very build (written last).
    pub fn stamp(&self) -> PathBuf {
        self.prefix.join(".rocbuild-built")
    }

    /// What the stamp holds once the build is installed.
    pub fn stamp_text(&self) -> String {
        format!("{}\n{}\n", self.key, self.configure.shell_line())
    }

    /// Built by an earlier run (of any venv) with these very inputs.
    pub fn is_built(&self) -> bool {
        fs_err::read_to_string(self.stamp()).ok().as_deref() == Some(self.stamp_text().as_str())
    }
}

/// The commands that build each dependency the recipe has for this target, with the package
/// build's compilers, cmake and ninja. `vars` expands templates in their defines.
/// A Windows venv built from another OS: the dependency gets the package's cross toolchain.
pub type Cross<'a> = Option<(&'a super::cross::CrossPlan, &'a rocbuild_probe::Machine)>;

pub fn plan(
    deps: &[(&str, &Dependency)],
    toolset: &Toolset,
    vars: &BTreeMap<String, String>,
    ctx: &Context,
    os: Os,
    cross: Cross,
) -> Result<Vec<DependencyPlan>> {
    deps.iter()
        .map(|(name, d)| one(name, d, toolset, vars, ctx, os, cross))
        .collect()
}

fn one(
    name: &str,
    d: &Dependency,
    toolset: &Toolset,
    vars: &BTreeMap<String, String>,
    ctx: &Context,
    os: Os,
    cross: Cross,
) -> Result<DependencyPlan> {
    let url = expand(d.git.get_ref(), vars)?;
    let tag = expand(d.tag.get_ref(), vars)?;
    let commit = d.commit.get_ref().to_ascii_lowercase();
    let mut define: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in &d.define {
        define.insert(k.clone(), expand(v.get_ref(), vars)?);
    }
    for (k, v) in
        d.os.iter()
            .filter(|(o, _)| o.get_ref() == os.as_str())
            .flat_map(|(_, o)| &o.define)
    {
        define.insert(k.clone(), expand(v.get_ref(), vars)?);
    }
    // Linked into the package's shared library: static, position-independent, in `lib/`.
    for (k, v) in [
        ("BUILD_SHARED_LIBS", "OFF"),
        ("CMAKE_POSITION_INDEPENDENT_CODE", "ON"),
        ("CMAKE_INSTALL_LIBDIR", "lib"),
    ] {
        define.entry(k.into()).or_insert(v.into());
    }
    match cross {
        // The toolchain file names the compilers; the target and sysroot flags go in front.
        Some((c, machine)) => super::cross::defines(c, machine, &mut define),
        None => {
            define.insert("CMAKE_C_COMPILER".into(), toolset.cc.display().to_string());
            define.insert(
                "CMAKE_CXX_COMPILER".into(),
                toolset.cxx.display().to_string(),
            );
        }
    }
    define.insert(
        "CMAKE_MAKE_PROGRAM".into(),
        toolset.ninja.display().to_string(),
    );
    let key = {
        let mut parts = vec![
            url.clone(),
            commit.clone(),
            toolset.cmake.display().to_string(),
        ];
        parts.extend(define.iter().map(|(k, v)| format!("{k}={v}")));
        let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
        hash_hex(&refs)
    };
    let dir = join(
        ctx.host_os,
        &ctx.cache,
        &[
            "deps",
            &format!("{}-{}-{}", sanitize(name), sanitize(&tag), &key[..12]),
        ],
    );
    let build_dir = join(ctx.host_os, &dir, &["build"]);
    let prefix = join(ctx.host_os, &dir, &["prefix"]);
    define.insert("CMAKE_INSTALL_PREFIX".into(), prefix.display().to_string());
    if os == Os::Windows {
        for v in define.values_mut() {
            *v = v.replace('\\', "/");
        }
    }
    let checkout = join(
        ctx.host_os,
        &ctx.cache,
        &["src", &format!("dep-{}-{}", sanitize(name), &commit[..12])],
    );
    let source = SourcePlan::Git {
        url,
        reference: format!("refs/tags/{tag}"),
        expected_commit: Some(commit),
        submodules: SubmoduleSel::None,
        mirror: ctx.mirror.clone(),
        git_cache: join(ctx.host_os, &ctx.cache, &["git"]),
        checkout: checkout.clone(),
        patches: Vec::new(),
        shipped: Vec::new(),
    };
    let configure = Command::new(&toolset.cmake)
        .args([
            "-S".to_string(),
            checkout.display().to_string(),
            "-B".into(),
            build_dir.display().to_string(),
            "-G".into(),
            "Ninja".into(),
        ])
        .args(define.iter().map(|(k, v)| format!("-D{k}={v}")));
    let build = Command::new(&toolset.cmake).args([
        "--build".to_string(),
        build_dir.display().to_string(),
        "--parallel".into(),
        ctx.jobs.max(1).to_string(),
    ]);
    let install = Command::new(&toolset.cmake).args([
        "--install".to_string(),
        build_dir.display().to_string(),
        "--prefix".into(),
        prefix.display().to_string(),
    ]);
    Ok(DependencyPlan {
        name: name.to_string(),
        describe: d.describe.clone(),
        tag,
        source,
        key,
        build_dir,
        prefix,
        configure,
        build,
        install,
    })
}

/// The libraries the dependencies stand for: each one's entry in `libraries` (found on the
/// machine, or listed as missing) becomes the dependency's prefix, used, and the template
/// variables `{lib.NAME.include}` / `{lib.NAME.dir}` point there.
/// `os` is the host's: the prefixes are paths on this disk (a Windows venv built here too).
pub fn provide(
    deps: &[DependencyPlan],
    os: Os,
    libraries: &mut Vec<OptionalLibrary>,
    vars: &mut BTreeMap<String, String>,
) {
    for d in deps {
        let (include, lib) = (d.include_dir(os), d.lib_dir(os));
        let instead = libraries
            .iter()
            .position(|l| l.name == d.name)
            .map(|i| libraries.remove(i))
            .filter(|l| !l.root.as_os_str().is_empty());
        let why = match instead {
            Some(l) => format!(
                "{}; instead of the one found at {}",
                d.describe,
                l.root.display()
            ),
            None => d.describe.clone(),
        };
        libraries.push(OptionalLibrary {
            name: d.name.clone(),
            root: d.prefix.clone(),
            used: true,
            why,
            include_dir: Some(include.clone()),
            lib_dir: Some(lib.clone()),
        });
        vars.insert(
            format!("lib.{}.include", d.name),
            include.display().to_string(),
        );
        vars.insert(format!("lib.{}.dir", d.name), lib.display().to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testing::{ctx, recipe};

    fn toolset(cxx: &str) -> Toolset {
        Toolset {
            cmake: "/usr/bin/cmake".into(),
            ninja: "/usr/bin/ninja".into(),
            cc: "/usr/bin/cc".into(),
            cxx: cxx.into(),
        }
    }

    /// One build per configuration: the same inputs name the same directory (so every venv
    /// shares it, and a stamp written by an earlier run says it is built); another compiler
    /// or another define is another build. The stamp must hold this very configure.
    #[test]
    fn a_dependency_is_keyed_by_what_decides_its_build_and_found_built_by_its_stamp() {
        let r = recipe("ctranslate2");
        let deps = r.dependencies("linux", "x86_64", "cpu", &[]);
        let cache = tempfile::tempdir().unwrap();
        let mut c = ctx(Os::Linux);
        c.cache = cache.path().to_path_buf();
        let vars = BTreeMap::new();
        let p = |cxx: &str| plan(&deps, &toolset(cxx), &vars, &c, Os::Linux, None).unwrap();
        let (a, b, other) = (
            p("/usr/bin/g++-14"),
            p("/usr/bin/g++-14"),
            p("/usr/bin/c++"),
        );
        assert_eq!(a[0].prefix, b[0].prefix);
        assert_ne!(a[0].prefix, other[0].prefix);
        let mut changed = deps[0].1.clone();
        let mut seq = changed.define["ONEDNN_BUILD_TESTS"].clone();
        *seq.get_mut() = "SEQ".into();
        changed.define.insert("ONEDNN_CPU_RUNTIME".into(), seq);
        let changed = plan(
            &[("dnnl", &changed)],
            &toolset("/usr/bin/g++-14"),
            &vars,
            &c,
            Os::Linux,
            None,
        )
        .unwrap();
        assert_ne!(a[0].key, changed[0].key);

        assert!(!a[0].is_built());
        fs_err::create_dir_all(&a[0].prefix).unwrap();
        fs_err::write(a[0].stamp(), "another configure\n").unwrap();
        assert!(!a[0].is_built(), "a stamp of another configure");
        fs_err::write(a[0].stamp(), a[0].stamp_text()).unwrap();
        assert!(b[0].is_built() && !other[0].is_built());
    }
}
