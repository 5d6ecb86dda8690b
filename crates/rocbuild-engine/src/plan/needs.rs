//! What the recipe needs in the venv before anything is planned: torch, and the Python
//! packages its library imports at run time.

use rocbuild_probe::Machine;
use rocbuild_recipe::Recipe;

use crate::error::{EngineError, Result};

/// torch, when the recipe builds against it: checked first, before a release is chosen.
pub fn torch(recipe: &Recipe, machine: &Machine) -> Result<()> {
    let py = &machine.target.python;
    if recipe.raw.needs.torch && machine.target.torch.is_none() {
        return Err(EngineError::NoTorch {
            site: py.site_packages.display().to_string(),
            recipe: recipe.name().into(),
            python: py.exe.display().to_string(),
        });
    }
    Ok(())
}

/// The Python packages the library imports at run time that the venv lacks, as the recipe
/// names them: checked once the backend is known (a wrong `--arch` or `--rocm` is the first
/// thing to say); [`crate::install::requirements`] installs them or refuses.
pub fn python(recipe: &Recipe, machine: &Machine) -> Vec<String> {
    let py = &machine.target.python;
    recipe
        .raw
        .needs
        .python
        .iter()
        .filter(|d| {
            !py.distributions
                .contains_key(&rocbuild_probe::normalize_dist(d))
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testing::recipe;
    use rocbuild_probe::Os;
    use rocbuild_testkit::machine::cpu_machine;

    #[test]
    fn torch_and_run_time_packages_are_required() {
        let mut m = cpu_machine(Os::Linux);
        assert!(torch(&recipe("torchcodec"), &m).is_ok());
        m.target.torch = None;
        let e = torch(&recipe("torchcodec"), &m).unwrap_err();
        assert!(matches!(e, EngineError::NoTorch { .. }), "{e}");
        let mut m = cpu_machine(Os::Linux);
        m.target.python.distributions.clear();
        assert!(python(&recipe("torchcodec"), &m).is_empty());
        assert!(!python(&recipe("ctranslate2"), &m).is_empty());
    }
}
