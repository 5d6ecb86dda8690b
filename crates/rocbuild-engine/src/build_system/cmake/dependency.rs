//! `[dependency.NAME]`: a library built from source into rocbuild's cache and linked
//! statically, as upstream's wheels link it (CTranslate2's oneDNN on Linux x86-64). It is
//! built once per configuration (its commit, its defines, the compilers, cmake and the
//! generator name its directory) and shared by every venv; it stands for the optional
//! `[[needs.library]]` of the same name, so `[with.NAME]` applies and `{lib.NAME.include}` /
//! `{lib.NAME.dir}` point into its install prefix.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rocbuild_probe::{Machine, Os};
use rocbuild_recipe::schema::Dependency;
use rocbuild_recipe::SubmoduleSel;
use serde::Serialize;

use crate::command::Command;
use crate::context::Context;
use crate::cross::CrossPlan;
use crate::error::Result;
use crate::libraries::OptionalLibrary;
use crate::paths::{hash_hex, join, sanitize};
use crate::source::plan::SourcePlan;
use crate::toolchain::tools::Toolset;
use crate::vars::expand;

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
    /// What the key is a hash of, one line each (the stamp holds it): a library found in the
    /// venv stands there by its contents (`<iomp5 sha256:…>/dir`), not its path.
    #[serde(skip)]
    pub keyed: Vec<String>,
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

    /// What the stamp holds once the build is installed: the key and what it hashes (not the
    /// configure line, which names this venv's paths: another venv with the same inputs finds
    /// it built).
    pub fn stamp_text(&self) -> String {
        format!("{}\n{}\n", self.key, self.keyed.join("\n"))
    }

    /// Built by an earlier run (of any venv) with these very inputs.
    pub fn is_built(&self) -> bool {
        fs_err::read_to_string(self.stamp()).ok().as_deref() == Some(self.stamp_text().as_str())
    }
}

/// The commands that build each dependency the recipe has for this target, with the package
/// build's compilers, cmake and ninja. `vars` expands templates in their defines.
/// A Windows venv built from another OS: the dependency gets the package's cross toolchain.
/// On a Windows host, what the package's build gets of MSVC, the dependency gets too: its
/// environment (a Visual Studio found without a developer prompt has it nowhere else), the
/// resource compiler and linker, and embedded debug information (`/Z7`: CMake's default
/// `/Zi` needs mspdbsrv, and oneDNN's try-compile failed with C1902 under Wine without it).
pub fn plan(
    deps: &[(&str, &Dependency)],
    toolset: &Toolset,
    vars: &BTreeMap<String, String>,
    ctx: &Context,
    machine: &Machine,
    cross: Option<&CrossPlan>,
) -> Result<Vec<DependencyPlan>> {
    deps.iter()
        .map(|(name, d)| one(name, d, (toolset, vars, ctx), machine, cross))
        .collect()
}

