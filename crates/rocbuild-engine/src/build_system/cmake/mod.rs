//! CMake, the default build system: the configure, build and install-prefix commands — CMake
//! defines from the recipe, torch's CMake package, the toolchain and the user (`-D` last), the
//! environment, and a build tree keyed by everything that decides the configure (reused while
//! it is unchanged). What else is CMake's lives beside it: the `[dependency.X]` builds
//! ([`dependency`]) and rocbuild's own project for a Python extension ([`extension`]).

pub mod cross;
pub mod dependency;
pub mod extension;
pub mod run;
pub mod toolchain;
pub mod torch;
mod torch_lite;

use std::collections::BTreeMap;

use rocbuild_probe::{Flavor, Machine};
use rocbuild_recipe::TorchCmake;

use super::{BuildSystem, Inputs, PlannedFiles, Steps, Titles};
use crate::build_system::cmake::torch::native_toolkit;
use crate::command::Command;
use crate::error::{EngineError, Result};
use crate::paths::{hash_hex, join, sanitize};
use crate::vars::expand;

/// The recipe's defines and environment with their templates expanded, and FFmpeg's
/// pkg-config directory when `--ffmpeg` gave one.
#[allow(clippy::type_complexity)]
fn recipe_defines_and_env(
    i: &Inputs,
) -> Result<(BTreeMap<String, String>, BTreeMap<String, String>)> {
    let mut define: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in &i.resolved.define {
        define.insert(k.clone(), expand(v, i.vars)?);
    }
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in &i.resolved.env {
        env.insert(k.clone(), expand(v, i.vars)?);
    }
    // The FFmpeg given is the only one pkg-config may see for a Windows venv built here
    // (LIBDIR replaces the host's own directories); a native build adds it in front.
    let var = if i.cross.is_some() {
        "PKG_CONFIG_LIBDIR"
    } else {
        "PKG_CONFIG_PATH"
    };
    let ffmpeg = i.machine.target.ffmpeg.as_ref();
    let pc_dir = i
        .ffmpeg_pc
        .map(|p| &p.dir)
        .or_else(|| ffmpeg.and_then(|f| f.pkg_config_path.as_ref()));
    if let Some(d) = pc_dir {
        env.insert(var.into(), d.display().to_string());
    }
    Ok((define, env))
}

/// rocbuild's HIP compatibility header, when the ROCm build needs one (written under the
/// host's cache).
fn hip_compat_of(
    backend: &crate::toolchain::BackendPlan,
    resolved: &rocbuild_recipe::Resolved,
    ctx: &crate::context::Context,
) -> Option<crate::toolchain::hip_compat::HipCompatPlan> {
    backend.rocm.as_ref().and_then(|r| {
        crate::toolchain::hip_compat::plan(
            &resolved.hip_compat,
            r.hip_version.as_deref(),
            r.version.as_deref(),
            &ctx.cache,
            ctx.host_os,
        )
    })
}

/// `[build] system = "cmake"`.
pub struct Cmake;

impl BuildSystem for Cmake {
    fn titles(&self) -> Titles {
        Titles {
            configure:
                "configure (skipped when this build tree is configured with the same inputs)",
            build: "build",
            install: "install into the staging prefix",
            configure_step: "configure",
            build_step: "build",
        }
    }

