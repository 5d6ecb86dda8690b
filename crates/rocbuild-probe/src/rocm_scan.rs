//! Finding ROCm/HIP SDKs and reading what each holds, from files only.
//!
//! Layouts differ per source: AMD's `/opt/rocm-X.Y.Z`, the Windows HIP SDK
//! (`C:\Program Files\AMD\ROCm\X.Y`, DLLs in `bin`), TheRock's pip packages split over
//! `_rocm_sdk_core` / `_rocm_sdk_devel` / `_rocm_sdk_libraries_*`, and Debian's multiarch `/usr`
//! (`/usr/lib/<triplet>/amdgcn/bitcode`, CMake files under `/usr/lib/<triplet>/cmake`).
//! Each lookup therefore searches a list of relative paths in every part of the SDK.
//!
//! Debian's HIP is built for one LLVM among possibly several installed (`clang-15` and
//! `clang-19` side by side): its compiler is that LLVM's clang, read from hipcc's own lookup,
//! the hipcc package's dependencies, or the device libraries (`debian_hip_llvm`).
//!
//! Names an OS: finding ROCm SDKs. Linux has /opt/rocm and Debian's multiarch layout; Windows
//! has the HIP SDK's Program Files layout; macOS has none.

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
    match (dunce::canonicalize(a), dunce::canonicalize(b)) {
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
        kernels: Vec::new(),
        the_rock: None,
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
    if kind == SdkKind::DebianMultiarch {
        if !debian_compilers(sdk, &root) {
            // Nothing in the SDK says which LLVM it is built for (step 5 of `debian_hip_llvm`):
            // the newest versioned clang, then the plain name.
            let bin = root.join("bin");
            sdk.clang = newest_versioned(&bin, "clang-").or_else(|| find_exe(&["clang"]));
            sdk.clangxx = newest_versioned(&bin, "clang++-").or_else(|| find_exe(&["clang++"]));
        }
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

/// Debian's clang and clang++ for HIP: those of the one LLVM the SDK is built for
/// (`debian_hip_llvm`), never simply the newest LLVM installed beside it. False when nothing
/// in the SDK names that LLVM.
fn debian_compilers(sdk: &mut RocmSdk, usr: &Path) -> bool {
    let resource = debian_resource_bitcode(usr);
    let Some((n, why)) = debian_hip_llvm(usr, &resource) else {
        return false;
    };
    let versioned = |name: &str| {
        [
            usr.join(format!("bin/{name}-{n}")),
            usr.join(format!("lib/llvm-{n}/bin/{name}")),
        ]
        .into_iter()
        .find(|p| p.is_file())
    };
    sdk.clang = versioned("clang");
    sdk.clangxx = versioned("clang++");
    if let Some((_, dir)) = resource.iter().find(|(m, _)| *m == n) {
        sdk.device_lib_dir = Some(dir.clone());
    }
    if sdk.clangxx.is_none() {
        sdk.problems.push(format!(
            "this SDK's HIP is built for LLVM {n} ({why}), whose clang++ is not installed (no bin/clang++-{n} or lib/llvm-{n}/bin/clang++ under {}): install clang-{n}",
            usr.display()
        ));
    }
    true
}

/// The LLVM major Debian's HIP is built for, and how that is known. Read from files only, the
/// most authoritative first:
/// 1. hipcc's own lookup: the versioned compiler its files run (`clang++-15` in ROCm 5's
///    `hipcc.pl` / `hipconfig.pl`, `lib/llvm-21/bin` in the C++ `hipcc` of ROCm 6 on);
/// 2. the `hipcc` package's dependencies in dpkg's status (`clang-15`, `llvm-21`);
/// 3. the LLVM whose resource directory holds the device libraries (ROCm 6 on), the newest
///    when several do;
/// 4. the LLVM that built the multiarch device libraries (their bitcode's producer,
///    `LLVM15.0.5`: ROCm 5).
///
/// A source naming several majors says nothing. Without any (5.), the caller falls back to the
/// newest versioned clang.
fn debian_hip_llvm(usr: &Path, resource: &[(u32, PathBuf)]) -> Option<(u32, String)> {
    hipcc_llvm(usr)
        .or_else(|| dpkg_hipcc_llvm(&usr.parent()?.join("var/lib/dpkg/status")))
        .or_else(|| {
            let (n, dir) = resource.last()?;
            Some((*n, format!("the device libraries are in {}", dir.display())))
        })
        .or_else(|| {
            triplet_dirs(&[usr.to_path_buf()])
                .iter()
                .map(|tr| usr.join("lib").join(tr).join("amdgcn/bitcode"))
                .find_map(|d| bitcode_llvm(&d))
        })
}

/// The one value in `found`, when all agree.
fn only<T: PartialEq + Copy>(found: &[T]) -> Option<T> {
    let first = *found.first()?;
    found.iter().all(|x| *x == first).then_some(first)
}

/// Step 1 of `debian_hip_llvm`: the LLVM major hipcc's files name (`clang++-15`,
/// `clang-15`, `llvm-21/`), and the file that names it.
fn hipcc_llvm(usr: &Path) -> Option<(u32, String)> {
    let mut found: Vec<(u32, PathBuf)> = Vec::new();
    for rel in [
        "bin/hipcc",
        "bin/hipcc.pl",
        "bin/hipcc.bin",
        "bin/hipconfig",
        "bin/hipconfig.pl",
    ] {
        let path = usr.join(rel);
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        for n in versioned_llvm_names(&bytes) {
            found.push((n, path.clone()));
        }
    }
    let n = only(&found.iter().map(|(n, _)| *n).collect::<Vec<_>>())?;
    Some((n, format!("hipcc's lookup in {}", found[0].1.display())))
}

/// The majors in `clang-N`, `clang++-N` (not after a letter: `libclang-15`) and `llvm-N/` in
/// a script or binary.
fn versioned_llvm_names(bytes: &[u8]) -> Vec<u32> {
    let mut v = Vec::new();
    for (needle, after) in [
        (&b"clang++-"[..], None),
        (&b"clang-"[..], None),
        (&b"llvm-"[..], Some(b'/')),
    ] {
        let mut i = 0;
        while let Some(at) = find_bytes(&bytes[i..], needle).map(|k| k + i) {
            i = at + needle.len();
            if at > 0 && bytes[at - 1].is_ascii_alphanumeric() {
                continue;
            }
            let digits = bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
            let next = bytes.get(i + digits).copied();
            let ends = match after {
                Some(c) => next == Some(c),
                None => next.is_none_or(|b| !b.is_ascii_alphanumeric() && b != b'.'),
            };
            if (1..=3).contains(&digits) && ends {
                if let Ok(n) = std::str::from_utf8(&bytes[i..i + digits])
                    .unwrap_or("")
                    .parse()
                {
                    v.push(n);
                }
            }
        }
    }
    v
}

fn find_bytes(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Step 2 of `debian_hip_llvm`: the `clang-N` / `llvm-N` an installed `hipcc` package depends on.
fn dpkg_hipcc_llvm(status: &Path) -> Option<(u32, String)> {
    let text = crate::read_text(status).ok()?;
    let stanza = text.split("\n\n").find(|st| {
        st.lines().any(|l| l.trim_end() == "Package: hipcc")
            && st
                .lines()
                .any(|l| l.starts_with("Status:") && l.trim_end().ends_with(" installed"))
    })?;
    let depends = stanza.lines().find_map(|l| l.strip_prefix("Depends:"))?;
    let majors: Vec<u32> = depends
        .split([',', '|'])
        .filter_map(|d| {
            let name = d.split_whitespace().next()?;
            let (pkg, n) = name.rsplit_once('-')?;
            ["clang", "llvm"].contains(&pkg).then(|| n.parse().ok())?
        })
        .collect();
    Some((
        only(&majors)?,
        format!("the hipcc package depends on it ({})", status.display()),
    ))
}

/// Step 4 of `debian_hip_llvm`: the LLVM major that wrote the device libraries in `dir`.
fn bitcode_llvm(dir: &Path) -> Option<(u32, String)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "bc"))
        .collect();
    // ocml.bc first (every release has it), then by name.
    files.sort_by_key(|p| (file_name(p) != "ocml.bc", p.clone()));
    files.iter().take(3).find_map(|f| {
        let mut head = Vec::with_capacity(512);
        std::io::Read::read_to_end(
            &mut std::io::Read::take(std::fs::File::open(f).ok()?, 512),
            &mut head,
        )
        .ok()?;
        let producer = bitcode::producer(&head)?;
        let n = producer.strip_prefix("LLVM")?;
        let major = n.split('.').next()?.parse().ok()?;
        Some((
            major,
            format!(
                "the device libraries were written by {producer} ({})",
                f.display()
            ),
        ))
    })
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
    sdk.clang_version = clang_version(sdk);
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
    sdk.kernels = crate::kernels::kernel_sets(parts, os == Os::Windows);
    // Debian keeps rocBLAS's kernels in a versioned directory the generic scan does not see.
    if let Some(d) = &sdk.tensile_dir {
        if !sdk.kernels.iter().any(|k| &k.dir == d) {
            sdk.kernels.push(crate::kernels::KernelSet {
                library: "rocBLAS".into(),
                dir: d.clone(),
                archs: sdk.tensile_archs.clone(),
            });
        }
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

/// `(N, /usr/lib/llvm-N/lib/clang/<v>/amdgcn/bitcode)` for every LLVM N whose resource
/// directory holds device libraries (Debian from ROCm 6 on), lowest N first.
fn debian_resource_bitcode(usr: &Path) -> Vec<(u32, PathBuf)> {
    let mut llvms: Vec<(u32, PathBuf)> = sorted_dirs(&usr.join("lib"))
        .into_iter()
        .filter_map(|d| Some((file_name(&d).strip_prefix("llvm-")?.parse().ok()?, d)))
        .collect();
    llvms.sort();
    llvms
        .into_iter()
        .filter_map(|(n, d)| {
            let mut dirs = expand(&d, "lib/clang/*/amdgcn/bitcode");
            crate::rocm_version::sort_naturally(&mut dirs);
            dirs.into_iter()
                .rev()
                .find(|b| !bitcode_targets(b).is_empty())
                .map(|b| (n, b))
        })
        .collect()
}

/// The clang version: the resource directory holding the device libraries (`clang/21/…`,
/// `clang/19/lib/…`), else the compiler's versioned name (`clang++-15`) or its LLVM's
/// directory (`llvm-15/bin/clang++`).
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
    let clangxx = sdk.clangxx.as_deref()?;
    let name = file_name(clangxx);
    name.rsplit_once('-')
        .map(|(_, v)| v.trim_end_matches(".exe").to_string())
        .filter(|v| !version_key_of(v).is_empty())
        .or_else(|| {
            let llvm = file_name(clangxx.parent()?.parent()?);
            llvm.strip_prefix("llvm-")
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .map(str::to_string)
        })
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
        || !debian_resource_bitcode(&usr).is_empty();
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
    // The wheel's version (`7.15.0a20260630`) says more than `.info/version` (`7.15.0`, the
    // release numbers only): it wins when it is that release, or when nothing else says one.
    if let Some(v) = version {
        let info_agrees = sdk.version.as_deref().is_none_or(|i| {
            !sdk.version_source
                .as_deref()
                .is_some_and(|s| s.starts_with(".info"))
                || crate::version_key(i) == crate::version_key(&v)
        });
        if info_agrees {
            sdk.version = Some(v);
            sdk.version_source = Some("rocm-sdk-core dist-info".into());
        }
    }
    sdk.the_rock = Some(the_rock_packages(
        site,
        sdk.version.clone().unwrap_or_default(),
    ));
    if !devel.is_dir() {
        let installed = dist_version(site, "rocm_sdk_devel").is_some();
        let rocm_sdk = rocm_sdk_script(site, os);
        sdk.problems.push(if installed {
            format!(
                "rocm-sdk-devel is installed but not expanded in {} (compilers and headers come from it): run `{} init` once",
                site.display(),
                rocm_sdk.display()
            )
        } else {
            format!(
                "rocm-sdk-devel is not installed in {} (compilers and headers live there): pip install rocm-sdk-devel=={}, then rocm-sdk init",
                site.display(),
                sdk.version.as_deref().unwrap_or("<the rocm-sdk-core version>")
            )
        });
    }
    Some(sdk)
}

/// The venv's `rocm-sdk` console script, from its site-packages: the venv is the ancestor
/// whose site-packages it is.
fn rocm_sdk_script(site: &Path, os: Os) -> PathBuf {
    let rules = os.rules();
    let venv = site
        .ancestors()
        .find(|a| rules.site_packages(a).is_some_and(|s| s == site))
        .unwrap_or(site);
    rules.venv_executable(venv, "rocm-sdk")
}

/// `dist_amdgpu_targets` of TheRock's `share/therock/dist_info.json` (`gfx1100;gfx1201`),
/// the list `rocm-sdk targets` prints; read from the file, so that a venv of another OS and one
/// whose Python cannot run here are read the same way, and no code of the venv runs.
fn build_targets(site: &Path) -> Vec<String> {
    let file = site.join("_rocm_sdk_core/share/therock/dist_info.json");
    let Ok(text) = crate::read_text(file) else {
        return Vec::new();
    };
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("dist_amdgpu_targets")?.as_str().map(str::to_string))
        .map(|t| crate::split_list(&t))
        .unwrap_or_default()
}

