//! Finding ROCm/HIP SDKs and reading what each holds, from files only.
//!
//! Layouts differ per source: AMD's `/opt/rocm-X.Y.Z`, the Windows HIP SDK
//! (`C:\Program Files\AMD\ROCm\X.Y`, DLLs in `bin`), TheRock's pip packages split over
//! `_rocm_sdk_core` / `_rocm_sdk_devel` / `_rocm_sdk_libraries_*`, and Debian's multiarch `/usr`
//! (`/usr/lib/<triplet>/amdgcn/bitcode`, CMake files under `/usr/lib/<triplet>/cmake`).
//! Each lookup therefore searches a list of relative paths in every part of the SDK.

use std::path::{Path, PathBuf};

use crate::gfx::gfx_of_bitcode_file;
use crate::probe_env::{vars, ProbeEnv};
use crate::rocm_version::{dist_version, hipblas_version, read_versions, version_from_dir_name};
use crate::{Os, RocmSdk, SdkKind};

/// Every ROCm/HIP SDK candidate, usable or not, de-duplicated by real path.
///
/// Scans come first (they know the layout); `$ROCM_PATH`, `$HIP_PATH` and `$HIP_PATH_NN` then
/// either name one of those (recorded in `named_by`) or add their own candidate, which is
/// inspected like any other: an environment variable is a claim, not a fact.
pub fn discover_sdks(env: &ProbeEnv, os: Os, venv_site: Option<&Path>) -> Vec<RocmSdk> {
    let mut found: Vec<RocmSdk> = Vec::new();
    match os {
        Os::Linux => {
            // Real directories before symlinks, so `/opt/rocm -> rocm-7.2.0` is recorded as
            // a second name of the versioned directory.
            let mut opt = sorted_dirs(&env.unix("/opt"));
            opt.sort_by_key(|d| {
                d.symlink_metadata()
                    .map(|m| m.file_type().is_symlink())
                    .unwrap_or(false)
            });
            for dir in opt {
                let name = file_name(&dir);
                if name == "rocm" || name.starts_with("rocm-") {
                    add(
                        &mut found,
                        inspect(
                            std::slice::from_ref(&dir),
                            SdkKind::OptRocm,
                            os,
                            version_from_dir_name(&name),
                        ),
                    );
                }
            }
            if let Some(sdk) = debian_multiarch(env) {
                add(&mut found, sdk);
            }
        }
        Os::Windows => {
            for dir in sorted_dirs(&env.program_files.join("AMD").join("ROCm")) {
                let name = file_name(&dir);
                add(
                    &mut found,
                    inspect(
                        std::slice::from_ref(&dir),
                        SdkKind::WindowsHipSdk,
                        os,
                        version_from_dir_name(&name),
                    ),
                );
            }
        }
        // ROCm does not exist for macOS.
        Os::Macos => return found,
    }
    if let Some(site) = venv_site {
        if let Some(sdk) = the_rock(site, os) {
            add(&mut found, sdk);
        }
    }
    let mut named: Vec<(String, SdkKind)> = vec![
        (vars::ROCM_PATH.to_string(), SdkKind::RocmPathEnv),
        (vars::HIP_PATH.to_string(), SdkKind::HipPathEnv),
    ];
    for k in env.vars.keys() {
        if k.strip_prefix(vars::HIP_PATH_PREFIX)
            .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        {
            named.push((k.clone(), SdkKind::HipPathEnv));
        }
    }
    for (var, kind) in named {
        let Some(value) = env.var(&var) else { continue };
        let root = PathBuf::from(value.trim_end_matches(['/', '\\']));
        let label = format!("${var}");
        if let Some(existing) = found
            .iter_mut()
            .find(|s| same_dir(&s.root, &root) || s.parts.iter().any(|p| same_dir(p, &root)))
        {
            if !existing.named_by.contains(&label) {
                existing.named_by.push(label);
            }
            continue;
        }
        let mut sdk = if root.is_dir() {
            inspect(
                std::slice::from_ref(&root),
                kind,
                os,
                version_from_dir_name(&file_name(&root)),
            )
        } else {
            let mut s = empty(root.clone(), kind);
            s.problems.push(format!(
                "{label} names {}, which does not exist",
                root.display()
            ));
            s
        };
        sdk.named_by.push(label);
        found.push(sdk);
    }
    found
}

