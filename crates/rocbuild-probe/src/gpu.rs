//! Which GPU architectures this machine has: a cascade of sources, each step logged.
//!
//! Order: `--arch`; `$PYTORCH_ROCM_ARCH`; the torch device's `gcnArchName` (a child Python, only
//! for a ROCm torch, with a timeout: loading a HIP runtime can hang or crash); `amdgpu-arch`,
//! `rocm_agent_enumerator`, `rocminfo` (Linux) or `hipinfo` (Windows); the Linux KFD topology in
//! sysfs. The first step that names a GPU wins. Note that every runtime-based step reports what
//! `HSA_OVERRIDE_GFX_VERSION` makes the runtime say, while sysfs reports the real chip.
//!
//! Names an OS: asking the GPU. Linux has rocminfo, the KFD topology and amdgpu-arch; Windows
//! has hipInfo.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::probe_env::{vars, ProbeEnv};
use crate::Os;

/// The GPU architectures found, and how.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuArchs {
    /// Target ids as reported (`gfx1010`, `gfx90a:xnack-`), de-duplicated, in device order.
    pub archs: Vec<String>,
    /// The step that gave them: `--arch`, `$PYTORCH_ROCM_ARCH`, `torch gcnArchName`,
    /// `amdgpu-arch`, `rocm_agent_enumerator`, `rocminfo`, `hipinfo`, `sysfs KFD topology`
    /// (empty when nothing was found).
    pub found_by: String,
    /// Each step tried and its result, in order.
    pub steps: Vec<String>,
    /// `$HSA_OVERRIDE_GFX_VERSION`, when set.
    pub hsa_override: Option<String>,
    /// What the override does here (it changes what the runtime reports on Linux; nothing on Windows).
    #[serde(default)]
    pub hsa_override_note: Option<String>,
    /// The gfx target the runtime will load code for because of the override (Linux only;
    /// None when unset, invalid, or on Windows where it has no effect).
    #[serde(default)]
    pub hsa_override_gfx: Option<String>,
    /// `torch.cuda.get_arch_list()` of a ROCm torch, when the torch step ran.
    #[serde(default)]
    pub torch_arch_list: Option<Vec<String>>,
}

pub use crate::gpu_targets::split_list;

pub(crate) fn push_unique(v: &mut Vec<String>, s: &str) {
    if !v.iter().any(|x| x == s) {
        v.push(s.to_string());
    }
}

fn is_target_id(s: &str) -> bool {
    s.starts_with("gfx") && s.len() >= 6 && !s.starts_with("gfx000")
}

/// `amdgpu-arch` (LLVM): one target per GPU per line.
pub fn parse_amdgpu_arch(text: &str) -> Vec<String> {
    let mut v = Vec::new();
    for l in text.lines().map(str::trim).filter(|l| is_target_id(l)) {
        push_unique(&mut v, l);
    }
    v
}

/// `rocm_agent_enumerator`: one line per agent; `gfx000` is the CPU.
pub fn parse_rocm_agent_enumerator(text: &str) -> Vec<String> {
    parse_amdgpu_arch(text)
}

/// `rocminfo`: per GPU agent its ISA name (`amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-`), or
/// its `Name:` line when there is no ISA section.
pub fn parse_rocminfo(text: &str) -> Vec<String> {
    let mut v = Vec::new();
    let mut blocks: Vec<Vec<&str>> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t.strip_prefix("Agent ")
            .is_some_and(|n| n.trim().parse::<u32>().is_ok())
        {
            blocks.push(Vec::new());
        } else if let Some(b) = blocks.last_mut() {
            b.push(t);
        }
    }
    for b in blocks {
        let value = |key: &str| {
            b.iter().find_map(|l| {
                l.strip_prefix(key)
                    .map(|r| r.trim_start_matches(':').trim())
            })
        };
        if value("Device Type") != Some("GPU") {
            continue;
        }
        let isa = b.iter().find_map(|l| {
            let i = l.find("amdgcn-amd-amdhsa--")?;
            Some(l[i + "amdgcn-amd-amdhsa--".len()..].trim())
        });
        if let Some(id) =
            isa.or_else(|| value("Name:").or(value("Name")).filter(|n| is_target_id(n)))
        {
            if is_target_id(id) {
                push_unique(&mut v, id);
            }
        }
    }
    v
}