/// How TheRock's wheels in `site` are split, from their dist-info directories (names are
/// normalized there: `rocm_sdk_libraries_gfx120x_all-7.2.0.dist-info`) and the libraries'
/// import directories (`_rocm_sdk_libraries_gfx120X_all`, case kept).
fn the_rock_packages(site: &Path, version: String) -> crate::rocm::TheRockPackages {
    let mut devices = Vec::new();
    let mut libraries = None;
    for d in sorted_dirs(site) {
        let name = file_name(&d);
        let Some(dist) = name
            .strip_suffix(".dist-info")
            .and_then(|n| n.rsplit_once('-'))
        else {
            continue;
        };
        if let Some(gfx) = dist.0.strip_prefix("rocm_sdk_device_") {
            devices.push(gfx.to_string());
        } else if dist.0.starts_with("rocm_sdk_libraries") {
            libraries = Some(dist.0.replace('_', "-"));
        }
    }
    // The family's spelling as the import directory keeps it (gfx120X, not gfx120x).
    let family_dir = sorted_dirs(site)
        .into_iter()
        .map(|d| file_name(&d))
        .find(|n| n.starts_with("_rocm_sdk_libraries_"));
    let scheme = match (&libraries, &family_dir) {
        (_, Some(n)) if n == "_rocm_sdk_libraries_custom" => "custom",
        (_, Some(_)) => "per-family",
        _ => "multi-arch",
    };
    if scheme == "per-family" {
        libraries = family_dir.map(|n| n.trim_start_matches('_').replace('_', "-"));
    }
    devices.sort_by_cached_key(|d| crate::natural_key(d));
    crate::rocm::TheRockPackages {
        version,
        scheme: scheme.into(),
        libraries,
        devices,
        build_targets: build_targets(site),
    }
}

