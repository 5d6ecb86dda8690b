//! CUDA libraries a binary loads by name at run time (`dlopen("libcublas.so.12")`,
//! `LoadLibrary("cublas64_12.dll")`) rather than through DT_NEEDED or its import table.
//! CTranslate2's wheels do this for cuBLAS and cuDNN: `import ctranslate2` works and the CPU
//! path runs, and only the first CUDA call fails, with "Library libcublas.so.12 is not found or
//! cannot be loaded". The names are read from the file's bytes (the string the program passes
//! to the loader), and resolved with the loader's own search from that file
//! ([`closure_with_dlopened`]), as a dependency of it.

use std::path::{Path, PathBuf};

use crate::closure::{Closure, FileSystem, SearchContext};
use crate::{Binary, NativeError};

/// The CUDA toolkit libraries (`lib<name>.so.N`, `<name>64_N.dll`) a package may load by name.
/// The driver (`libcuda.so.1`, `nvcuda.dll`) is not among them: it comes with the GPU's driver,
/// not with any wheel, and doctor says where there is none.
const CUDA_LIBRARIES: &[&str] = &[
    "cublas",
    "cublasLt",
    "cudart",
    "cudnn",
    "cufft",
    "curand",
    "cusolver",
    "cusparse",
    "nvrtc",
    "nvJitLink",
];

/// `cublas`, `cudnn_ops` (cuDNN's sub-libraries): a CUDA toolkit library's base name.
fn is_cuda_library(base: &str) -> bool {
    CUDA_LIBRARIES.contains(&base)
        || base.strip_prefix("cudnn_").is_some_and(|s| {
            !s.is_empty() && s.bytes().all(|c| c.is_ascii_lowercase() || c == b'_')
        })
}

/// The CUDA major a toolkit library's name says (`libcublas.so.12` -> 12, `cudart64_13.dll`
/// -> 13); None for other libraries and for cuDNN, whose major is its own.
pub fn cuda_library_major(name: &str) -> Option<u32> {
    let l = rocbuild_platform::libname::parse(name)?;
    if !l.is_cuda_form(name) || l.base.starts_with("cudnn") || !is_cuda_library(l.base) {
        return None;
    }
    l.major()
}

