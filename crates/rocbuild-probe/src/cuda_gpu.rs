//! Which NVIDIA GPUs this machine has, as CUDA compute capabilities (`8.6`), for a CUDA build's
//! `CUDA_ARCH_LIST`. A cascade like the ROCm one, each step logged: `--cuda-arch` (handled by
//! the planner), `$TORCH_CUDA_ARCH_LIST`, then `nvidia-smi --query-gpu=compute_cap` (drivers
//! from 510 on). Nothing found: the planner falls back to the toolkit's common list.

use crate::gpu::{self, push_unique, run_with_timeout, GpuArchs};
use crate::probe_env::{vars, ProbeEnv};
use crate::Os;

/// `8.6;8.9+PTX`, `7.5 8.0`, `8.6,8.9`: the list as given (CTranslate2 takes `+PTX` too).
fn split_list(s: &str) -> Vec<String> {
    let mut v = Vec::new();
    for t in gpu::split_list(s) {
        push_unique(&mut v, &t);
    }
    v
}

/// `nvidia-smi --query-gpu=compute_cap --format=csv,noheader`: one `major.minor` per GPU.
/// Older drivers print `[N/A]` or an error line: those are not capabilities.
pub fn parse_compute_caps(text: &str) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for l in text.lines().map(str::trim) {
        let ok = l.split_once('.').is_some_and(|(a, b)| {
            !a.is_empty()
                && !b.is_empty()
                && a.bytes().all(|c| c.is_ascii_digit())
                && b.bytes().all(|c| c.is_ascii_digit())
        });
        if ok {
            push_unique(&mut v, l);
        }
    }
    v
}

/// Run the cascade; never fails (empty `archs`: nothing found, `steps` say why).
pub fn detect_cuda_gpu(env: &ProbeEnv, os: Os) -> GpuArchs {
    let mut g = GpuArchs::default();
    if let Some(list) = env.var(vars::TORCH_CUDA_ARCH_LIST) {
        let archs = split_list(list);
        if !archs.is_empty() {
            g.steps
                .push(format!("$TORCH_CUDA_ARCH_LIST: {}", archs.join(";")));
            g.archs = archs;
            g.found_by = "$TORCH_CUDA_ARCH_LIST".into();
            return g;
        }
    }
    g.steps.push("$TORCH_CUDA_ARCH_LIST: not set".into());
    let Some(smi) = env.which("nvidia-smi", os) else {
        g.steps.push("nvidia-smi: not found".into());
        return g;
    };
    let args = ["--query-gpu=compute_cap", "--format=csv,noheader"];
    match run_with_timeout(env, &smi, &args, env.timeout) {
        Ok((out, 0)) => {
            let archs = parse_compute_caps(&out);
            if archs.is_empty() {
                let first = out.lines().next().unwrap_or("").trim();
                g.steps.push(format!(
                    "nvidia-smi: no compute capability in its answer ({first:?}; drivers before 510 cannot report it)"
                ));
            } else {
                g.steps.push(format!("nvidia-smi: {}", archs.join(";")));
                g.archs = archs;
                g.found_by = "nvidia-smi".into();
            }
        }
        Ok((out, code)) => g.steps.push(format!(
            "nvidia-smi: exited with {code} ({})",
            out.lines().next().unwrap_or("").trim()
        )),
        Err(e) => g.steps.push(format!("nvidia-smi: {} {e}", smi.display())),
    }
    g
}

/// What `nvidia-smi` says of the NVIDIA driver: its version and the newest CUDA it runs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CudaDriver {
    /// `580.82.07`
    pub version: String,
    /// `13.0`: a CUDA runtime of this major runs on it (minor-version compatibility); a newer
    /// major does not (cudaErrorInsufficientDriver).
    pub cuda: String,
}

/// `Driver Version: 580.82.07   CUDA Version: 13.0` from `nvidia-smi`'s banner (or the
/// `Driver Version : …` lines of `nvidia-smi -q`).
pub fn parse_driver_banner(text: &str) -> Option<CudaDriver> {
    let after = |key: &str| -> Option<String> {
        let i = text.find(key)? + key.len();
        let rest = text[i..].trim_start_matches([' ', '\t', ':']);
        let v: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        (!v.is_empty() && v.contains('.')).then_some(v)
    };
    Some(CudaDriver {
        version: after("Driver Version")?,
        cuda: after("CUDA Version")?,
    })
}

/// The driver `nvidia-smi` reports; None without nvidia-smi, or when it cannot say.
pub fn detect_cuda_driver(env: &ProbeEnv, os: Os) -> Option<CudaDriver> {
    let smi = env.which("nvidia-smi", os)?;
    match run_with_timeout(env, &smi, &[], env.timeout) {
        Ok((out, 0)) => parse_driver_banner(&out),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_caps() {
        assert_eq!(parse_compute_caps("8.6\n8.9\n8.6\n"), ["8.6", "8.9"]);
        assert!(parse_compute_caps("[N/A]\n").is_empty());
        assert!(
            parse_compute_caps("Field \"compute_cap\" is not a valid field to query.\n").is_empty()
        );
        assert_eq!(split_list("8.6;8.9+PTX 7.5"), ["8.6", "8.9+PTX", "7.5"]);
    }

    #[test]
    fn the_driver_is_read_from_the_banner_and_from_q() {
        let banner =
            "+-----------------------------------------------------------------------------+\n\
            | NVIDIA-SMI 550.54.14    Driver Version: 550.54.14    CUDA Version: 12.4     |\n\
            |-------------------------------+----------------------+----------------------+\n";
        assert_eq!(
            parse_driver_banner(banner),
            Some(CudaDriver {
                version: "550.54.14".into(),
                cuda: "12.4".into()
            })
        );
        let q = "Driver Version                            : 580.82.07\nCUDA Version                              : 13.0\n";
        assert_eq!(parse_driver_banner(q).unwrap().cuda, "13.0");
        assert_eq!(
            parse_driver_banner(
                "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
            ),
            None
        );
    }
}
