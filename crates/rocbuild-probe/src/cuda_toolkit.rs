//! A CUDA toolkit on disk: where one is (`CUDA_HOME`, `CUDA_PATH`, `/usr/local/cuda`, nvcc on
//! `PATH`), what it is (nvcc's release, the GPU code it can make: `nvcc --list-gpu-code` and
//! `--list-gpu-arch`), which host compilers its `crt/host_config.h` accepts, and the choice of
//! one of this machine's compilers within those limits. The toolkit's own files are the
//! authority: nothing here is a table of CUDA versions.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::probe_env::ProbeEnv;
use crate::tools::{compiler_of, version_of};
use crate::Os;

/// Environment variables the CUDA toolkit probe reads (declared once, here).
pub mod cuda_vars {
    /// A CUDA toolkit root (the convention of NVIDIA's installers and of torch's builder).
    pub const CUDA_HOME: &str = "CUDA_HOME";
    /// The same on Windows (set by NVIDIA's installer).
    pub const CUDA_PATH: &str = "CUDA_PATH";
    /// The host C++ compiler nvcc must use (CMake's own variable): taken as it is, and
    /// refused when the toolkit does not accept it.
    pub const CUDAHOSTCXX: &str = "CUDAHOSTCXX";
    /// The C++ compiler a build uses; nvcc's host compiler when the toolkit accepts it.
    pub const CXX: &str = "CXX";
}

/// The host compiler versions a toolkit accepts, read from its `crt/host_config.h` (the
/// `#if` above each `#error -- unsupported … version!`). Bounds are inclusive; None: no bound.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostLimits {
    pub gcc_min: Option<u32>,
    pub gcc_max: Option<u32>,
    pub clang_min: Option<u32>,
    pub clang_max: Option<u32>,
}

/// `__GNUC__ > 15` -> (">", 15) for `macro`; every comparison of it on the line.
fn comparisons(line: &str, macro_name: &str) -> Vec<(String, u32)> {
    let mut v = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find(macro_name) {
        rest = &rest[i + macro_name.len()..];
        let t = rest.trim_start();
        let op: String = t.chars().take_while(|c| "<>=!".contains(*c)).collect();
        let num: String = t[op.len()..]
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if let (false, Ok(n)) = (op.is_empty(), num.parse::<u32>()) {
            v.push((op, n));
        }
    }
    v
}

/// Applies `op n` (a refusal condition) as a bound: `> 15` -> max 15, `>= 22` -> max 21,
/// `< 3` -> min 3, `<= 5` -> min 6.
fn bound(min: &mut Option<u32>, max: &mut Option<u32>, op: &str, n: u32) {
    match op {
        ">" => *max = Some(n),
        ">=" => *max = Some(n.saturating_sub(1)),
        "<" => *min = Some((*min).map_or(n, |m| m.max(n))),
        "<=" => *min = Some(n + 1),
        _ => {}
    }
}

impl HostLimits {
    /// Reads the limits from the text of `crt/host_config.h`.
    pub fn parse(host_config: &str) -> HostLimits {
        let mut l = HostLimits::default();
        let mut condition = String::new();
        for line in host_config.lines() {
            let t = line.trim_start();
            if t.starts_with("#if") || t.starts_with("#elif") {
                condition = t.to_string();
            } else if t.starts_with("#error") {
                if t.contains("unsupported GNU version") {
                    for (op, n) in comparisons(&condition, "__GNUC__") {
                        bound(&mut l.gcc_min, &mut l.gcc_max, &op, n);
                    }
                } else if t.contains("unsupported clang version") {
                    // `(__clang_major__ == 3) && (__clang_minor__ < 3)` is a minor bound.
                    for (op, n) in comparisons(&condition, "__clang_major__") {
                        if op != "==" {
                            bound(&mut l.clang_min, &mut l.clang_max, &op, n);
                        }
                    }
                }
            }
        }
        l
    }

