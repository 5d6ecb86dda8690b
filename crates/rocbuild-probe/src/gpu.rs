//! Which GPU architectures this machine has: a cascade of sources, each step logged.

use serde::{Deserialize, Serialize};

/// The GPU architectures found, and how.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuArchs {
    /// Target ids as reported (`gfx1010`, `gfx90a:xnack-`), de-duplicated, in device order.
    pub archs: Vec<String>,
    /// The step that gave them: `--arch`, `$PYTORCH_ROCM_ARCH`, `torch gcnArchName`,
    /// `amdgpu-arch`, `rocm_agent_enumerator`, `rocminfo`, `hipinfo`, `sysfs KFD topology`.
    pub found_by: String,
    /// Each step tried and its result, in order.
    pub steps: Vec<String>,
    /// `$HSA_OVERRIDE_GFX_VERSION`, when set.
    pub hsa_override: Option<String>,
    /// What the override does here (it changes what the runtime reports on Linux; nothing on Windows).
    #[serde(default)]
    pub hsa_override_note: Option<String>,
}