    fn configured_marker(&self) -> Option<&'static str> {
        Some("CMakeCache.txt")
    }

    /// The configure, build and install-prefix commands.
    fn plan(&self, i: &Inputs) -> Result<Steps> {
        if let Some(k) = i.resolved.config_settings.keys().next() {
            // A PEP 517 backend's settings mean nothing to rocbuild's own CMake configure.
            return Err(crate::error::EngineError::Usage {
                option: format!("recipe {}: [build.config-settings] {k}", i.recipe.name()),
                reason: "a CMake build ([build] system = \"cmake\", the default) takes no PEP 517 config settings".into(),
                help: Some(format!("in {}, give it as a CMake define ([build.define]), or build with system = \"pep517\"", i.recipe.file)),
            });
        }
        let os = i.machine.target.platform.os;
        let flavor = i
            .machine
            .target
            .torch
            .as_ref()
            .map_or(Flavor::Cpu, |t| t.flavor);
        let (mut define, mut env) = recipe_defines_and_env(i)?;
        let mut toolkit = None;
        // torch's CMake package and the HIP header force-included through CMake's flags.
        let files = PlannedFiles {
            torch_cmake: torch::plan(i.recipe, i.machine, i.opts, i.resolved, &i.ctx.cache),
            hip_compat: hip_compat_of(i.backend, i.resolved, i.ctx),
        };
        if let Some(tc) = &files.torch_cmake {
            define.insert("Torch_DIR".into(), tc.dir.display().to_string());
            if tc.mode == TorchCmake::Native {
                toolkit = native_toolkit(i.machine, flavor, &mut define, &mut env)?;
            }
        }
        env.extend(i.backend.env());
        toolchain::defines(i.backend, i.ctx.host_os, &mut define);
        if let Some(hc) = &files.hip_compat {
            let flag = crate::toolchain::hip_compat::include_flag(hc);
            let v = compose_user_define(
                "CMAKE_HIP_FLAGS",
                define.get("CMAKE_HIP_FLAGS").map(String::as_str),
                &flag,
            );
            define.insert("CMAKE_HIP_FLAGS".into(), v);
        }
        // The GPU toolkit the build compiles with (a ROCm backend's SDK wins over the root torch's
        // own package was given, as ROCM_PATH does in the environment).
        if let Some(r) = &i.backend.rocm {
            toolkit = Some(r.root.clone());
        } else if let (None, Some(c)) = (&toolkit, &i.backend.cuda) {
            toolkit = Some(c.home.clone());
        }
        define.insert(
            "CMAKE_MAKE_PROGRAM".into(),
            i.toolset.ninja.display().to_string(),
        );
        if let Some(pc) = &i.toolset.pkg_config {
            define.insert("PKG_CONFIG_EXECUTABLE".into(), pc.display().to_string());
        }
        define
            .entry("CMAKE_C_COMPILER".into())
            .or_insert(i.toolset.cc.display().to_string());
        define
            .entry("CMAKE_CXX_COMPILER".into())
            .or_insert(i.toolset.cxx.display().to_string());
        msvc_defines(i.machine, &mut define, &mut env);
        for (k, v) in &i.opts.defines {
            refuse_dropping(k, define.get(k).map(String::as_str), v, i)?;
            let composed = compose_user_define(k, define.get(k).map(String::as_str), v);
            define.insert(k.clone(), composed);
        }
        // Last: the target and sysroot flags go in front of every flags variable set so far.
        if let Some(c) = i.cross {
            cross::defines(c, i.machine, &mut define);
        }
        let src = i.source.dir();
        let cmake_src = match expand(&i.resolved.cmake_source, i.vars)?.as_str() {
            "." | "" => src.to_path_buf(),
            sub => join(os, src, &[sub]),
        };
        let key = {
            let mut parts: Vec<String> = vec![
                cmake_src.display().to_string(),
                i.resolved.generator.clone(),
            ];
            parts.extend(
                define
                    .iter()
                    .filter(|(k, _)| k.as_str() != "CMAKE_INSTALL_PREFIX")
                    .map(|(k, v)| format!("{k}={v}")),
            );
            parts.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
            parts.extend(files.torch_cmake.iter().filter_map(|t| t.contents.clone()));
            let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
            hash_hex(&refs)
        };
        let name = i.recipe.name();
        let build_dir = join(
            i.ctx.host_os,
            &i.ctx.cache,
            &[
                "build",
                &format!("{name}-{}-{}", sanitize(i.version), &key[..12]),
            ],
        );
        let prefix = join(i.ctx.host_os, &build_dir, &["rocbuild-prefix"]);
        define.insert("CMAKE_INSTALL_PREFIX".into(), prefix.display().to_string());
        if os.rules().path_separator() != '/' {
            // CMake reads `\` in a -D value as an escape in some contexts: forward slashes only.
            for v in define.values_mut() {
                *v = v.replace('\\', "/");
            }
        }
        let mut configure = Command::new(&i.toolset.cmake)
            .args([
                "-S".to_string(),
                cmake_src.display().to_string(),
                "-B".into(),
                build_dir.display().to_string(),
                "-G".into(),
                i.resolved.generator.clone(),
            ])
            .args(define.iter().map(|(k, v)| format!("-D{k}={v}")));
        configure.env = env.clone();
        let mut build = Command::new(&i.toolset.cmake).args([
            "--build".to_string(),
            build_dir.display().to_string(),
            "--parallel".into(),
            i.ctx.jobs.max(1).to_string(),
        ]);
        build.env = env;
        let install_prefix = Command::new(&i.toolset.cmake).args([
            "--install".to_string(),
            build_dir.display().to_string(),
            "--prefix".into(),
            prefix.display().to_string(),
        ]);
        Ok(Steps {
            system: rocbuild_recipe::BuildSystem::Cmake,
            defines: define,
            toolkit,
            key,
            build_dir,
            prefix,
            configure,
            build,
            install_prefix: Some(install_prefix),
            unpacked_wheel: None,
            files,
        })
    }
}