/// Windows `hipinfo` / `hipInfo.exe`: `gcnArchName:   gfx1010:xnack-` per device.
pub fn parse_hipinfo(text: &str) -> Vec<String> {
    let mut v = Vec::new();
    for l in text.lines() {
        if let Some(rest) = l.trim().strip_prefix("gcnArchName") {
            let id = rest.trim_start().trim_start_matches(':').trim();
            if is_target_id(id) {
                push_unique(&mut v, id);
            }
        }
    }
    v
}

/// KFD's `gfx_target_version` (major*10000 + minor*100 + stepping) as a gfx name:
/// 100100 -> gfx1010, 90010 -> gfx90a, 110000 -> gfx1100; 0 (a CPU node) -> None.
pub fn gfx_from_target_version(v: u32) -> Option<String> {
    if v == 0 {
        return None;
    }
    let (major, minor, step) = (v / 10000, (v / 100) % 100, v % 100);
    (minor < 10 && step < 16).then(|| format!("gfx{major}{minor}{step:x}"))
}

/// `HSA_OVERRIDE_GFX_VERSION` ("10.3.0", major.minor.stepping) as a gfx name (gfx1030).
pub fn gfx_from_override(v: &str) -> Option<String> {
    let n: Vec<u32> = v
        .trim()
        .split('.')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    match n[..] {
        [a, b, c] => gfx_from_target_version(a * 10000 + b * 100 + c),
        _ => None,
    }
}

/// GPUs in the KFD topology (`<root>/nodes/*/properties`, line `gfx_target_version N`).
pub fn read_kfd_topology(nodes: &Path) -> Vec<String> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(nodes)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    // Node order is numeric (10 after 9).
    dirs.sort_by_key(|d| {
        d.file_name()
            .and_then(|n| n.to_string_lossy().parse::<u32>().ok())
    });
    let mut v = Vec::new();
    for d in dirs {
        let Ok(text) = crate::read_text(d.join("properties")) else {
            continue;
        };
        let tv = text.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("gfx_target_version"))
                .then(|| w.next()?.parse::<u32>().ok())
                .flatten()
        });
        if let Some(g) = tv.and_then(gfx_from_target_version) {
            push_unique(&mut v, &g);
        }
    }
    v
}

/// What `HSA_OVERRIDE_GFX_VERSION` does on this OS, given the real chips when known.
pub fn explain_hsa_override(value: &str, os: Os, real: &[String]) -> String {
    let Some(as_gfx) = gfx_from_override(value) else {
        return format!(
            "HSA_OVERRIDE_GFX_VERSION={value} is not a version like 10.3.0; the ROCm runtime will ignore or reject it"
        );
    };
    if os == Os::Windows {
        return format!(
            "HSA_OVERRIDE_GFX_VERSION={value} has no effect on Windows: the driver's HIP runtime ignores it, so build for the GPU's real arch, not {as_gfx}"
        );
    }
    let real = if real.is_empty()
        || real
            .iter()
            .all(|r| r.split(':').next() == Some(as_gfx.as_str()))
    {
        String::new()
    } else {
        format!(" The real GPU is {} (sysfs).", real.join(", "))
    };
    format!(
        "HSA_OVERRIDE_GFX_VERSION={value}: the ROCm runtime on Linux reports every GPU as {as_gfx} and loads {as_gfx} code objects on it, so torch, rocminfo and code built here see {as_gfx}.{real} Build for {as_gfx} to run under the override, or unset it and build for the real arch."
    )
}