fn one(
    name: &str,
    d: &Dependency,
    (toolset, vars, ctx): (&Toolset, &BTreeMap<String, String>, &Context),
    machine: &Machine,
    cross: Option<&CrossPlan>,
) -> Result<DependencyPlan> {
    let os = machine.target.platform.os;
    let url = expand(d.git.get_ref(), vars)?;
    let tag = expand(d.tag.get_ref(), vars)?;
    let commit = d.commit.get_ref().to_ascii_lowercase();
    let mut define = recipe_defines(d, vars, os)?;
    let by_content = recipe_defines(d, &key_vars(vars), os)?;
    // Linked into the package's shared library: static, position-independent, in `lib/`.
    for (k, v) in [
        ("BUILD_SHARED_LIBS", "OFF"),
        ("CMAKE_POSITION_INDEPENDENT_CODE", "ON"),
        ("CMAKE_INSTALL_LIBDIR", "lib"),
    ] {
        define.entry(k.into()).or_insert(v.into());
    }
    let mut env = BTreeMap::new();
    match cross {
        // The toolchain file names the compilers; the target and sysroot flags go in front.
        Some(c) => super::cross::defines(c, machine, &mut define),
        None => {
            define.insert("CMAKE_C_COMPILER".into(), toolset.cc.display().to_string());
            define.insert(
                "CMAKE_CXX_COMPILER".into(),
                toolset.cxx.display().to_string(),
            );
            super::msvc_defines(machine, &mut define, &mut env);
        }
    }
    define.insert(
        "CMAKE_MAKE_PROGRAM".into(),
        toolset.ninja.display().to_string(),
    );
    let mut keyed = vec![
        url.clone(),
        commit.clone(),
        toolset.cmake.display().to_string(),
    ];
    keyed.extend(define.iter().map(|(k, v)| {
        let v = by_content.get(k).unwrap_or(v);
        format!("{k}={v}")
    }));
    let key = {
        let refs: Vec<&str> = keyed.iter().map(String::as_str).collect();
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
    if os.rules().path_separator() != '/' {
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
    let with_env = |mut c: Command| {
        c.env.extend(env.clone());
        c
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
        keyed,
        build_dir,
        prefix,
        configure: with_env(configure),
        build: with_env(build),
        install: with_env(install),
    })
}

/// The recipe's defines of the dependency, its `[dependency.NAME.os.OS]` ones over them,
/// expanded with `vars`.
fn recipe_defines(
    d: &Dependency,
    vars: &BTreeMap<String, String>,
    os: Os,
) -> Result<BTreeMap<String, String>> {
    let mut define = BTreeMap::new();
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
    Ok(define)
}

/// `vars` with each found library's directories (`lib.NAME.dir`, `.include`, `.bin`) standing
/// for the library's contents where the probe read them (`lib.NAME.digest`): a dependency
/// built against the venv's `libiomp5md.lib` is keyed by that file, not by the venv's path,
/// so one machine builds it once for all its venvs.
fn key_vars(vars: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut out = vars.clone();
    for (name, v) in out.iter_mut() {
        let Some((lib, field)) = name
            .strip_prefix("lib.")
            .and_then(|rest| rest.rsplit_once('.'))
        else {
            continue;
        };
        if let ("dir" | "include" | "bin", Some(digest)) =
            (field, vars.get(&format!("lib.{lib}.digest")))
        {
            *v = format!("<{lib} sha256:{digest}>/{field}");
        }
    }
    out
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
    use rocbuild_testkit::machine::cpu_machine;

    fn toolset(cxx: &str) -> Toolset {
        Toolset {
            cmake: "/usr/bin/cmake".into(),
            ninja: "/usr/bin/ninja".into(),
            cc: "/usr/bin/cc".into(),
            cxx: cxx.into(),
            pkg_config: None,
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
        let m = cpu_machine(Os::Linux);
        let p = |cxx: &str| plan(&deps, &toolset(cxx), &vars, &c, &m, None).unwrap();
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
            &m,
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

    /// Windows: oneDNN is built against the venv's `libiomp5md.lib`. Two venvs with the same
    /// file share one build (each configure still names its own venv's file); another file is
    /// another build. Keyed by the path, every new venv rebuilt it (about 10 minutes).
    #[test]
    fn a_library_from_the_venv_keys_the_dependency_by_its_contents_not_its_path() {
        let r = recipe("ctranslate2");
        let deps = r.dependencies("windows", "x86_64", "cpu", &[]);
        assert!(!deps.is_empty(), "the recipe builds oneDNN on Windows");
        let cache = tempfile::tempdir().unwrap();
        let mut c = ctx(Os::Windows);
        c.cache = cache.path().to_path_buf();
        let vars_of = |venv: &str, digest: &str| {
            let mut v = BTreeMap::new();
            v.insert(
                "lib.iomp5.dir".to_string(),
                format!("C:/{venv}/Library/lib"),
            );
            v.insert("lib.iomp5.digest".to_string(), digest.to_string());
            v
        };
        let m = cpu_machine(Os::Windows);
        let p = |vars: &BTreeMap<String, String>| {
            plan(&deps, &toolset("clang-cl"), vars, &c, &m, None).unwrap()
        };
        let (a, b, other) = (
            p(&vars_of("venv-a", "11aa")),
            p(&vars_of("venv-b", "11aa")),
            p(&vars_of("venv-a", "22bb")),
        );
        assert_eq!(a[0].key, b[0].key);
        assert_eq!(a[0].prefix, b[0].prefix);
        assert_ne!(a[0].key, other[0].key);
        assert!(b[0]
            .configure
            .shell_line()
            .contains("C:/venv-b/Library/lib/libiomp5md.lib"));
        assert!(!a[0].configure.shell_line().contains("venv-b"));
        fs_err::create_dir_all(&a[0].prefix).unwrap();
        fs_err::write(a[0].stamp(), a[0].stamp_text()).unwrap();
        assert!(
            b[0].is_built(),
            "the second venv finds the first one's build"
        );
        assert!(!other[0].is_built());
        // Without a digest (a file the probe could not read) the path keys it, as before.
        let mut no_digest = vars_of("venv-a", "");
        no_digest.remove("lib.iomp5.digest");
        let mut no_digest_b = no_digest.clone();
        no_digest_b.insert("lib.iomp5.dir".into(), "C:/venv-b/Library/lib".into());
        assert_ne!(p(&no_digest)[0].key, p(&no_digest_b)[0].key);
    }

    /// On a Windows host with MSVC (found without a developer prompt, its environment is
    /// rocbuild's alone), oneDNN's configure, build and install get that environment, and its
    /// objects embed their debug information (/Z7), as the package's own build does: CMake's
    /// default /Zi stopped oneDNN's try-compile with C1902 under Wine, where mspdbsrv cannot
    /// run. Elsewhere nothing of MSVC is added.
    #[test]
    fn a_dependency_gets_the_packages_msvc_environment_and_embedded_debug_information() {
        let r = recipe("ctranslate2");
        let deps = r.dependencies("windows", "x86_64", "cpu", &[]);
        let mut c = ctx(Os::Windows);
        let cache = tempfile::tempdir().unwrap();
        c.cache = cache.path().to_path_buf();
        let mut m = cpu_machine(Os::Windows);
        let mut env = BTreeMap::new();
        env.insert("INCLUDE".to_string(), r"C:\VS\VC\include".to_string());
        env.insert("LIB".to_string(), r"C:\VS\VC\lib\x64".to_string());
        m.host.tools.msvc = Some(rocbuild_probe::Msvc {
            cl: PathBuf::from(r"C:\VS\VC\bin\cl.exe"),
            rc: Some(PathBuf::from(r"C:\SDK\bin\rc.exe")),
            env,
            found_by: "vswhere".into(),
            linker: None,
        });
        let mut vars = BTreeMap::new();
        vars.insert(
            "lib.iomp5.dir".to_string(),
            "C:/venv/Library/lib".to_string(),
        );
        let d = plan(&deps, &toolset("cl.exe"), &vars, &c, &m, None).unwrap();
        let line = d[0].configure.shell_line();
        assert!(
            line.contains("-DCMAKE_MSVC_DEBUG_INFORMATION_FORMAT=Embedded"),
            "{line}"
        );
        assert!(
            line.contains("-DCMAKE_POLICY_DEFAULT_CMP0141=NEW"),
            "{line}"
        );
        assert!(
            line.contains("-DCMAKE_RC_COMPILER=C:/SDK/bin/rc.exe"),
            "{line}"
        );
        for cmd in [&d[0].configure, &d[0].build, &d[0].install] {
            assert_eq!(
                cmd.env.get("INCLUDE").map(String::as_str),
                Some(r"C:\VS\VC\include")
            );
        }
        m.host.tools.msvc = None;
        let plain = plan(&deps, &toolset("clang-cl"), &vars, &c, &m, None).unwrap();
        assert!(!plain[0]
            .configure
            .shell_line()
            .contains("CMAKE_MSVC_DEBUG_INFORMATION_FORMAT"));
        assert!(!plain[0].configure.env.contains_key("INCLUDE"));
    }
}