/// A user's `-D name=value` that would take away something rocbuild's build needs is refused
/// before anything runs, with the option that does it rocbuild's way: the install prefix
/// (rocbuild installs into its staging prefix, then into the venv as one transaction), the
/// GPU architectures (`--arch`/`--cuda-arch`: recorded and checked in the built code
/// objects), the SDK's compilers and `--rocm-path` (`--rocm`), and what the recipe sets for
/// the chosen backend (`--backend`). The same value as rocbuild's passes.
fn refuse_dropping(name: &str, ours: Option<&str>, user: &str, i: &Inputs) -> Result<()> {
    let refuse = |why: String, fix: String| {
        Err(EngineError::Usage {
            option: format!("-D {name}={user}"),
            reason: why,
            help: Some(fix),
        })
    };
    if name == "CMAKE_INSTALL_PREFIX" {
        return refuse(
            "rocbuild installs the build into its own staging prefix and moves the files into the venv as one transaction; another prefix would put them where rocbuild never looks".into(),
            "drop this -D: the files go where the recipe's [install] says, and `rocbuild bundle` copies them elsewhere".into(),
        );
    }
    let Some(ours) = ours else { return Ok(()) };
    if ours == user {
        return Ok(());
    }
    let backend = i.backend.backend.as_str();
    if let Some(r) = &i.backend.rocm {
        let archs = r.archs.join(";");
        match name {
            "CMAKE_HIP_ARCHITECTURES" => {
                return refuse(
                    format!("the GPU architectures are rocbuild's --arch ({archs}): they are recorded in the manifest and the built code objects are checked against them"),
                    format!("pass --arch {} instead (repeat it, or give a comma-separated list)", user.replace(';', ",")),
                )
            }
            "CMAKE_HIP_COMPILER" | "CMAKE_C_COMPILER" | "CMAKE_CXX_COMPILER" | "CMAKE_HIP_PLATFORM" => {
                return refuse(
                    format!("a ROCm build compiles and links with the chosen SDK's clang ({ours}); another compiler would not find that SDK's device libraries and headers"),
                    "choose another SDK with --rocm DIR or --rocm VERSION; its clang comes with it".into(),
                )
            }
            _ => {}
        }
        if name == "CMAKE_HIP_FLAGS" {
            let want = |f: &str| {
                f.split_whitespace().find_map(|w| {
                    w.strip_prefix("--rocm-path=")
                        .map(|p| p.trim_matches('"').to_string())
                })
            };
            if let (Some(o), Some(u)) = (want(ours), want(user)) {
                if o != u {
                    return refuse(
                        format!("the HIP code is compiled against the SDK at {o} (--rocm-path={o}); --rocm-path={u} would mix two SDKs"),
                        format!("choose that SDK with --rocm {u} instead"),
                    );
                }
            }
        }
    }
    if let Some(c) = &i.backend.cuda {
        if matches!(
            name,
            "CMAKE_CUDA_ARCHITECTURES" | "CUDA_ARCH_LIST" | "TORCH_CUDA_ARCH_LIST"
        ) {
            return refuse(
                format!("the CUDA architectures are rocbuild's --cuda-arch ({}): they are recorded in the manifest", c.archs.join(";")),
                format!("pass --cuda-arch {} instead", user.replace(';', ",")),
            );
        }
    }
    let from_backend = i
        .recipe
        .raw
        .backend
        .iter()
        .find(|(k, _)| k.get_ref() == backend)
        .and_then(|(_, o)| o.build.as_ref())
        .is_some_and(|b| b.define.keys().any(|k| k == name));
    if from_backend && !is_flags_variable(name) {
        return refuse(
            format!(
                "{name}={ours} is what makes this a {backend} build of {}",
                i.recipe.name()
            ),
            format!(
                "choose the backend with --backend (one of {})",
                i.recipe.backends().join(", ")
            ),
        );
    }
    Ok(())
}