/// Run `program args` with a timeout; stdout when it exits (any status), or why not.
pub(crate) fn run_with_timeout(
    env: &ProbeEnv,
    program: &Path,
    args: &[&str],
    timeout: Duration,
) -> Result<(String, i32), String> {
    let handle = duct::cmd(program, args)
        .full_env(&env.vars)
        .stdin_null()
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .start()
        .map_err(|e| format!("could not start: {e}"))?;
    match handle.wait_timeout(timeout) {
        Ok(Some(out)) => Ok((
            String::from_utf8_lossy(&out.stdout).into_owned(),
            out.status.code().unwrap_or(-1),
        )),
        Ok(None) => {
            let _ = handle.kill();
            Err(format!("timed out after {} s", timeout.as_secs()))
        }
        Err(e) => Err(format!("failed: {e}")),
    }
}

/// Asks a ROCm torch for its devices' `gcnArchName` and its own arch list; prints nothing
/// and exits 3 when torch is not a ROCm build.
const TORCH_SCRIPT: &str = r#"
import sys
import torch
if not getattr(torch.version, "hip", None):
    sys.exit(3)
# The archs torch was compiled for: get_arch_list() says [] without a GPU, the flags do not.
flags = getattr(getattr(torch, "_C", None), "_cuda_getArchFlags", None)
archs = (flags() or "").split() if flags else torch.cuda.get_arch_list()
print("ARCHLIST " + ";".join(archs))
if len(sys.argv) > 1 and sys.argv[1] == "list-only":
    sys.exit(0)
for i in range(torch.cuda.device_count()):
    print("ARCH " + torch.cuda.get_device_properties(i).gcnArchName)
"#;

/// torch's own arch list from the `ARCHLIST` line of [`TORCH_SCRIPT`] (None when empty).
fn torch_arch_list(out: &str) -> Option<Vec<String>> {
    out.lines()
        .find_map(|l| l.strip_prefix("ARCHLIST"))
        .map(split_list)
        .filter(|l| !l.is_empty())
}

/// What to run the cascade with.
#[derive(Debug, Clone, Default)]
pub struct GpuQuery<'a> {
    /// The user named the GPU targets (`--arch`): the cascade stops at its first step, and
    /// only torch's own arch list is read (the targets themselves stay in the build's options).
    pub named: bool,
    /// The venv's Python, when torch is a ROCm build (the torch step runs only then).
    pub torch_python: Option<&'a Path>,
    /// Directories to look for `amdgpu-arch`, `rocminfo`, `hipinfo` before `$PATH` (the SDKs' bins).
    pub tool_dirs: &'a [PathBuf],
}