    /// Why nvcc refuses `family major`, or None when it accepts it.
    pub fn refuses(&self, family: &str, major: u32) -> Option<String> {
        let (min, max) = match family {
            "gcc" => (self.gcc_min, self.gcc_max),
            "clang" => (self.clang_min, self.clang_max),
            other => {
                return Some(format!(
                    "{other} is not a host compiler nvcc accepts on Linux"
                ))
            }
        };
        let range = match (min, max) {
            (Some(a), Some(b)) => format!("{a} to {b}"),
            (None, Some(b)) => format!("up to {b}"),
            (Some(a), None) => format!("{a} or later"),
            (None, None) => "any".into(),
        };
        let out = min.is_some_and(|m| major < m) || max.is_some_and(|m| major > m);
        out.then(|| {
            format!("{family} {major} is outside the {family} versions this nvcc accepts ({range})")
        })
    }
}

/// A CUDA toolkit root as the probe read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudaToolkit {
    pub root: PathBuf,
    pub nvcc: PathBuf,
    /// `13.2`.
    pub version: String,
    /// `13.2.86`, when nvcc says it.
    pub release: Option<String>,
    /// The real architectures nvcc makes SASS for (`sm_86` -> 86).
    pub sass: Vec<u32>,
    /// The virtual architectures it makes PTX for (`compute_90` -> 90).
    pub ptx: Vec<u32>,
    pub host: HostLimits,
}

/// `Cuda compilation tools, release 13.2, V13.2.86` -> ("13.2", Some("13.2.86")).
pub fn nvcc_release(version_text: &str) -> Option<(String, Option<String>)> {
    let line = version_text.lines().find(|l| l.contains(", release "))?;
    let (_, rest) = line.split_once(", release ")?;
    let (v, tail) = rest.split_once(',').unwrap_or((rest, ""));
    let release = tail.trim().strip_prefix('V').map(str::to_string);
    Some((v.trim().to_string(), release))
}

/// `sm_75\nsm_80\n…` (or `compute_…`) -> [75, 80, …]; other lines are ignored.
pub fn gpu_codes(list: &str, prefix: &str) -> Vec<u32> {
    let mut v: Vec<u32> = list
        .split_whitespace()
        .filter_map(|w| w.strip_prefix(prefix)?.parse().ok())
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn nvcc_output(nvcc: &Path, arg: &str) -> Result<String, String> {
    let out = std::process::Command::new(nvcc)
        .arg(arg)
        .output()
        .map_err(|e| format!("cannot run {} {arg}: {e}", nvcc.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} {arg} failed ({}): {}",
            nvcc.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Reads the toolkit at `root` by asking its nvcc; an error says what is missing or broken.
pub fn read_cuda_toolkit(root: &Path) -> Result<CudaToolkit, String> {
    let exe = format!("nvcc{}", Os::current().rules().exe_suffix());
    let nvcc = root.join("bin").join(&exe);
    if !nvcc.is_file() {
        return Err(format!("{} has no bin/{exe}", root.display()));
    }
    let text = nvcc_output(&nvcc, "--version")?;
    let (version, release) = nvcc_release(&text).ok_or_else(|| {
        format!(
            "{} --version says no release: {}",
            nvcc.display(),
            text.trim()
        )
    })?;
    let sass = gpu_codes(&nvcc_output(&nvcc, "--list-gpu-code")?, "sm_");
    let ptx = gpu_codes(&nvcc_output(&nvcc, "--list-gpu-arch")?, "compute_");
    let host_config = [
        "include/crt/host_config.h",
        "targets/x86_64-linux/include/crt/host_config.h",
    ]
    .iter()
    .find_map(|p| crate::read_text(root.join(p)).ok())
    .unwrap_or_default();
    Ok(CudaToolkit {
        root: root.to_path_buf(),
        nvcc,
        version,
        release,
        sass,
        ptx,
        host: HostLimits::parse(&host_config),
    })
}

/// The system toolkits, in the order they are trusted: `CUDA_HOME`, `CUDA_PATH`,
/// `/usr/local/cuda`, then the one holding the `nvcc` on `PATH`. Each a root with `bin/nvcc`.
pub fn system_cuda_roots(env: &ProbeEnv) -> Vec<(PathBuf, String)> {
    let mut v: Vec<(PathBuf, String)> = Vec::new();
    let mut push = |p: PathBuf, from: String| {
        if p.join("bin").join("nvcc").is_file() && !v.iter().any(|(q, _)| *q == p) {
            v.push((p, from));
        }
    };
    for var in [cuda_vars::CUDA_HOME, cuda_vars::CUDA_PATH] {
        if let Some(p) = env.var(var) {
            push(PathBuf::from(p), format!("${var}"));
        }
    }
    push(env.fs_root.join("usr/local/cuda"), "/usr/local/cuda".into());
    if let Some(path) = env.var(crate::vars::PATH) {
        for d in std::env::split_paths(path) {
            if let Some(root) = d
                .join("nvcc")
                .is_file()
                .then(|| d.parent().map(Path::to_path_buf))
                .flatten()
            {
                push(root, "nvcc on PATH".into());
            }
        }
    }
    v
}

/// The CUDA toolkit a build uses, as found and read before planning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudaFound {
    pub toolkit: CudaToolkit,
    /// `$CUDA_HOME`, `/usr/local/cuda`, `nvcc on PATH`, or `the package index`.
    pub from: String,
    /// The wheels it was assembled from (empty for a system toolkit), one line each.
    #[serde(default)]
    pub wheels: Vec<String>,
    /// The host compiler nvcc accepts, when this machine has one.
    #[serde(default)]
    pub host: Option<HostCompiler>,
    /// Each compiler looked at and why nvcc refuses it (when `host` is None).
    #[serde(default)]
    pub host_refused: Vec<String>,
}

/// The host compiler nvcc will use, and why that one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostCompiler {
    pub path: PathBuf,
    /// `gcc 12.2.0`.
    pub describe: String,
    pub why: String,
}

/// A compiler that might be nvcc's host compiler: its path, where it came from and its
/// `--version` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCandidate {
    pub path: PathBuf,
    pub from: String,
    pub version_line: Option<String>,
}

