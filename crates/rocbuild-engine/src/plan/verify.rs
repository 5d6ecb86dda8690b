//! The verification: the recipe's snippet run by the venv's Python in a fresh interpreter
//! with neither LD_LIBRARY_PATH nor PYTHONPATH nor bytecode writing (so what it proves holds
//! for the user, and a failure leaves the venv untouched).

use std::collections::BTreeMap;

use rocbuild_probe::Machine;
use rocbuild_recipe::Resolved;

use crate::command::Command;
use crate::error::Result;
use crate::vars::expand;

pub fn plan(
    machine: &Machine,
    resolved: &Resolved,
    vars: &BTreeMap<String, String>,
) -> Result<Option<Command>> {
    let Some(snippet) = &resolved.verify else {
        return Ok(None);
    };
    // `-B -s` as well as the variables: a Python with a `._pth` file (the embeddable CPython
    // of a Windows app) ignores every PYTHON* variable, and its `.pth` files (setuptools'
    // `_distutils_hack`) would leave bytecode in the venv.
    let mut c = Command::new(&machine.target.python.exe).args([
        "-B".to_string(),
        "-s".into(),
        "-c".into(),
        expand(snippet, vars)?,
    ]);
    c.env.insert("PYTHONDONTWRITEBYTECODE".into(), "1".into());
    c.env.insert("PYTHONNOUSERSITE".into(), "1".into());
    c.env_remove = vec!["LD_LIBRARY_PATH".into(), "PYTHONPATH".into()];
    // `python -c` puts the working directory first on sys.path: run in the venv's root, never
    // where the user happens to be (a stray `msvcrt.py` or `numpy/` there would be imported).
    c.cwd = Some(machine.target.venv.root.clone());
    Ok(Some(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocbuild_probe::Os;
    use rocbuild_testkit::machine::cpu_machine;

    #[test]
    fn verification_runs_clean() {
        let m = cpu_machine(Os::Linux);
        assert!(plan(&m, &Resolved::default(), &BTreeMap::new())
            .unwrap()
            .is_none());
        let r = Resolved {
            verify: Some("import {name}".into()),
            ..Resolved::default()
        };
        let vars = BTreeMap::from([("name".to_string(), "torchcodec".to_string())]);
        let c = plan(&m, &r, &vars).unwrap().unwrap();
        assert_eq!(c.args, ["-B", "-s", "-c", "import torchcodec"]);
        assert_eq!(c.env["PYTHONDONTWRITEBYTECODE"], "1");
        assert!(c.env_remove.contains(&"LD_LIBRARY_PATH".to_string()));
        assert_eq!(c.cwd.as_ref(), Some(&m.target.venv.root));
    }
}