/// The versioned CUDA library names in `bytes`, sorted and unique: ELF sonames
/// (`libcublas.so.12`, `libcudnn_ops.so.9`) and Windows DLL names (`cublas64_12.dll`).
pub fn cuda_library_names(bytes: &[u8]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for at in memchr::memmem::find_iter(bytes, b".so.") {
        if let Some(name) = elf_name_ending_at(bytes, at) {
            out.push(name);
        }
    }
    for at in memchr::memmem::find_iter(bytes, b".dll") {
        if let Some(name) = dll_name_ending_at(bytes, at) {
            out.push(name);
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The start of the identifier (`[A-Za-z0-9_]*`) that ends just before `end`.
fn word_start(bytes: &[u8], end: usize) -> usize {
    let mut s = end;
    while s > 0 && (bytes[s - 1].is_ascii_alphanumeric() || bytes[s - 1] == b'_') {
        s -= 1;
    }
    s
}

/// Digits from `at`: their end.
fn digits_end(bytes: &[u8], at: usize) -> usize {
    let mut e = at;
    while e < bytes.len() && bytes[e].is_ascii_digit() {
        e += 1;
    }
    e
}

/// `lib<base>.so.<major>` around the `.so.` at `dot`, when `<base>` is a CUDA library and the
/// name stands alone (not part of a longer path or word).
fn elf_name_ending_at(bytes: &[u8], dot: usize) -> Option<String> {
    let start = word_start(bytes, dot);
    let base = bytes[start..dot].strip_prefix(b"lib")?;
    let base = std::str::from_utf8(base).ok()?;
    let major_end = digits_end(bytes, dot + 4);
    if major_end == dot + 4 || !is_cuda_library(base) {
        return None;
    }
    // A name the loader is asked for ends there (a NUL, or a quote in a message), or goes on
    // with `.minor` digits; a letter after it is another word.
    if bytes
        .get(major_end)
        .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')
    {
        return None;
    }
    let major = std::str::from_utf8(&bytes[dot + 4..major_end]).ok()?;
    Some(format!("lib{base}.so.{major}"))
}

/// `<base>64_<major>.dll` ending at the `.dll` at `dot`.
fn dll_name_ending_at(bytes: &[u8], dot: usize) -> Option<String> {
    if bytes
        .get(dot + 4)
        .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
    {
        return None;
    }
    let start = word_start(bytes, dot);
    let name = format!("{}.dll", std::str::from_utf8(&bytes[start..dot]).ok()?);
    let l = rocbuild_platform::libname::parse(&name)?;
    let whole_major = l.version.is_some_and(|v| !v.contains('.'));
    (l.is_cuda_form(&name) && whole_major && is_cuda_library(l.base)).then(|| name.clone())
}

/// The CUDA libraries `path` names in its bytes and does not link: what it loads by name at
/// run time. Empty for a file without any (or one that cannot be read).
pub fn cuda_libraries_loaded_by_name(path: &Path, bin: &Binary) -> Vec<String> {
    let Ok(file) = rocbuild_platform::state_files::open_file(path) else {
        return Vec::new();
    };
    // SAFETY: read-only and private, as in `read_binary_with`: a file truncated by someone else
    // while it is read could fault, the accepted risk of every mmap-based binary reader.
    let Ok(map) = (unsafe { memmap2::Mmap::map(&file) }) else {
        return Vec::new();
    };
    let linked = |n: &String| {
        bin.needed
            .iter()
            .chain(&bin.delay_needed)
            .any(|d| d.eq_ignore_ascii_case(n))
            || bin
                .soname_or_install_name
                .as_ref()
                .is_some_and(|s| s.eq_ignore_ascii_case(n))
    };
    let mut names: Vec<String> = constant_data(&map)
        .into_iter()
        .flat_map(cuda_library_names)
        .filter(|n| !linked(n))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Where a library keeps the string constants it hands to `dlopen`/`LoadLibrary`: an ELF
/// file's `.rodata*` sections (read from the section headers alone, no symbol table parsed),
/// a PE file's `.rdata`; the whole file for anything else or a file whose headers do not
/// parse. torch 2.15's CUDA library is 520 MB, most of it GPU code (`.nv_fatbin`): scanning
/// all of it made `doctor --no-load` four times slower (BENCHMARKS.md (e″)).
fn constant_data(bytes: &[u8]) -> Vec<&[u8]> {
    let slice = |off: u64, size: u64| {
        let start = usize::try_from(off).ok()?;
        bytes.get(start..start.checked_add(usize::try_from(size).ok()?)?)
    };
    if let Some(Ok(data)) = crate::elf_sections::sections(bytes, |n| n.starts_with(".rodata")) {
        if !data.is_empty() {
            return data.into_iter().map(|(_, d)| d).collect();
        }
    } else if bytes.starts_with(b"MZ") {
        if let Ok(pe) = goblin::pe::PE::parse(bytes) {
            let data: Vec<&[u8]> = pe
                .sections
                .iter()
                .filter(|s| s.name().is_ok_and(|n| n == ".rdata"))
                .filter_map(|s| slice(s.pointer_to_raw_data.into(), s.size_of_raw_data.into()))
                .collect();
            if !data.is_empty() {
                return data;
            }
        }
    }
    vec![bytes]
}

/// The file system of a closure in which `root` also needs `extra`: a library loaded by name
/// from `root` is searched as the loader searches a dependency of `root`.
struct WithExtraNeeded<'a> {
    inner: &'a dyn FileSystem,
    root: PathBuf,
    extra: &'a [String],
}

impl FileSystem for WithExtraNeeded<'_> {
    fn is_file(&self, path: &Path) -> bool {
        self.inner.is_file(path)
    }

    fn list_dir(&self, dir: &Path) -> Vec<String> {
        self.inner.list_dir(dir)
    }

    fn read_binary(&self, path: &Path) -> Result<Binary, NativeError> {
        let mut b = self.inner.read_binary(path)?;
        if path == self.root {
            b.needed.extend(self.extra.iter().cloned());
        }
        Ok(b)
    }
}

/// The closure of `root` with `loaded_by_name` as more of its direct dependencies: each of them
/// ends in the closure's `found` (where the loader finds it, and by which rule) or `missing`
/// (with the directories tried).
pub fn closure_with_dlopened(
    root: &Path,
    loaded_by_name: &[String],
    ctx: &SearchContext,
    fs: &dyn FileSystem,
) -> Result<Closure, NativeError> {
    let root = std::path::absolute(root).map_err(|source| NativeError::Io {
        path: root.display().to_string(),
        source,
    })?;
    let with = WithExtraNeeded {
        inner: fs,
        root: root.clone(),
        extra: loaded_by_name,
    };
    crate::closure::closure_with(&root, ctx, &with)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versioned_cuda_names_are_read_and_others_left() {
        let bytes = b"\0libcublas.so.12\0Library %s is not found\0libcudnn_ops.so.9\0\
            libcuda.so.1\0libcublasLt.so.12.4.5\0libcublas.so\0/usr/lib/libcurand.so.10\0\
            cublas64_12.dll\0cudnn64_9.dll\0nvcuda.dll\0libcudart.so.13x\0mylibcublas.so.12\0";
        assert_eq!(
            cuda_library_names(bytes),
            [
                "cublas64_12.dll",
                "cudnn64_9.dll",
                "libcublas.so.12",
                "libcublasLt.so.12",
                "libcudnn_ops.so.9",
                "libcurand.so.10",
            ]
        );
    }

    /// A real library that links libm and libcublasLt (as NEEDED) and dlopens libcublas.so.12
    /// and cuDNN: only the names it loads by name are reported, and each is searched from it
    /// as the loader would (found through its RUNPATH, or missing with the dirs tried).
    #[test]
    #[cfg_attr(windows, ignore = "a Unix-host test: it makes its ELF with `cc`")]
    fn names_loaded_by_name_are_searched_from_the_library_that_asks() {
        let dir = tempfile::tempdir().unwrap();
        let cc = |src: &str, out: &Path, args: &[&str]| {
            let c = dir.path().join("x.c");
            std::fs::write(&c, src).unwrap();
            let st = std::process::Command::new("cc")
                .args(["-shared", "-fPIC"])
                .args(args)
                .arg(&c)
                .arg("-o")
                .arg(out)
                .status()
                .unwrap();
            assert!(st.success());
        };
        let cuda = dir.path().join("cuda");
        std::fs::create_dir_all(&cuda).unwrap();
        cc(
            "int lt(void) { return 0; }\n",
            &cuda.join("libcublasLt.so.12"),
            &["-Wl,-soname,libcublasLt.so.12"],
        );
        let pkg = dir.path().join("libpkg.so");
        let l = format!("-L{}", cuda.display());
        cc(
            "#include <dlfcn.h>\nint lt(void);\nvoid *go(void) { lt(); dlopen(\"libcudnn.so.9\", RTLD_NOW); return dlopen(\"libcublas.so.12\", RTLD_NOW); }\n",
            &pkg,
            &["-Wl,--no-as-needed", &l, "-l:libcublasLt.so.12", "-lm", "-Wl,-rpath,$ORIGIN/cuda"],
        );
        let bin = crate::read_binary(&pkg).unwrap();
        assert_eq!(
            cuda_libraries_loaded_by_name(&pkg, &bin),
            ["libcublas.so.12", "libcudnn.so.9"]
        );
        cc(
            "int c(void) { return 0; }\n",
            &cuda.join("libcublas.so.12"),
            &["-Wl,-soname,libcublas.so.12"],
        );
        let names = cuda_libraries_loaded_by_name(&pkg, &bin);
        let ctx = SearchContext {
            platform: Some(crate::Format::Elf),
            ..Default::default()
        };
        let c = closure_with_dlopened(&pkg, &names, &ctx, &crate::closure::RealFs).unwrap();
        let found = c
            .found
            .iter()
            .find(|d| d.name == "libcublas.so.12")
            .unwrap();
        assert_eq!(
            found.path.as_deref(),
            Some(cuda.join("libcublas.so.12").as_path())
        );
        // (libc and libm are missing too: this context has no default dirs.)
        let cudnn = c
            .missing
            .iter()
            .find(|m| m.name == "libcudnn.so.9")
            .unwrap();
        assert_eq!(cudnn.searched, std::slice::from_ref(&cuda));
        assert!(!c.missing.iter().any(|m| m.name == "libcublas.so.12"));
    }

    #[test]
    fn the_cuda_major_of_a_toolkit_library_name() {
        assert_eq!(cuda_library_major("libcublas.so.12"), Some(12));
        assert_eq!(cuda_library_major("libcudart.so.13.0.96"), Some(13));
        assert_eq!(cuda_library_major("cublasLt64_13.dll"), Some(13));
        assert_eq!(cuda_library_major("libcudnn.so.9"), None);
        assert_eq!(cuda_library_major("libm.so.6"), None);
        assert_eq!(cuda_library_major("nvcuda.dll"), None);
    }
}
