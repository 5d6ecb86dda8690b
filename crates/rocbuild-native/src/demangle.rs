//! C++ names as people read them: `c10::foo(int)`, not `_ZN3c103fooEi` or `?foo@c10@@YAHH@Z`.

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Longest name handed to a demangler: real C++ symbols stay far below, and both demanglers
/// recurse on nesting, so a hostile 1 MB name could exhaust the stack.
const MAX_MANGLED: usize = 4096;

/// Demangle an Itanium (`_Z…`, also Mach-O's `__Z…`) or MSVC (`?…`) C++ symbol name.
/// `None` for plain C names and for anything the demanglers reject.
pub fn demangle(name: &str) -> Option<String> {
    if name.len() > MAX_MANGLED {
        return None;
    }
    // ELF versioned spellings (`name@VER`, `name@@VER`) are not part of the mangling.
    let bare = name
        .split('@')
        .next()
        .filter(|_| !name.starts_with('?'))
        .unwrap_or(name);
    catch_unwind(AssertUnwindSafe(|| {
        if let Some(itanium) = bare.strip_prefix('_').filter(|s| s.starts_with("_Z")) {
            itanium_demangle(itanium)
        } else if bare.starts_with("_Z") {
            itanium_demangle(bare)
        } else if name.starts_with('?') {
            msvc_demangle(name)
        } else {
            None
        }
    }))
    .ok()
    .flatten()
}

fn itanium_demangle(s: &str) -> Option<String> {
    let parse = cpp_demangle::ParseOptions::default().recursion_limit(256);
    let sym = cpp_demangle::Symbol::new_with_options(s, &parse).ok()?;
    let opts = cpp_demangle::DemangleOptions::new().recursion_limit(256);
    sym.demangle(&opts).ok().filter(|d| d != s)
}

fn msvc_demangle(s: &str) -> Option<String> {
    // NAME_ONLY would drop the signature, which is what tells two overloads apart.
    let flags = msvc_demangler::DemangleFlags::llvm();
    msvc_demangler::demangle(s, flags).ok().filter(|d| d != s)
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn itanium_msvc_and_c_names() {
        assert_eq!(demangle("_ZN3c103fooEi").as_deref(), Some("c10::foo(int)"));
        // Mach-O adds a leading underscore.
        assert_eq!(demangle("__ZN3c103fooEi").as_deref(), Some("c10::foo(int)"));
        assert_eq!(
            demangle("_ZN3c1013MessageLoggerC1EPKciib").as_deref(),
            Some("c10::MessageLogger::MessageLogger(char const*, int, int, bool)")
        );
        let msvc = demangle("?decref_pyobject@TensorImpl@c10@@UEBAXXZ").unwrap();
        assert!(msvc.contains("c10::TensorImpl::decref_pyobject"), "{msvc}");
        assert_eq!(demangle("foo"), None);
        assert_eq!(demangle("_Zgarbage"), None);
        assert_eq!(demangle(&format!("_Z{}", "N".repeat(100_000))), None);
        assert_eq!(demangle(&format!("_Z{}", "A1_".repeat(1000))), None);
    }
}