pub use rocbuild_recipe::is_flags_variable;

/// The value a user's `-D name=user` gives when rocbuild (recipe, toolchain) already set
/// `ours`: a flags variable keeps rocbuild's flags first and the user's after them (a later
/// flag wins in the compilers, so the user can still override one); anything else is the
/// user's value. A user value that already holds rocbuild's whole value is taken as it is.
pub fn compose_user_define(name: &str, ours: Option<&str>, user: &str) -> String {
    match ours.map(str::trim).filter(|o| !o.is_empty()) {
        Some(o) if is_flags_variable(name) && !user.contains(o) => {
            if user.trim().is_empty() {
                o.to_string()
            } else {
                format!("{o} {user}")
            }
        }
        _ => user.to_string(),
    }
}

/// A Windows host's MSVC-style build: the resource compiler found with cl.exe, the linker
/// found beside clang-cl (lld-link: CMake would otherwise look for link.exe), debug information
/// inside each object (/Z7, not a PDB written through the mspdbsrv server: what compiler caches
/// such as sccache require, and what runs where mspdbsrv cannot, C1902 under Wine; CMake 3.25's
/// CMP0141 makes it a setting), and MSVC's environment. Nothing elsewhere.
fn msvc_defines(
    machine: &Machine,
    define: &mut BTreeMap<String, String>,
    env: &mut BTreeMap<String, String>,
) {
    let Some(msvc) = machine.host.tools.msvc.as_ref() else {
        return;
    };
    let tools = [
        ("CMAKE_RC_COMPILER", &msvc.rc),
        ("CMAKE_LINKER", &msvc.linker),
    ];
    for (key, tool) in tools {
        if let Some(t) = tool {
            define.entry(key.into()).or_insert(t.display().to_string());
        }
    }
    define
        .entry("CMAKE_POLICY_DEFAULT_CMP0141".into())
        .or_insert("NEW".into());
    define
        .entry("CMAKE_MSVC_DEBUG_INFORMATION_FORMAT".into())
        .or_insert("Embedded".into());
    for (k, v) in msvc_env(machine) {
        env.entry(k).or_insert(v);
    }
}

