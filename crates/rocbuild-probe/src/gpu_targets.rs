//! GPU target lists as the user names them (`--arch`, `--gpu-arch`, `$PYTORCH_ROCM_ARCH`):
//! one type, one parser, one set of separators, for every command.

use serde::{Deserialize, Serialize};

/// The one splitter of GPU target lists, wherever they come from (`--arch`, `--cuda-arch`,
/// `--gpu-arch`, `PYTORCH_ROCM_ARCH`, `HCC_AMDGPU_TARGET`, CMake's `*_ARCHITECTURES`, a
/// manifest): `;`, `,` and any whitespace separate; empty items are dropped
/// (`"gfx1100; gfx1030,gfx1010\n"` -> three targets).
pub fn split_list(s: &str) -> Vec<String> {
    s.split(|c: char| c == ';' || c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .map(String::from)
        .collect()
}

/// [`split_list`] over several values (an option given more than once).
pub fn split_lists<S: AsRef<str>>(items: &[S]) -> Vec<String> {
    items.iter().flat_map(|s| split_list(s.as_ref())).collect()
}

/// The GPU targets a user named, split once: each item a target id (`gfx1010`,
/// `gfx90a:xnack-`) or a family alias (`gfx110X`), in the order given, each once. Which of
/// them an SDK or a torch can use is decided later (`resolve_archs`, `named_targets`); this
/// is only what was asked.
///
/// Stored in manifests as a list of strings; one written before the list was split when
/// parsed (`["gfx1100;gfx1030"]`) loads split.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Vec<String>", into = "Vec<String>")]
pub struct GpuTargets(Vec<String>);

impl GpuTargets {
    /// The one parser: every value may itself be a list ([`split_list`]'s separators);
    /// repeats are dropped.
    pub fn parse<S: AsRef<str>>(values: &[S]) -> GpuTargets {
        let mut out: Vec<String> = Vec::new();
        for t in split_lists(values) {
            if !out.contains(&t) {
                out.push(t);
            }
        }
        GpuTargets(out)
    }

    /// No target named: the GPUs are to be detected (or none is wanted).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The targets, in the order named.
    pub fn names(&self) -> &[String] {
        &self.0
    }

    /// The targets, or None when none is named (the GPU is then unknown, or to be detected).
    pub fn named(&self) -> Option<&[String]> {
        (!self.is_empty()).then_some(self.0.as_slice())
    }

    /// `self`, or `other` when `self` names nothing (a flag, else its variable).
    pub fn or(self, other: GpuTargets) -> GpuTargets {
        if self.is_empty() {
            other
        } else {
            self
        }
    }
}

impl From<Vec<String>> for GpuTargets {
    fn from(values: Vec<String>) -> GpuTargets {
        GpuTargets::parse(&values)
    }
}

impl From<GpuTargets> for Vec<String> {
    fn from(t: GpuTargets) -> Vec<String> {
        t.0
    }
}

impl std::fmt::Display for GpuTargets {
    /// `gfx1100;gfx1030`, as CMake and `PYTORCH_ROCM_ARCH` write a list.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.join(";"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_separator_the_build_accepts_splits_for_every_command() {
        let t = GpuTargets::parse(&["gfx1100; gfx1030,gfx1010\n", "gfx1201 gfx1100"]);
        assert_eq!(t.names(), ["gfx1100", "gfx1030", "gfx1010", "gfx1201"]);
        assert!(GpuTargets::parse(&["", " ;, "]).is_empty());
        assert_eq!(t.to_string(), "gfx1100;gfx1030;gfx1010;gfx1201");
    }

    #[test]
    fn a_manifest_written_before_the_split_loads_split() {
        let t: GpuTargets = serde_json::from_str(r#"["gfx1100;gfx1030"]"#).unwrap();
        assert_eq!(t.names(), ["gfx1100", "gfx1030"]);
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            r#"["gfx1100","gfx1030"]"#
        );
    }

    #[test]
    fn a_flag_wins_over_its_variable() {
        let env = GpuTargets::parse(&["gfx1030"]);
        assert_eq!(
            GpuTargets::parse(&["gfx1010"]).or(env.clone()).names(),
            ["gfx1010"]
        );
        assert_eq!(GpuTargets::default().or(env).names(), ["gfx1030"]);
    }
}
