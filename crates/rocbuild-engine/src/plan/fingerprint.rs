//! The fingerprint: a hash of everything that decides the result apart from the source
//! commit. A rerun with the same fingerprint and commit, and the files as installed, is a
//! no-op.

use rocbuild_probe::Torch;
use rocbuild_recipe::Recipe;

use super::source::SourcePlan;
use crate::command::Command;
use crate::install::InstallPlan;
use crate::paths::hash_hex;

pub fn of(
    recipe: &Recipe,
    version: &str,
    source: &SourcePlan,
    configure_key: &str,
    install: &InstallPlan,
    verify: Option<&Command>,
    torch: Option<&Torch>,
) -> String {
    let parts = [
        recipe.hash.clone(),
        version.to_string(),
        serde_json::to_string(source).unwrap_or_default(),
        configure_key.to_string(),
        serde_json::to_string(install).unwrap_or_default(),
        serde_json::to_string(&verify).unwrap_or_default(),
        torch
            .map(|t| format!("{}{:?}", t.version, t.git_version))
            .unwrap_or_default(),
    ];
    let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
    hash_hex(&refs)
}

#[cfg(test)]
mod tests {
    use crate::plan::testing::{ctx, recipe};
    use crate::plan::{plan, BuildOptions};
    use rocbuild_probe::Os;
    use rocbuild_testkit::machine::cpu_machine;

    #[test]
    fn a_torch_rebuild_or_a_define_changes_the_fingerprint() {
        let r = recipe("torchcodec");
        let m = cpu_machine(Os::Linux);
        let c = ctx(Os::Linux);
        let base = plan(&r, &m, &BuildOptions::default(), &c)
            .unwrap()
            .fingerprint;
        assert_eq!(
            base,
            plan(&r, &m, &BuildOptions::default(), &c)
                .unwrap()
                .fingerprint
        );
        let mut rebuilt = m.clone();
        rebuilt.target.torch.as_mut().unwrap().git_version = Some("def456".into());
        assert_ne!(
            base,
            plan(&r, &rebuilt, &BuildOptions::default(), &c)
                .unwrap()
                .fingerprint
        );
        let d = BuildOptions {
            defines: vec![("X".into(), "1".into())],
            ..BuildOptions::default()
        };
        assert_ne!(base, plan(&r, &m, &d, &c).unwrap().fingerprint);
        // The number of jobs decides nothing about the result.
        let more = crate::context::Context {
            jobs: 16,
            ..c.clone()
        };
        assert_eq!(
            base,
            plan(&r, &m, &BuildOptions::default(), &more)
                .unwrap()
                .fingerprint
        );
    }
}
