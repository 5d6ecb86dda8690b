//! `{name.field}` placeholders in recipe strings.
//!
//! A placeholder is `{` + a name made of lowercase letters, digits, `.`, `-` and `_` + `}`.
//! `{{` and `}}` stand for literal braces (Python snippets need them for dicts and f-strings).
//! The set of names is closed: an unknown one is an error at load time, not at build time.

use std::collections::BTreeMap;

/// Every placeholder a recipe may use, with what it means.
pub const VARIABLES: &[(&str, &str)] = &[
    ("name", "the recipe name"),
    ("version", "the release being built"),
    ("os", "linux, macos or windows"),
    ("flavor", "the torch flavor: cpu, cuda or rocm"),
    ("jobs", "parallel build jobs"),
    ("source", "the source checkout directory"),
    ("build", "the CMake build directory"),
    (
        "prefix",
        "the CMake install prefix (staging, never the venv)",
    ),
    (
        "tools",
        "directory holding the recipe's python-build requirements",
    ),
    ("python.exe", "the venv's Python interpreter"),
    ("python.version", "Python major.minor, such as 3.11"),
    ("python.site", "the venv's site-packages"),
    ("python.include", "Python's C header directory"),
    (
        "python.ext-suffix",
        "extension module suffix, such as .cpython-311-x86_64-linux-gnu.so",
    ),
    ("torch.version", "the installed torch version"),
    ("torch.dir", "torch's package directory"),
    ("torch.lib", "torch's library directory"),
    ("torch.include", "torch's header directory"),
    ("torch.cmake", "torch's CMake prefix path (share/cmake)"),
    (
        "torch.hip",
        "the HIP version a ROCm torch was built with (6.4.43482)",
    ),
    (
        "torch.hip-short",
        "its major and minor run together (64), as per-ROCm library names use them",
    ),
    ("ffmpeg.major", "FFmpeg major version (libavutil 58 -> 6)"),
    ("ffmpeg.version", "FFmpeg's libavutil version"),
    ("ffmpeg.lib", "FFmpeg's library directory"),
    ("ffmpeg.include", "FFmpeg's header directory"),
    (
        "ffmpeg.runtime",
        "where FFmpeg's shared libraries are at run time (Windows: its bin directory)",
    ),
    ("cuda.home", "the CUDA toolkit root"),
    ("rocm.path", "the ROCm root"),
    (
        "backend",
        "the compute backend being built: cpu, rocm or cuda",
    ),
    (
        "rocm.version",
        "the chosen ROCm SDK's version, such as 6.2.4",
    ),
    ("rocm.bin", "the chosen ROCm SDK's bin directory"),
    (
        "rocm.llvm",
        "the chosen ROCm SDK's LLVM root (HIP_CLANG_ROOT)",
    ),
    (
        "rocm.device-lib",
        "the chosen ROCm SDK's device-library (bitcode) directory",
    ),
    ("rocm.clang", "the chosen ROCm SDK's C compiler"),
    ("rocm.clangxx", "the chosen ROCm SDK's C++/HIP compiler"),
    (
        "gpu.archs",
        "the GPU architectures to build for, `;`-separated (gfx1100;gfx1030)",
    ),
    (
        "cuda.archs",
        "the CUDA architectures to build for, `;`-separated (8.6;8.9)",
    ),
    (
        "cuda.cmake-archs",
        "the same as CMAKE_CUDA_ARCHITECTURES takes them: 8.6 -> 86-real (SASS only), 9.0+PTX -> 90 (SASS and PTX)",
    ),
    (
        "cuda.sm",
        "the same as compute-capability numbers, `;`-separated (8.6;9.0+PTX -> 86;90), for projects that choose PTX themselves",
    ),
    (
        "cuda.findcuda-archs",
        "the archs CMake's old FindCUDA can name (one-digit majors: 8.6;9.0), for CUDA_ARCH_LIST-style options",
    ),
    (
        "cuda.findcuda-gencode",
        "nvcc -gencode flags for the others (12.0 and later), `;`-separated, for CUDA_NVCC_FLAGS",
    ),
    (
        "cuda.version",
        "the CUDA toolkit's version as its nvcc says it (13.2)",
    ),
    (
        "cuda.version-short",
        "its major and minor run together (132), as per-CUDA library names use them",
    ),
    (
        "mkl.root",
        "Intel oneAPI MKL's root (include/mkl.h), when found and used (`[with.mkl]`)",
    ),
];