/// Just enough of LLVM's bitstream format to read a bitcode file's identification block
/// (<https://llvm.org/docs/BitCodeFormat.html>): the producer string (`LLVM15.0.5`) that
/// opens every bitcode file written since LLVM 4.
mod bitcode {
    /// An abbreviation operand.
    #[derive(Clone, Copy)]
    enum Op {
        Literal(u64),
        Fixed(u32),
        Vbr(u32),
        Array,
        Char6,
        Blob,
    }

    struct Bits<'a> {
        data: &'a [u8],
        pos: usize,
    }

    impl Bits<'_> {
        fn fixed(&mut self, width: u32) -> Option<u64> {
            if width > 64 {
                return None;
            }
            let mut v = 0u64;
            for i in 0..width {
                let byte = *self.data.get(self.pos / 8)?;
                v |= u64::from((byte >> (self.pos % 8)) & 1) << i;
                self.pos += 1;
            }
            Some(v)
        }

        fn vbr(&mut self, width: u32) -> Option<u64> {
            if !(2..=32).contains(&width) {
                return None;
            }
            let high = 1u64 << (width - 1);
            let (mut v, mut shift) = (0u64, 0u32);
            loop {
                let chunk = self.fixed(width)?;
                v |= (chunk & (high - 1)).checked_shl(shift)?;
                if chunk & high == 0 {
                    return Some(v);
                }
                shift += width - 1;
                if shift >= 64 {
                    return None;
                }
            }
        }

        fn align32(&mut self) {
            self.pos = self.pos.div_ceil(32) * 32;
        }

        fn scalar(&mut self, op: Op) -> Option<u64> {
            match op {
                Op::Literal(v) => Some(v),
                Op::Fixed(w) => self.fixed(w),
                Op::Vbr(w) => self.vbr(w),
                Op::Char6 => {
                    let c = self.fixed(6)? as u8;
                    Some(u64::from(match c {
                        0..=25 => b'a' + c,
                        26..=51 => b'A' + c - 26,
                        52..=61 => b'0' + c - 52,
                        62 => b'.',
                        _ => b'_',
                    }))
                }
                Op::Array | Op::Blob => None,
            }
        }
    }

    fn define_abbrev(r: &mut Bits) -> Option<Vec<Op>> {
        let n = r.vbr(5)?;
        let mut ops = Vec::new();
        for _ in 0..n.min(64) {
            ops.push(if r.fixed(1)? == 1 {
                Op::Literal(r.vbr(8)?)
            } else {
                match r.fixed(3)? {
                    1 => Op::Fixed(r.vbr(5)? as u32),
                    2 => Op::Vbr(r.vbr(5)? as u32),
                    3 => Op::Array,
                    4 => Op::Char6,
                    5 => Op::Blob,
                    _ => return None,
                }
            });
        }
        Some(ops)
    }

    /// An abbreviated record's values, its code first.
    fn abbreviated(r: &mut Bits, ops: &[Op]) -> Option<Vec<u64>> {
        let mut v = Vec::new();
        let mut i = 0;
        while i < ops.len() {
            match ops[i] {
                Op::Array => {
                    let elem = *ops.get(i + 1)?;
                    for _ in 0..r.vbr(6)?.min(4096) {
                        v.push(r.scalar(elem)?);
                    }
                    i += 1;
                }
                Op::Blob => {
                    let len = r.vbr(6)? as usize;
                    r.align32();
                    for _ in 0..len.min(4096) {
                        v.push(r.fixed(8)?);
                    }
                    r.align32();
                }
                op => v.push(r.scalar(op)?),
            }
            i += 1;
        }
        Some(v)
    }

    /// The producer named by the identification block at the start of `bytes` (the file's
    /// first few dozen bytes are enough), also behind the wrapper header Apple's tools write.
    pub(super) fn producer(bytes: &[u8]) -> Option<String> {
        let mut data = bytes;
        if data.starts_with(&[0xDE, 0xC0, 0x17, 0x0B]) {
            let offset = u32::from_le_bytes(data.get(8..12)?.try_into().ok()?);
            data = data.get(offset as usize..)?;
        }
        let mut r = Bits {
            data: data.strip_prefix(b"BC\xC0\xDE")?,
            pos: 0,
        };
        // At the top level (abbreviation width 2): ENTER_SUBBLOCK (1) IDENTIFICATION_BLOCK (13).
        if r.fixed(2)? != 1 || r.vbr(8)? != 13 {
            return None;
        }
        let width = r.vbr(4)? as u32;
        r.align32();
        r.fixed(32)?;
        let mut abbrevs: Vec<Vec<Op>> = Vec::new();
        let record = loop {
            match r.fixed(width)? {
                2 => abbrevs.push(define_abbrev(&mut r)?),
                3 => {
                    let code = r.vbr(6)?;
                    let n = r.vbr(6)?.min(4096);
                    let mut v = vec![code];
                    for _ in 0..n {
                        v.push(r.vbr(6)?);
                    }
                    if code == 1 {
                        break v;
                    }
                }
                // END_BLOCK without a STRING record, or a nested block: none here.
                0 | 1 => return None,
                id => {
                    let v = abbreviated(&mut r, abbrevs.get(id as usize - 4)?)?;
                    if v.first() == Some(&1) {
                        break v;
                    }
                }
            }
        };
        let text: String = record[1..]
            .iter()
            .map(|&c| u8::try_from(c).ok().filter(u8::is_ascii).map(char::from))
            .collect::<Option<_>>()?;
        Some(text)
    }

    #[cfg(test)]
    mod tests {
        use super::producer;

        /// The first 32 bytes of Debian 12's `ocml.bc` (rocm-device-libs 5.2.3, LLVM 15) and of
        /// a file Debian's clang-19 wrote: the identification block and the module block's start.
        const LLVM15_HEAD: [u8; 32] = [
            0x42, 0x43, 0xc0, 0xde, 0x35, 0x14, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x62, 0x0c,
            0x30, 0x24, 0x4a, 0x59, 0xbe, 0x66, 0x9d, 0xfb, 0xb4, 0x9f, 0x0b, 0x51, 0x80, 0x4c,
            0x01, 0x00, 0x00, 0x00,
        ];
        const LLVM19_HEAD: [u8; 32] = [
            0x42, 0x43, 0xc0, 0xde, 0x35, 0x14, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x62, 0x0c,
            0x30, 0x24, 0x4a, 0x59, 0xbe, 0x66, 0xdd, 0xfb, 0xb5, 0xbf, 0x0b, 0x51, 0x80, 0x4c,
            0x01, 0x00, 0x00, 0x00,
        ];

        #[test]
        fn producer_of_real_llvm_15_and_19_bitcode() {
            assert_eq!(producer(&LLVM15_HEAD).as_deref(), Some("LLVM15.0.5"));
            assert_eq!(producer(&LLVM19_HEAD).as_deref(), Some("LLVM19.1.7"));
        }

        #[test]
        fn producer_behind_the_wrapper_header() {
            let mut wrapped = vec![0xDE, 0xC0, 0x17, 0x0B, 0, 0, 0, 0, 20, 0, 0, 0, 32, 0, 0, 0];
            wrapped.extend([0; 4]);
            wrapped.extend(LLVM15_HEAD);
            assert_eq!(producer(&wrapped).as_deref(), Some("LLVM15.0.5"));
        }

        #[test]
        fn not_bitcode_or_cut_short_says_nothing() {
            assert_eq!(producer(b""), None);
            assert_eq!(producer(b"\x7fELF\x02\x01\x01"), None);
            assert_eq!(producer(&LLVM15_HEAD[..20]), None);
            // A bitcode file from before LLVM 4 opens with the module block, not this one.
            assert_eq!(producer(b"BC\xc0\xde\x21\x0c\x00\x00"), None);
        }

        /// Whatever the bytes, the reader ends without panicking.
        #[test]
        fn arbitrary_bytes_after_the_magic_never_panic() {
            let mut x: u32 = 0x1234_5678;
            for len in 0..400 {
                let mut b = b"BC\xc0\xde".to_vec();
                for _ in 0..len % 97 {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    b.push(x as u8);
                }
                let _ = producer(&b);
            }
        }
    }
}