fn add(found: &mut Vec<RocmSdk>, sdk: RocmSdk) {
    if let Some(existing) = found.iter_mut().find(|s| same_dir(&s.root, &sdk.root)) {
        // `/opt/rocm` is usually a symlink to `/opt/rocm-X.Y.Z`: keep one, remember both names.
        let alias = sdk.root.display().to_string();
        if !existing.named_by.contains(&alias) {
            existing.named_by.push(alias);
        }
        return;
    }
    found.push(sdk);
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

pub(crate) fn sorted_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    crate::rocm_version::sort_naturally(&mut v);
    v
}

pub(crate) fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

pub(crate) fn empty(root: PathBuf, kind: SdkKind) -> RocmSdk {
    RocmSdk {
        parts: vec![root.clone()],
        root,
        version: None,
        version_source: None,
        hip_version: None,
        kind,
        named_by: Vec::new(),
        clang: None,
        clangxx: None,
        hipcc: None,
        device_lib_dir: None,
        targets: Vec::new(),
        hipblas: None,
        rocblas: false,
        rocblas_version: None,
        clang_version: None,
        tensile_archs: Vec::new(),
        tensile_dir: None,
        amd_comgr: None,
        cmake_dirs: Vec::new(),
        bin_dir: None,
        lib_dir: None,
        problems: Vec::new(),
    }
}

/// The first existing `part/rel` over all parts and relative paths (globs allowed in `rel`).
fn first(parts: &[PathBuf], rels: &[&str], want_dir: bool) -> Option<PathBuf> {
    rels.iter().find_map(|rel| {
        parts.iter().find_map(|part| {
            let mut hits = expand(part, rel);
            hits.retain(|p| if want_dir { p.is_dir() } else { p.is_file() });
            // Highest version last for globs like `lib/llvm/lib/clang/*`, `libamd_comgr.so.*`:
            // by value (clang/20 after clang/9), not as text.
            crate::rocm_version::sort_naturally(&mut hits);
            hits.pop()
        })
    })
}

fn expand(base: &Path, rel: &str) -> Vec<PathBuf> {
    if !rel.contains('*') {
        return vec![base.join(rel)];
    }
    let pattern = format!("{}/{}", glob::Pattern::escape(&base.to_string_lossy()), rel);
    glob::glob(&pattern)
        .map(|paths| paths.flatten().collect())
        .unwrap_or_default()
}

fn exe(os: Os, name: &str) -> String {
    if os == Os::Windows {
        format!("{name}.exe")
    } else {
        name.to_string()
    }
}

/// Read what an SDK made of `parts` holds. `parts[0]` is its root.
pub(crate) fn inspect(
    parts: &[PathBuf],
    kind: SdkKind,
    os: Os,
    dir_version: Option<String>,
) -> RocmSdk {
    let root = parts[0].clone();
    let mut sdk = empty(root.clone(), kind);
    sdk.parts = parts.to_vec();
    if !root.is_dir() {
        sdk.problems
            .push(format!("{} does not exist", root.display()));
        return sdk;
    }
    let triplets = triplet_dirs(parts);
    let t = |suffix: &str| -> Vec<String> {
        triplets
            .iter()
            .map(|tr| format!("lib/{tr}/{suffix}"))
            .collect()
    };
    sdk.bin_dir = first(parts, &["bin"], true);
    sdk.lib_dir = if kind == SdkKind::DebianMultiarch {
        triplets.first().map(|tr| root.join("lib").join(tr))
    } else {
        first(parts, &["lib"], true)
    };
    find_compilers(&mut sdk, parts, kind, os);
    find_device_libraries(&mut sdk, parts, &t("amdgcn/bitcode"));
    read_versions(&mut sdk, parts, &t, dir_version);
    find_libraries(&mut sdk, parts, os, &triplets);
    find_cmake_dirs(&mut sdk, parts, &t("cmake"));
    note_problems(&mut sdk);
    sdk
}