/// Run the cascade; never fails (an empty `archs` says nothing was found, `steps` say why).
pub fn detect_gpu(env: &ProbeEnv, os: Os, q: &GpuQuery) -> GpuArchs {
    let mut g = GpuArchs {
        hsa_override: env.var(vars::HSA_OVERRIDE_GFX_VERSION).map(str::to_string),
        ..GpuArchs::default()
    };
    let real = if os == Os::Linux {
        read_kfd_topology(&kfd_nodes(env))
    } else {
        Vec::new()
    };
    if let Some(v) = &g.hsa_override {
        g.hsa_override_note = Some(explain_hsa_override(v, os, &real));
        if os == Os::Linux {
            g.hsa_override_gfx = gfx_from_override(v);
        }
    }
    let done = |g: &mut GpuArchs, by: &str, archs: Vec<String>, detail: String| -> bool {
        if archs.is_empty() {
            g.steps.push(format!("{by}: {detail}"));
            return false;
        }
        g.steps.push(format!("{by}: {}", archs.join(";")));
        g.archs = archs;
        g.found_by = by.to_string();
        true
    };

    if !q.named {
        g.steps.push("--arch: not given".into());
    } else {
        g.steps.push("--arch: given (no detection)".into());
        // Whether torch itself has code for the archs named: its own list (no device needed).
        if let Some(py) = q.torch_python {
            let step = match run_with_timeout(
                env,
                py,
                &["-B", "-c", TORCH_SCRIPT, "list-only"],
                env.timeout,
            ) {
                Ok((out, 0)) => {
                    g.torch_arch_list = torch_arch_list(&out);
                    match &g.torch_arch_list {
                        Some(l) => format!("torch arch list: {}", l.join(";")),
                        None => "torch arch list: torch names none".into(),
                    }
                }
                Ok((_, 3)) => "torch arch list: torch is not a ROCm build".into(),
                Ok((_, code)) => format!("torch arch list: python exited with {code}"),
                Err(e) => format!("torch arch list: {e}"),
            };
            g.steps.push(step);
        }
        return g;
    }
    let env_list = env.pytorch_rocm_arch().names().to_vec();
    if done(&mut g, "$PYTORCH_ROCM_ARCH", env_list, "not set".into()) {
        return g;
    }
    match q.torch_python {
        None => g
            .steps
            .push("torch gcnArchName: skipped (torch is not a ROCm build)".into()),
        Some(py) => match run_with_timeout(env, py, &["-B", "-c", TORCH_SCRIPT], env.timeout) {
            Ok((out, 0)) => {
                let mut archs = Vec::new();
                for l in out.lines() {
                    if let Some(a) = l.strip_prefix("ARCH ") {
                        push_unique(&mut archs, a.trim());
                    }
                }
                g.torch_arch_list = torch_arch_list(&out);
                if done(
                    &mut g,
                    "torch gcnArchName",
                    archs,
                    "torch sees no GPU".into(),
                ) {
                    return g;
                }
            }
            Ok((_, 3)) => g
                .steps
                .push("torch gcnArchName: torch is not a ROCm build".into()),
            Ok((_, code)) => g
                .steps
                .push(format!("torch gcnArchName: python exited with {code}")),
            Err(e) => g.steps.push(format!("torch gcnArchName: {e}")),
        },
    }
    type Parser = fn(&str) -> Vec<String>;
    let tools: &[(&str, &[&str], Parser)] = match os {
        Os::Windows => &[
            ("hipinfo", &[], parse_hipinfo),
            ("hipInfo", &[], parse_hipinfo),
        ],
        Os::Linux => &[
            ("amdgpu-arch", &[], parse_amdgpu_arch),
            ("rocm_agent_enumerator", &[], parse_rocm_agent_enumerator),
            ("rocminfo", &[], parse_rocminfo),
        ],
        Os::Macos => &[],
    };
    for (name, args, parse) in tools {
        let file = format!("{name}{}", os.rules().exe_suffix());
        let path = q
            .tool_dirs
            .iter()
            .map(|d| d.join(&file))
            .find(|p| p.is_file())
            .or_else(|| env.which(name, os));
        let Some(path) = path else {
            g.steps.push(format!("{name}: not found"));
            continue;
        };
        match run_with_timeout(env, &path, args, env.timeout) {
            Ok((out, _)) => {
                if done(
                    &mut g,
                    name,
                    parse(&out),
                    format!("{} reports no GPU", path.display()),
                ) {
                    return g;
                }
            }
            Err(e) => g.steps.push(format!("{name}: {} {e}", path.display())),
        }
    }
    if os == Os::Linux {
        let nodes = kfd_nodes(env);
        let detail = if nodes.is_dir() {
            format!("no GPU node in {}", nodes.display())
        } else {
            format!(
                "{} does not exist (no amdgpu kernel driver)",
                nodes.display()
            )
        };
        done(&mut g, "sysfs KFD topology", real, detail);
    }
    g
}

fn kfd_nodes(env: &ProbeEnv) -> PathBuf {
    env.unix("/sys/class/kfd/kfd/topology/nodes")
}

/// The GPUs of this machine as far as files and the environment tell, for `status` (no
/// process is started): `$PYTORCH_ROCM_ARCH`, else the KFD topology (Linux). Empty when
/// neither says anything.
pub fn gpu_archs_light(env: &ProbeEnv, os: Os) -> Vec<String> {
    let named = env.pytorch_rocm_arch();
    if !named.is_empty() {
        return named.names().to_vec();
    }
    if os == Os::Linux {
        read_kfd_topology(&kfd_nodes(env))
    } else {
        Vec::new()
    }
}
