//! What a cross build (a Windows venv built on Linux, [`crate::cross`]) changes in the
//! CMake defines.

use std::collections::BTreeMap;

use rocbuild_probe::Machine;

use crate::cross::CrossPlan;

/// The defines a cross build adds or changes: the toolchain file; the venv's Python replaced,
/// wherever a define names it, by the host Python of its version; the target Python's headers
/// and import library for FindPython (both prefixes: `Python3_` and pybind11's `Python_`).
pub fn defines(c: &CrossPlan, machine: &Machine, define: &mut BTreeMap<String, String>) {
    let py = &machine.target.python;
    let target_exe = py.exe.display().to_string();
    for v in define.values_mut() {
        if *v == target_exe {
            *v = c.host_python.display().to_string();
        }
    }
    define.insert(
        "CMAKE_TOOLCHAIN_FILE".into(),
        c.toolchain_file.display().to_string(),
    );
    // A flags variable set on the command line replaces the toolchain's INIT value: the
    // target and the sysroot go in front of it.
    for (var, ours) in [
        ("CMAKE_C_FLAGS", c.compile_flags.clone()),
        ("CMAKE_CXX_FLAGS", format!("{} /EHsc", c.compile_flags)),
        ("CMAKE_EXE_LINKER_FLAGS", c.link_flags.clone()),
        ("CMAKE_SHARED_LINKER_FLAGS", c.link_flags.clone()),
        ("CMAKE_MODULE_LINKER_FLAGS", c.link_flags.clone()),
    ] {
        if let Some(v) = define.get_mut(var) {
            *v = super::compose_user_define(var, Some(&ours), v);
        }
    }
    for prefix in ["Python3", "Python"] {
        define.insert(
            format!("{prefix}_INCLUDE_DIR"),
            py.include.display().to_string(),
        );
        define.insert(
            format!("{prefix}_LIBRARY"),
            c.python_lib.display().to_string(),
        );
        define
            .entry(format!("{prefix}_EXECUTABLE"))
            .or_insert(c.host_python.display().to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocbuild_probe::Os;
    use rocbuild_testkit::machine::cpu_machine;

    fn plan_of() -> CrossPlan {
        CrossPlan {
            toolchain_file: "/c/windows.cmake".into(),
            toolchain: String::new(),
            python_lib: "/c/python311.lib".into(),
            make_python_lib: None,
            runner: None,
            host_python: "/usr/bin/python3.11".into(),
            compile_flags: "--target=x86_64-pc-windows-msvc /winsysroot/sys".into(),
            link_flags: "/winsysroot:/sys".into(),
            sdk_include_link: None,
        }
    }

    /// A flags variable the recipe or the user sets replaces the toolchain's INIT value in
    /// CMake: the target and the sysroot must stay in front of it; the venv's python.exe,
    /// which cannot run here, becomes the host's Python.
    #[test]
    fn flags_keep_the_sysroot_and_the_configure_python_is_the_hosts() {
        let m = cpu_machine(Os::Windows);
        let c = plan_of();
        let mut d = BTreeMap::from([
            ("CMAKE_C_FLAGS".to_string(), "/FIintrin.h".to_string()),
            (
                "CMAKE_SHARED_LINKER_FLAGS".to_string(),
                "/DEBUG".to_string(),
            ),
            (
                "Python3_EXECUTABLE".to_string(),
                m.target.python.exe.display().to_string(),
            ),
        ]);
        defines(&c, &m, &mut d);
        assert_eq!(
            d["CMAKE_C_FLAGS"],
            "--target=x86_64-pc-windows-msvc /winsysroot/sys /FIintrin.h"
        );
        assert_eq!(d["CMAKE_SHARED_LINKER_FLAGS"], "/winsysroot:/sys /DEBUG");
        assert!(
            !d.contains_key("CMAKE_CXX_FLAGS"),
            "the toolchain's INIT serves it"
        );
        assert_eq!(d["Python3_EXECUTABLE"], "/usr/bin/python3.11");
        assert_eq!(d["Python_LIBRARY"], "/c/python311.lib");
        assert_eq!(d["CMAKE_TOOLCHAIN_FILE"], "/c/windows.cmake");
    }
}