/// clang, clang++ (amdclang, Debian's versioned ones) and hipcc.
fn find_compilers(sdk: &mut RocmSdk, parts: &[PathBuf], kind: SdkKind, os: Os) {
    let root = parts[0].clone();
    let clang_dirs = ["bin", "lib/llvm/bin", "llvm/bin"];
    let find_exe = |names: &[&str]| -> Option<PathBuf> {
        let rels: Vec<String> = names
            .iter()
            .flat_map(|n| {
                clang_dirs
                    .iter()
                    .map(move |d| format!("{d}/{}", exe(os, n)))
            })
            .collect();
        first(
            parts,
            &rels.iter().map(String::as_str).collect::<Vec<_>>(),
            false,
        )
    };
    // Debian from ROCm 6 on (sid, trixie+): the device libraries live in the resource
    // directory of the LLVM that HIP is built for (`/usr/lib/llvm-21/lib/clang/21/amdgcn/
    // bitcode`); that LLVM's clang is the compiler. The newest such LLVM wins.
    let debian_llvm = (kind == SdkKind::DebianMultiarch)
        .then(|| debian_resource_bitcode(&root))
        .flatten();
    if let Some((n, dir)) = &debian_llvm {
        sdk.clang = Some(root.join(format!("bin/clang-{n}")))
            .filter(|p| p.exists())
            .or_else(|| Some(root.join(format!("lib/llvm-{n}/bin/clang"))).filter(|p| p.exists()));
        sdk.clangxx = Some(root.join(format!("bin/clang++-{n}")))
            .filter(|p| p.exists())
            .or_else(|| {
                Some(root.join(format!("lib/llvm-{n}/bin/clang++"))).filter(|p| p.exists())
            });
        sdk.device_lib_dir = Some(dir.clone());
    } else if kind == SdkKind::DebianMultiarch {
        // Debian's HIP is built for one versioned LLVM (clang++-15 for ROCm 5.2); a plain
        // `clang++` may be another major. Newest versioned first, the plain name last.
        sdk.clang = newest_versioned(&root.join("bin"), "clang-").or_else(|| find_exe(&["clang"]));
        sdk.clangxx =
            newest_versioned(&root.join("bin"), "clang++-").or_else(|| find_exe(&["clang++"]));
    } else {
        sdk.clang = find_exe(&["amdclang", "clang"]);
        sdk.clangxx = find_exe(&["amdclang++", "clang++"]);
    }
    let hipcc = exe(os, "bin/hipcc");
    sdk.hipcc = first(
        parts,
        &[
            hipcc.as_str(),
            "bin/hipcc.bin.exe",
            "bin/hipcc.bat",
            "bin/hipcc",
        ],
        false,
    );
}

/// The device libraries (`amdgcn/bitcode`) and the GPU targets they hold; clang's version.
fn find_device_libraries(sdk: &mut RocmSdk, parts: &[PathBuf], triplet_rels: &[String]) {
    let mut dev_rels: Vec<String> = vec![
        "amdgcn/bitcode".into(),
        "lib/llvm/amdgcn/bitcode".into(),
        "llvm/amdgcn/bitcode".into(),
        "lib/llvm/lib/clang/*/lib/amdgcn/bitcode".into(),
        "llvm/lib/clang/*/lib/amdgcn/bitcode".into(),
    ];
    dev_rels.extend(triplet_rels.iter().cloned());
    let dev_dir = sdk.device_lib_dir.clone().or_else(|| {
        dev_rels.iter().find_map(|rel| {
            parts
                .iter()
                .flat_map(|p| expand(p, rel))
                .find(|d| !bitcode_targets(d).is_empty())
        })
    });
    if let Some(d) = &dev_dir {
        sdk.targets = bitcode_targets(d);
    }
    sdk.device_lib_dir = dev_dir;
    sdk.clang_version = clang_version(&sdk);
}