/// One placeholder found in a string: its name and byte range within the string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholder {
    pub name: String,
    pub range: std::ops::Range<usize>,
}

/// Why a template string could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateSyntaxError {
    pub offset: usize,
    pub message: String,
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-' | '_')
}

/// The placeholders in `s`, in order.
pub fn placeholders(s: &str) -> Result<Vec<Placeholder>, TemplateSyntaxError> {
    let mut out = Vec::new();
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' if bytes.get(i + 1) == Some(&b'{') => i += 2,
            b'}' if bytes.get(i + 1) == Some(&b'}') => i += 2,
            b'{' => {
                let rest = &s[i + 1..];
                let Some(end) = rest.find('}') else {
                    return Err(TemplateSyntaxError {
                        offset: i,
                        message: "unclosed `{` (write `{{` for a literal brace)".into(),
                    });
                };
                let name = &rest[..end];
                if name.is_empty() || !name.chars().all(is_name_char) {
                    return Err(TemplateSyntaxError {
                        offset: i,
                        message: format!(
                            "`{{{name}}}` is not a placeholder (write `{{{{` and `}}}}` for literal braces)"
                        ),
                    });
                }
                out.push(Placeholder {
                    name: name.to_string(),
                    range: i..i + end + 2,
                });
                i += end + 2;
            }
            _ => i += 1,
        }
    }
    Ok(out)
}

/// Expand `s` with `vars`. Returns the name of the first placeholder without a value.
pub fn expand(s: &str, vars: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut last = 0;
    let found = placeholders(s).map_err(|e| e.message)?;
    for p in found {
        out.push_str(&unescape(&s[last..p.range.start]));
        match vars.get(&p.name) {
            Some(v) => out.push_str(v),
            None => return Err(p.name),
        }
        last = p.range.end;
    }
    out.push_str(&unescape(&s[last..]));
    Ok(out)
}

fn unescape(s: &str) -> String {
    s.replace("{{", "{").replace("}}", "}")
}

pub fn is_known(name: &str) -> bool {
    VARIABLES.iter().any(|(n, _)| *n == name) || library_variable(name).is_some()
}

/// `lib.NAME.include` / `lib.NAME.dir` / `lib.NAME.bin`: where a `[[needs.library]]` NAME was
/// found (the include directory its first header is in, the directory of its library, and the
/// `bin` beside that, where Windows keeps DLLs); an optional one only when it is used
/// (`[with.NAME]`).
pub fn library_variable(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix("lib.")?;
    let (lib, what) = rest.rsplit_once('.')?;
    (!lib.is_empty() && matches!(what, "include" | "dir" | "bin")).then_some((lib, what))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_directories_are_variables() {
        assert!(is_known("lib.dnnl.include") && is_known("lib.dnnl.dir"));
        assert_eq!(library_variable("lib.dnnl.dir"), Some(("dnnl", "dir")));
        assert!(!is_known("lib.dnnl.root") && !is_known("lib..dir") && !is_known("lib.dir"));
    }

    #[test]
    fn finds_placeholders_and_skips_escapes() {
        let p = placeholders("a {torch.lib} {{x}} {ffmpeg.major}").unwrap();
        let names: Vec<_> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["torch.lib", "ffmpeg.major"]);
        assert_eq!(p[0].range, 2..13);
    }

    #[test]
    fn expands_and_unescapes() {
        let vars = BTreeMap::from([("version".to_string(), "0.9.1".to_string())]);
        assert_eq!(expand("v{version} {{}}", &vars).unwrap(), "v0.9.1 {}");
        assert_eq!(expand("{nope}", &vars).unwrap_err(), "nope");
    }

    #[test]
    fn rejects_non_placeholder_braces() {
        assert!(placeholders("d = {'a': 1}").is_err());
        assert!(placeholders("open {").is_err());
    }
}