/// This machine's C++ compilers, in the order they are preferred: `$CUDAHOSTCXX` alone when
/// set (the user's explicit choice), else `$CXX`, `c++`, `g++`, then every versioned `g++-N`
/// and `clang++-N` on `PATH`, newest first.
pub fn host_candidates(env: &ProbeEnv) -> Vec<HostCandidate> {
    let cand = |path: PathBuf, from: String| HostCandidate {
        version_line: version_of(&path, "--version"),
        path,
        from,
    };
    let which = |n: &str| {
        let paths = env.var(crate::vars::PATH).map(std::env::split_paths)?;
        paths.map(|d| d.join(n)).find(|p| p.is_file())
    };
    if let Some(h) = env.var(cuda_vars::CUDAHOSTCXX) {
        let p = which(h).unwrap_or_else(|| PathBuf::from(h));
        return vec![cand(p, "$CUDAHOSTCXX".into())];
    }
    let mut v: Vec<HostCandidate> = Vec::new();
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut add = |p: PathBuf, from: String, v: &mut Vec<HostCandidate>| {
        let real = std::fs::canonicalize(&p).unwrap_or_else(|_| p.clone());
        if !seen.contains(&real) {
            seen.push(real);
            v.push(cand(p, from));
        }
    };
    if let Some(p) = env
        .var(cuda_vars::CXX)
        .and_then(|c| which(c).or_else(|| Some(PathBuf::from(c))))
    {
        add(p, "$CXX".into(), &mut v);
    }
    for n in ["c++", "g++"] {
        if let Some(p) = which(n) {
            add(p, format!("{n} on PATH"), &mut v);
        }
    }
    let mut versioned: Vec<(u32, PathBuf, String)> = Vec::new();
    for d in env
        .var(crate::vars::PATH)
        .map(std::env::split_paths)
        .into_iter()
        .flatten()
    {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let major = ["g++-", "clang++-"]
                .iter()
                .find_map(|p| name.strip_prefix(p)?.parse::<u32>().ok());
            if let Some(m) = major {
                versioned.push((m, e.path(), format!("{name} on PATH")));
            }
        }
    }
    versioned.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, p, from) in versioned {
        add(p, from, &mut v);
    }
    v
}