/// amd_comgr, rocBLAS (its version and Tensile kernels), hipBLAS.
fn find_libraries(sdk: &mut RocmSdk, parts: &[PathBuf], os: Os, triplets: &[String]) {
    let lib_rels: Vec<String> = if os == Os::Windows {
        vec!["bin".into(), "lib".into()]
    } else {
        let mut v = vec!["lib".to_string(), "lib64".to_string()];
        v.extend(triplets.iter().map(|tr| format!("lib/{tr}")));
        v
    };
    let lib_file = |stem: &str| -> Option<PathBuf> {
        let rels: Vec<String> = lib_rels
            .iter()
            .flat_map(|d| {
                if os == Os::Windows {
                    vec![format!("{d}/{stem}*.dll"), format!("{d}/{stem}.lib")]
                } else {
                    vec![format!("{d}/lib{stem}.so*")]
                }
            })
            .collect();
        first(
            parts,
            &rels.iter().map(String::as_str).collect::<Vec<_>>(),
            false,
        )
    };
    sdk.amd_comgr = lib_file("amd_comgr");
    let rocblas_lib = lib_file("rocblas");
    sdk.rocblas = rocblas_lib.is_some();
    sdk.rocblas_version = crate::rocblas::rocblas_version(parts);
    sdk.hipblas =
        hipblas_version(parts).or_else(|| lib_file("hipblas").map(|_| "present".to_string()));
    // The same lookup rocBLAS itself does (and doctor asks): beside the library, versioned
    // in Debian's layout.
    sdk.tensile_dir = rocblas_lib
        .as_deref()
        .map(|l| crate::rocblas::rocblas_tensile_dir(l, None, sdk.rocblas_version.as_deref()))
        .filter(|d| d.is_dir());
    if let Some(d) = &sdk.tensile_dir {
        sdk.tensile_archs = tensile_archs(d);
    }
}

/// The SDK's CMake package directories.
fn find_cmake_dirs(sdk: &mut RocmSdk, parts: &[PathBuf], triplet_rels: &[String]) {
    let mut cmake_rels = vec!["lib/cmake".to_string(), "lib64/cmake".to_string()];
    cmake_rels.extend(triplet_rels.iter().cloned());
    for rel in cmake_rels {
        for p in parts {
            let d = p.join(&rel);
            if d.is_dir() && !sdk.cmake_dirs.contains(&d) {
                sdk.cmake_dirs.push(d);
            }
        }
    }
}

/// What makes the SDK unusable for a HIP build.
fn note_problems(sdk: &mut RocmSdk) {
    let root = sdk.parts.first().cloned().unwrap_or_default();
    if sdk.clangxx.is_none() && sdk.hipcc.is_none() {
        sdk.problems.push(format!(
            "no HIP compiler (clang++, amdclang++ or hipcc) under {}",
            root.display()
        ));
    }
    if sdk.device_lib_dir.is_none() {
        sdk.problems.push(format!(
            "no device libraries (amdgcn/bitcode/oclc_isa_version_*.bc) under {}",
            root.display()
        ));
    }
}

/// `(N, /usr/lib/llvm-N/lib/clang/<v>/amdgcn/bitcode)` for the newest LLVM N whose resource
/// directory holds device libraries.
fn debian_resource_bitcode(usr: &Path) -> Option<(u32, PathBuf)> {
    let mut llvms: Vec<(u32, PathBuf)> = sorted_dirs(&usr.join("lib"))
        .into_iter()
        .filter_map(|d| Some((file_name(&d).strip_prefix("llvm-")?.parse().ok()?, d)))
        .collect();
    llvms.sort();
    llvms.into_iter().rev().find_map(|(n, d)| {
        let mut dirs = expand(&d, "lib/clang/*/amdgcn/bitcode");
        crate::rocm_version::sort_naturally(&mut dirs);
        dirs.into_iter()
            .rev()
            .find(|b| !bitcode_targets(b).is_empty())
            .map(|b| (n, b))
    })
}

/// The clang version: the resource directory holding the device libraries (`clang/21/…`,
/// `clang/19/lib/…`), else the compiler's versioned name (`clang++-15`).
fn clang_version(sdk: &RocmSdk) -> Option<String> {
    if let Some(d) = &sdk.device_lib_dir {
        let comps: Vec<String> = d
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if let Some(i) = comps.iter().position(|c| c == "clang") {
            if let Some(v) = comps.get(i + 1).filter(|v| !version_key_of(v).is_empty()) {
                return Some(v.clone());
            }
        }
    }
    let name = file_name(sdk.clangxx.as_deref()?);
    name.rsplit_once('-')
        .map(|(_, v)| v.trim_end_matches(".exe").to_string())
        .filter(|v| !version_key_of(v).is_empty())
}

fn version_key_of(v: &str) -> Vec<u32> {
    crate::rocm::version_key(v)
}