/// MSVC's environment (INCLUDE, LIB, PATH) for a Windows build; empty elsewhere.
pub fn msvc_env(machine: &Machine) -> BTreeMap<String, String> {
    // MSVC is found for a Windows build only (`Tools::msvc`).
    match &machine.host.tools.msvc {
        Some(m) => {
            let mut env = m.env.clone();
            // setuptools: use the environment as set up instead of looking for MSVC again.
            env.insert("DISTUTILS_USE_SDK".into(), "1".into());
            env.insert("MSSdk".into(), "1".into());
            env
        }
        _ => BTreeMap::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testing::{ctx, recipe};
    use crate::plan::vars;
    use crate::source::plan as source;
    use crate::toolchain;
    use crate::toolchain::tools;
    use rocbuild_probe::Os;
    use rocbuild_testkit::machine::cpu_machine;
    use rocbuild_venv::BuildOptions;

    fn configured(os: Os, opts: &BuildOptions) -> Steps {
        configured_on(cpu_machine(os), opts)
    }

    fn configured_on(m: Machine, opts: &BuildOptions) -> Steps {
        let os = m.target.platform.os;
        let r = recipe("torchcodec");
        let c = ctx(os);
        let b = toolchain::choose(&r, &m, &opts.backend).unwrap();
        let rel = r.releases().into_iter().next().unwrap();
        let resolved = r.resolve(&rocbuild_recipe::Target {
            os: os.as_str(),
            arch: m.target.platform.arch.as_str(),
            flavor: "cpu",
            version: &rel.version,
            backend: "cpu",
            rocm_version: None,
            features: &[],
        });
        let src = source::plan(&r, &rel, opts, &c, os, Flavor::Cpu, &resolved)
            .unwrap()
            .0;
        let mut v = vars::of(&r, &rel.version, &m, &c, &[], &src, &b);
        let found = tools::required(&r, &m, &b, &Default::default(), &[]).unwrap();
        let (pt, ts) = tools::python_tools(&r, &m, &b, &found, &v, &c.cache).unwrap();
        if let Some(t) = pt {
            v.insert("tools".into(), t.dir.display().to_string());
        }
        Cmake
            .plan(&Inputs {
                recipe: &r,
                machine: &m,
                opts,
                ctx: &c,
                version: &rel.version,
                resolved: &resolved,
                vars: &v,
                source: &src,
                backend: &b,
                toolset: &ts,
                tools: None,
                cross: None,
                ffmpeg_pc: None,
            })
            .unwrap()
    }

    /// A user `-D` that would take away what rocbuild's build needs is refused, naming the
    /// option that does it rocbuild's way; the same value as rocbuild's passes.
    #[test]
    fn a_user_define_that_drops_what_rocbuild_needs_is_refused() {
        let with = |k: &str, v: &str| BuildOptions {
            defines: vec![(k.into(), v.into())],
            ..BuildOptions::default()
        };
        let refused = |name: &str, k: &str, v: &str| -> String {
            match configure_rocm(name, &with(k, v)) {
                Err(e) => format!("{e} | {}", miette::Diagnostic::help(&e).unwrap()),
                Ok(c) => panic!("-D {k}={v} was taken: {:?}", c.defines.get(k)),
            }
        };
        let t = refused("torchcodec", "CMAKE_HIP_ARCHITECTURES", "gfx1100;gfx1030");
        assert!(t.contains("--arch gfx1100,gfx1030"), "{t}");
        assert!(t.contains("gfx1010"), "{t}");
        let t = refused("torchcodec", "CMAKE_INSTALL_PREFIX", "/opt/mine");
        assert!(t.contains("staging prefix"), "{t}");
        let t = refused(
            "torchcodec",
            "CMAKE_HIP_FLAGS",
            "-O3 --rocm-path=/opt/rocm-6.2.4",
        );
        assert!(t.contains("--rocm /opt/rocm-6.2.4"), "{t}");
        let t = refused("torchcodec", "CMAKE_CXX_COMPILER", "/usr/bin/g++");
        assert!(t.contains("--rocm DIR"), "{t}");
        // What the recipe sets for the rocm backend is what makes it a ROCm build.
        let t = refused("ctranslate2", "WITH_HIP", "OFF");
        assert!(
            t.contains("WITH_HIP=ON is what makes this a rocm build"),
            "{t}"
        );
        assert!(t.contains("--backend"), "{t}");
        // Allowed: rocbuild's own value, flags that compose, unrelated variables.
        for (k, v) in [
            ("CMAKE_HIP_ARCHITECTURES", "gfx1010"),
            ("CMAKE_HIP_FLAGS", "-O3 --rocm-path=/usr"),
            ("WITH_HIP", "ON"),
            ("WITH_RUY", "OFF"),
        ] {
            assert!(
                configure_rocm("ctranslate2", &with(k, v)).is_ok(),
                "{k}={v}"
            );
        }
    }

    /// `configured` on Linux with a ROCm toolchain (Debian's layout under /usr) in place of the
    /// CPU one.
    fn configured_rocm(opts: &BuildOptions) -> Steps {
        configure_rocm("torchcodec", opts).unwrap()
    }

    fn configure_rocm(name: &str, opts: &BuildOptions) -> Result<Steps> {
        let os = Os::Linux;
        let r = recipe(name);
        let m = cpu_machine(os);
        let c = ctx(os);
        let mut b = toolchain::choose(&r, &m, &opts.backend).unwrap();
        b.rocm = Some(toolchain::RocmPlan {
            root: "/usr".into(),
            version: Some("6.4.3".into()),
            hip_version: Some("6.4.43484".into()),
            kind: "distribution packages (multiarch /usr)".into(),
            multiarch: true,
            archs: vec!["gfx1010".into()],
            archs_found_by: "--arch".into(),
            clang: "/usr/bin/clang-21".into(),
            clangxx: "/usr/bin/clang++-21".into(),
            clang_version: Some("21".into()),
            device_lib: Some("/usr/lib/llvm-21/lib/clang/21/amdgcn/bitcode".into()),
            llvm: "/usr/lib/llvm-21".into(),
            bin: "/usr/bin".into(),
            runtime: vec!["/usr/lib/x86_64-linux-gnu".into()],
            candidates: Vec::new(),
            notes: Vec::new(),
            warnings: Vec::new(),
        });
        let backend = if r.backends().iter().any(|x| x == "rocm") {
            b.backend = rocbuild_venv::Backend::Rocm;
            "rocm"
        } else {
            "cpu"
        };
        let rel = r.releases().into_iter().next().unwrap();
        let resolved = r.resolve(&rocbuild_recipe::Target {
            os: os.as_str(),
            arch: m.target.platform.arch.as_str(),
            flavor: "cpu",
            version: &rel.version,
            backend,
            rocm_version: Some("6.4.3"),
            features: &[],
        });
        let src = source::plan(&r, &rel, opts, &c, os, Flavor::Cpu, &resolved)
            .unwrap()
            .0;
        let mut v = vars::of(&r, &rel.version, &m, &c, &[], &src, &b);
        let found = tools::required(&r, &m, &b, &Default::default(), &[]).unwrap();
        let (pt, ts) = tools::python_tools(&r, &m, &b, &found, &v, &c.cache).unwrap();
        if let Some(t) = pt {
            v.insert("tools".into(), t.dir.display().to_string());
        }
        Cmake.plan(&Inputs {
            recipe: &r,
            machine: &m,
            opts,
            ctx: &c,
            version: &rel.version,
            resolved: &resolved,
            vars: &v,
            source: &src,
            backend: &b,
            toolset: &ts,
            tools: None,
            cross: None,
            ffmpeg_pc: None,
        })
    }

    #[test]
    #[cfg_attr(
        windows,
        ignore = "a Unix-host test: it plans a Linux build, whose paths a Windows host (which never builds for Linux) joins with `\\`"
    )]
    fn user_defines_come_last_and_name_another_build_tree() {
        let a = configured(Os::Linux, &BuildOptions::default());
        assert_eq!(a.defines["CMAKE_MAKE_PROGRAM"], "/usr/bin/ninja");
        // The recipe asks for the lite torch CMake package: rocbuild's own, in the cache.
        assert!(a.defines["Torch_DIR"].starts_with("/cache/torch-lite/"));
        assert!(a
            .configure
            .args
            .contains(&format!("-DCMAKE_INSTALL_PREFIX={}", a.prefix.display())));
        assert_eq!(a.toolkit, None, "a CPU torch needs no toolkit");
        let opts = BuildOptions {
            defines: vec![("CMAKE_MAKE_PROGRAM".into(), "/opt/ninja".into())],
            ..BuildOptions::default()
        };
        let b = configured(Os::Linux, &opts);
        assert_eq!(b.defines["CMAKE_MAKE_PROGRAM"], "/opt/ninja");
        assert_ne!(a.build_dir, b.build_dir);
        assert_eq!(b.build.args.last().unwrap(), "2");
    }

    /// A user's `-D CMAKE_HIP_FLAGS=…` on a ROCm build keeps rocbuild's `--rocm-path` (clang
    /// finds Debian's HIP only with it) and adds the user's flags after it; a non-flags
    /// variable is still replaced.
    #[test]
    fn user_flags_are_appended_to_rocbuilds() {
        let opts = BuildOptions {
            defines: vec![
                ("CMAKE_HIP_FLAGS".into(), "-O3 -DMY_FLAG".into()),
                ("CMAKE_CXX_FLAGS".into(), "-DUSER_CXX".into()),
                ("CMAKE_MAKE_PROGRAM".into(), "/opt/ninja".into()),
            ],
            ..BuildOptions::default()
        };
        let c = configured_rocm(&opts);
        assert_eq!(
            c.defines["CMAKE_HIP_FLAGS"],
            "--rocm-path=/usr -O3 -DMY_FLAG"
        );
        assert_eq!(c.defines["CMAKE_CXX_FLAGS"], "-DUSER_CXX");
        assert_eq!(c.defines["CMAKE_MAKE_PROGRAM"], "/opt/ninja");
        assert!(c
            .configure
            .args
            .contains(&"-DCMAKE_HIP_FLAGS=--rocm-path=/usr -O3 -DMY_FLAG".to_string()));
        // Without the user's define: rocbuild's value alone.
        let plain = configured_rocm(&BuildOptions::default());
        assert_eq!(plain.defines["CMAKE_HIP_FLAGS"], "--rocm-path=/usr");
    }

    #[test]
    fn flag_composition_rules() {
        assert!(is_flags_variable("CMAKE_HIP_FLAGS"));
        assert!(is_flags_variable("CMAKE_CXX_FLAGS_RELEASE"));
        assert!(is_flags_variable("CMAKE_SHARED_LINKER_FLAGS"));
        assert!(!is_flags_variable("CMAKE_HIP_ARCHITECTURES"));
        assert!(!is_flags_variable("MY_FLAGS"));
        assert_eq!(
            compose_user_define("CMAKE_C_FLAGS", Some("-a"), "-b"),
            "-a -b"
        );
        assert_eq!(compose_user_define("CMAKE_C_FLAGS", None, "-b"), "-b");
        assert_eq!(
            compose_user_define("CMAKE_C_FLAGS", Some("-a"), "-a -b"),
            "-a -b"
        );
        assert_eq!(compose_user_define("WITH_X", Some("ON"), "OFF"), "OFF");
    }

    /// LLVM's clang-cl links with the lld-link found beside it, and the plan says so to CMake
    /// (which would look for MSVC's link.exe otherwise); cl.exe leaves CMake's own choice.
    #[test]
    fn clang_cl_from_llvm_links_with_its_lld_link() {
        let mut m = cpu_machine(Os::Windows);
        m.host.tools.msvc = Some(rocbuild_probe::Msvc {
            cl: std::path::PathBuf::from(r"C:\Program Files\LLVM\bin\clang-cl.exe"),
            rc: None,
            env: Default::default(),
            found_by: "LLVM at C:\\Program Files\\LLVM\\bin (PATH)".into(),
            linker: Some(std::path::PathBuf::from(
                r"C:\Program Files\LLVM\bin\lld-link.exe",
            )),
        });
        let with = configured_on(m.clone(), &BuildOptions::default());
        assert_eq!(
            with.defines.get("CMAKE_LINKER").map(String::as_str),
            Some("C:/Program Files/LLVM/bin/lld-link.exe")
        );
        if let Some(msvc) = m.host.tools.msvc.as_mut() {
            msvc.linker = None;
        }
        // Debug information embedded (/Z7): no mspdbsrv, and cacheable by sccache.
        assert_eq!(
            with.defines
                .get("CMAKE_MSVC_DEBUG_INFORMATION_FORMAT")
                .map(String::as_str),
            Some("Embedded")
        );
        assert_eq!(
            with.defines
                .get("CMAKE_POLICY_DEFAULT_CMP0141")
                .map(String::as_str),
            Some("NEW")
        );
        let without = configured_on(m, &BuildOptions::default());
        assert!(!without.defines.contains_key("CMAKE_LINKER"));
    }

    #[test]
    fn windows_defines_use_forward_slashes() {
        let w = configured(Os::Windows, &BuildOptions::default());
        assert!(
            w.defines.values().all(|v| !v.contains('\\')),
            "{:?}",
            w.defines
        );
        assert!(w
            .build_dir
            .display()
            .to_string()
            .starts_with(r"C:\cache\build\torchcodec-"));
    }
}