/// The first candidate this toolkit accepts; else every candidate with why it was refused.
pub fn choose_host_compiler(
    limits: &HostLimits,
    candidates: &[HostCandidate],
) -> Result<HostCompiler, Vec<String>> {
    let mut refused = Vec::new();
    for c in candidates {
        let Some((family, version)) = c.version_line.as_deref().and_then(compiler_of) else {
            let why = match &c.version_line {
                Some(l) => format!("not a compiler nvcc knows (its --version says `{l}`)"),
                None if !c.path.exists() => "does not exist".to_string(),
                None => "did not run with --version".to_string(),
            };
            refused.push(format!("{} ({}): {why}", c.path.display(), c.from));
            continue;
        };
        let major: u32 = version
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or(0);
        match limits.refuses(family, major) {
            None => {
                return Ok(HostCompiler {
                    path: c.path.clone(),
                    describe: format!("{family} {version}"),
                    why: format!(
                        "{} ({}), within the host compilers this nvcc's crt/host_config.h accepts",
                        c.path.display(),
                        c.from
                    ),
                })
            }
            Some(why) => refused.push(format!("{} ({}): {why}", c.path.display(), c.from)),
        }
    }
    Err(refused)
}

/// `8.6` / `86` / `sm_86` / `9.0+PTX` / `12.0a` -> (86, ptx, suffix); None for a name that
/// is none of these. `Common`, `All` and `Auto` (CTranslate2's keywords) are not arches.
pub fn parse_cuda_arch(s: &str) -> Option<(u32, bool, String)> {
    let t = s.trim();
    let (t, ptx) = match t.strip_suffix("+PTX").or_else(|| t.strip_suffix("+ptx")) {
        Some(x) => (x, true),
        None => (t, false),
    };
    let t = t
        .strip_prefix("sm_")
        .or_else(|| t.strip_prefix("compute_"))
        .unwrap_or(t);
    let suffix: String = t
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    let t = &t[..t.len() - suffix.len()];
    let digits = t.replace('.', "");
    let n: u32 = (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()?;
    // `8.6` and `86` mean the same; a dotted form needs one digit after the dot.
    if t.contains('.') && t.split('.').nth(1).map(str::len) != Some(1) {
        return None;
    }
    Some((n, ptx, suffix.chars().rev().collect()))
}

/// `86` -> `8.6`, `120` -> `12.0`.
pub fn dotted_arch(n: u32) -> String {
    format!("{}.{}", n / 10, n % 10)
}

/// Each arch asked that this toolkit cannot compile for, with why; empty: all fine.
pub fn unknown_cuda_archs(toolkit: &CudaToolkit, asked: &[String]) -> Vec<String> {
    let mut bad = Vec::new();
    for a in asked {
        if ["common", "all", "auto"].contains(&a.to_ascii_lowercase().as_str()) {
            continue;
        }
        match parse_cuda_arch(a) {
            None => bad.push(format!(
                "`{a}` is not a CUDA compute capability (8.6, 9.0+PTX, sm_120)"
            )),
            Some((n, ptx, _))
                if !toolkit.sass.contains(&n) || (ptx && !toolkit.ptx.contains(&n)) =>
            {
                bad.push(format!(
                    "CUDA {} cannot compile for {} (sm_{n}): not in `nvcc --list-gpu-code`",
                    toolkit.version,
                    dotted_arch(n)
                ))
            }
            Some(_) => {}
        }
    }
    bad
}

#[cfg(test)]
mod tests {
    use super::*;

    const CUDA_13_2: &str = "#if defined(__GNUC__)\n\n#if __GNUC__ > 15\n\n#error -- unsupported GNU version! gcc versions later than 15 are not supported!\n#endif\n#if defined(__HORIZON__)\n#if (__clang_major__ >= 22) || (__clang_major__ < 3)\n#error -- unsupported HOS clang version!\n#endif\n#endif\n#if defined(__clang__) && !defined(__APPLE__)\n#if (__clang_major__ >= 22) || (__clang_major__ < 3) || ((__clang_major__ == 3) &&  (__clang_minor__ < 3))\n#error -- unsupported clang version! clang version must be less than 22 and greater than 3.2 .\n#endif\n#endif\n";

    #[test]
    fn host_limits_are_read_from_the_error_conditions() {
        let l = HostLimits::parse(CUDA_13_2);
        assert_eq!(
            l,
            HostLimits {
                gcc_min: None,
                gcc_max: Some(15),
                clang_min: Some(3),
                clang_max: Some(21),
            }
        );
        assert!(l.refuses("gcc", 12).is_none());
        assert!(l.refuses("clang", 21).is_none());
        let why = l.refuses("gcc", 16).unwrap();
        assert_eq!(
            why,
            "gcc 16 is outside the gcc versions this nvcc accepts (up to 15)"
        );
        assert!(l.refuses("clang", 22).unwrap().contains("3 to 21"));
        assert!(l.refuses("intel", 2025).is_some());
    }

    fn cand(p: &str, line: &str) -> HostCandidate {
        HostCandidate {
            path: PathBuf::from(p),
            from: "test".into(),
            version_line: Some(line.into()),
        }
    }

    #[test]
    fn the_first_accepted_compiler_wins_and_a_refusal_lists_each_with_why() {
        let l = HostLimits::parse(CUDA_13_2);
        let gcc16 = cand("/usr/bin/g++", "g++ (GCC) 16.1.0");
        let clang22 = cand("/usr/bin/clang++-22", "Debian clang version 22.1.0");
        let gcc14 = cand("/usr/bin/g++-14", "g++-14 (Debian 14.2.0-19) 14.2.0");
        let got = choose_host_compiler(&l, &[gcc16.clone(), gcc14]).unwrap();
        assert_eq!(got.path, PathBuf::from("/usr/bin/g++-14"));
        assert_eq!(got.describe, "gcc 14.2.0");
        let refused = choose_host_compiler(&l, &[gcc16, clang22]).unwrap_err();
        assert_eq!(refused.len(), 2);
        assert!(refused[0].contains("gcc 16 is outside"), "{refused:?}");
        assert!(refused[1].contains("clang 22 is outside"), "{refused:?}");
    }

    #[test]
    fn nvcc_says_its_release_and_codes() {
        let v = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.2, V13.2.86\nBuild cuda_13.2.r13.2/compiler.37953736_0\n";
        assert_eq!(
            nvcc_release(v),
            Some(("13.2".into(), Some("13.2.86".into())))
        );
        assert_eq!(
            gpu_codes("sm_75\nsm_120\nsm_86\nsm_90a\n", "sm_"),
            vec![75, 86, 120]
        );
    }

    #[test]
    fn cuda_arch_names() {
        assert_eq!(parse_cuda_arch("8.6"), Some((86, false, String::new())));
        assert_eq!(parse_cuda_arch("9.0+PTX"), Some((90, true, String::new())));
        assert_eq!(parse_cuda_arch("sm_120"), Some((120, false, String::new())));
        assert_eq!(parse_cuda_arch("12.0a"), Some((120, false, "a".into())));
        assert_eq!(parse_cuda_arch("8.65"), None);
        assert_eq!(parse_cuda_arch("gfx1010"), None);
        let t = CudaToolkit {
            root: PathBuf::new(),
            nvcc: PathBuf::new(),
            version: "13.2".into(),
            release: None,
            sass: vec![75, 80, 86, 90, 120],
            ptx: vec![75, 80, 86, 90, 120],
            host: HostLimits::default(),
        };
        let asked: Vec<String> = ["7.0", "8.6", "9.0+PTX", "Common", "x"]
            .map(String::from)
            .into();
        let bad = unknown_cuda_archs(&t, &asked);
        assert_eq!(bad.len(), 2, "{bad:?}");
        assert!(bad[0].contains("cannot compile for 7.0 (sm_70)"), "{bad:?}");
    }
}