/// `dir/<prefix>N` with the highest number N (`clang++-15` over `clang++-9`).
fn newest_versioned(dir: &Path, prefix: &str) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let n: u32 = name.strip_prefix(prefix)?.parse().ok()?;
            Some((n, e.path()))
        })
        .max_by_key(|(n, _)| *n)
        .map(|(_, p)| p)
}

/// `lib/<triplet>` directories (`x86_64-linux-gnu`, …), host-looking ones first.
fn triplet_dirs(parts: &[PathBuf]) -> Vec<String> {
    let mut v: Vec<String> = parts
        .iter()
        .flat_map(|p| sorted_dirs(&p.join("lib")))
        .map(|d| file_name(&d))
        .filter(|n| n.contains("-linux-gnu"))
        .collect();
    v.sort_by_key(|n| (!n.starts_with(std::env::consts::ARCH), n.clone()));
    v.dedup();
    v
}

/// gfx names from the `oclc_isa_version_*.bc` files in `dir`, in LLVM's order.
pub fn bitcode_targets(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| gfx_of_bitcode_file(&e.file_name().to_string_lossy()))
        .collect();
    v.sort_by_key(|n| (n.contains("generic"), n.len(), n.clone()));
    v
}

/// gfx names found in rocBLAS Tensile file names (`TensileLibrary_lazy_gfx1030.dat`,
/// `Kernels.so-000-gfx90a-xnack-.hsaco`).
pub fn tensile_archs(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let mut rest = name.as_str();
        while let Some(i) = rest.find("gfx") {
            let tail = &rest[i + 3..];
            let n = tail.bytes().take_while(|b| b.is_ascii_hexdigit()).count();
            if n >= 3 {
                let g = format!("gfx{}", &tail[..n]);
                if !v.contains(&g) {
                    v.push(g);
                }
            }
            rest = &tail[n..];
        }
    }
    v.sort_by_key(|n| (n.len(), n.clone()));
    v
}

/// Debian/Ubuntu packages under `/usr`: only when their device libraries or HIP headers are there.
fn debian_multiarch(env: &ProbeEnv) -> Option<RocmSdk> {
    let usr = env.unix("/usr");
    let has_bitcode = triplet_dirs(std::slice::from_ref(&usr))
        .iter()
        .any(|tr| usr.join("lib").join(tr).join("amdgcn/bitcode").is_dir())
        || debian_resource_bitcode(&usr).is_some();
    if !has_bitcode && !usr.join("include/hip/hip_version.h").is_file() {
        return None;
    }
    Some(inspect(&[usr], SdkKind::DebianMultiarch, Os::Linux, None))
}

/// TheRock's pip packages in the venv: the root is `_rocm_sdk_devel` (headers, CMake files,
/// compilers) when installed, else `_rocm_sdk_core`; libraries are searched in all parts.
fn the_rock(site: &Path, os: Os) -> Option<RocmSdk> {
    let core = site.join("_rocm_sdk_core");
    let devel = site.join("_rocm_sdk_devel");
    if !core.is_dir() && !devel.is_dir() {
        return None;
    }
    let mut parts: Vec<PathBuf> = [devel.clone(), core.clone()]
        .into_iter()
        .filter(|p| p.is_dir())
        .collect();
    parts.extend(
        sorted_dirs(site)
            .into_iter()
            .filter(|d| file_name(d).starts_with("_rocm_sdk_libraries")),
    );
    let version =
        dist_version(site, "rocm_sdk_core").or_else(|| dist_version(site, "rocm_sdk_devel"));
    let mut sdk = inspect(&parts, SdkKind::TheRockPip, os, None);
    // The wheel's version is the release; it beats a directory name but not `.info/version`.
    if let Some(v) = version {
        if sdk
            .version_source
            .as_deref()
            .is_none_or(|s| !s.starts_with(".info"))
        {
            sdk.version = Some(v);
            sdk.version_source = Some("rocm-sdk-core dist-info".into());
        }
    }
    if !devel.is_dir() {
        sdk.problems.push(format!(
            "rocm-sdk-devel is not installed in {} (compilers and headers live there): pip install rocm-sdk-devel, then rocm-sdk init",
            site.display()
        ));
    }
    Some(sdk)
}
