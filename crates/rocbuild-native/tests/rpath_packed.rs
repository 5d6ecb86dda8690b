//! rocbuild's RUNPATH edit on a library that carries GPU code: a real HIP library (hipcc)
//! with its `.hip_fatbin` offload bundle, plus a page-aligned read-only section of its own
//! in the shape of TheRock's kernel-pack reference (a loaded section the library reads at run
//! time, as a packed library reads its kpack reference). patchelf once moved such sections and
//! corrupted the libraries (NixOS/patchelf#10, #1 of the ROCm reports): here every section
//! except the dynamic linking data must read back byte for byte at the same address with the
//! same alignment, the offload targets must be the same, and the edited library must load and
//! read its own section with the same result.
// Tests say on stderr what they skip or measured.
#![allow(clippy::print_stderr)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rocbuild_native::{offload_targets, read_elf, set_runpath};

/// The section standing for a kernel-pack reference; read back through a symbol at run time.
const PACKED: &str = ".rocm_kpack_ref";

const SOURCE: &str = r#"#include <hip/hip_runtime.h>
__global__ void add_one(float* x) { x[threadIdx.x] += 1.0f; }
extern "C" int launch(float* x) { hipLaunchKernelGGL(add_one, dim3(1), dim3(32), 0, 0, x); return 0; }

// 8 KiB of bytes no compiler would make, page-aligned, in a loaded read-only section.
#define ROW(i) (unsigned char)((i) * 37 + 11)
__attribute__((used, section(".rocm_kpack_ref"), aligned(4096)))
const unsigned char kpack_ref[8192] = {
#define R8(i) ROW(i), ROW(i + 1), ROW(i + 2), ROW(i + 3), ROW(i + 4), ROW(i + 5), ROW(i + 6), ROW(i + 7)
#define R64(i) R8(i), R8(i + 8), R8(i + 16), R8(i + 24), R8(i + 32), R8(i + 40), R8(i + 48), R8(i + 56)
#define R512(i) R64(i), R64(i + 64), R64(i + 128), R64(i + 192), R64(i + 256), R64(i + 320), R64(i + 384), R64(i + 448)
  R512(0), R512(512), R512(1024), R512(1536), R512(2048), R512(2560), R512(3072), R512(3584),
  R512(4096), R512(4608), R512(5120), R512(5632), R512(6144), R512(6656), R512(7168), R512(7680)
};
extern "C" unsigned long kpack_sum(void) {
  unsigned long s = 0;
  for (int i = 0; i < 8192; i++) s = s * 31 + kpack_ref[i];
  return s;
}
"#;

/// One section as the file says it: its address, alignment and bytes.
#[derive(Debug, PartialEq, Eq)]
struct Section {
    addr: u64,
    align: u64,
    bytes: Vec<u8>,
}

fn sections(path: &Path) -> BTreeMap<String, Section> {
    let data = std::fs::read(path).unwrap();
    let elf = goblin::elf::Elf::parse(&data).unwrap();
    let mut out = BTreeMap::new();
    for sh in &elf.section_headers {
        let name = elf.shdr_strtab.get_at(sh.sh_name).unwrap_or("").to_string();
        let bytes = if sh.sh_type == goblin::elf::section_header::SHT_NOBITS {
            Vec::new()
        } else {
            let r = sh.file_range().unwrap_or(0..0);
            data[r].to_vec()
        };
        out.insert(
            name,
            Section {
                addr: sh.sh_addr,
                align: sh.sh_addralign,
                bytes,
            },
        );
    }
    out
}

/// The library's `kpack_sum()` in a fresh Python (ctypes dlopen), or its error.
fn loaded_sum(lib: &Path) -> Result<String, String> {
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg("import ctypes, sys; l = ctypes.CDLL(sys.argv[1]); l.kpack_sum.restype = ctypes.c_ulong; print(l.kpack_sum())")
        .arg(lib)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).to_string())
    }
}

fn packed_library(dir: &Path, linked_runpath: &str) -> Option<PathBuf> {
    let Some(hipcc) = common::hipcc() else {
        eprintln!("SKIPPED: hipcc not found (apt-get install hipcc; cargo xtask setup does it)");
        return None;
    };
    let src = common::write(dir, "k.hip", SOURCE);
    let out = dir.join("libpacked.so");
    common::run(
        std::process::Command::new(hipcc)
            .args([
                "--offload-arch=gfx1010",
                "--offload-arch=gfx1030",
                "-fPIC",
                "-shared",
            ])
            .arg(&src)
            .arg("-o")
            .arg(&out)
            .arg(format!("-Wl,-rpath,{linked_runpath}"))
            .env("TMPDIR", dir),
    );
    Some(out)
}

/// What differs between two section maps, by name: gone, moved or resized, other bytes.
fn differences(
    before: &BTreeMap<String, Section>,
    after: &BTreeMap<String, Section>,
    skip: &[&str],
) -> Vec<String> {
    let mut changed = Vec::new();
    for (name, s) in before {
        if skip.contains(&name.as_str()) {
            continue;
        }
        match after.get(name) {
            None => changed.push(format!("{name}: gone")),
            Some(a) if (a.addr, a.align, a.bytes.len()) != (s.addr, s.align, s.bytes.len()) => {
                changed.push(format!(
                    "{name}: moved or resized: {:#x}/{}/{} -> {:#x}/{}/{}",
                    s.addr,
                    s.align,
                    s.bytes.len(),
                    a.addr,
                    a.align,
                    a.bytes.len()
                ))
            }
            Some(a) if a.bytes != s.bytes => changed.push(format!("{name}: bytes changed")),
            Some(_) => {}
        }
    }
    changed
}

/// The library before an edit, for comparison after it.
struct Before {
    sections: BTreeMap<String, Section>,
    bytes: Vec<u8>,
    targets: Vec<rocbuild_native::OffloadEntry>,
    sum: Result<String, String>,
}

fn before(lib: &Path) -> Before {
    let bytes = std::fs::read(lib).unwrap();
    let b = Before {
        sections: sections(lib),
        targets: offload_targets(&bytes).unwrap(),
        sum: loaded_sum(lib),
        bytes,
    };
    assert!(b.sections[".hip_fatbin"]
        .bytes
        .starts_with(b"__CLANG_OFFLOAD_BUNDLE__"));
    assert_eq!(b.sections[PACKED].align, 4096);
    assert_eq!(b.sections[PACKED].bytes.len(), 8192);
    assert_eq!(b.targets.iter().filter(|t| t.kind != "host").count(), 2);
    b
}

/// The GPU code and the packed section read back the same, from the file and loaded.
fn gpu_code_intact(lib: &Path, b: &Before) {
    let after = sections(lib);
    for name in [".hip_fatbin", PACKED] {
        assert_eq!(after.get(name), b.sections.get(name), "{name}");
    }
    assert_eq!(
        offload_targets(&std::fs::read(lib).unwrap()).unwrap(),
        b.targets
    );
    // Loaded, the library reads its own section as before (where it loads at all: the HIP
    // runtime library must be installed, which hipcc's packages bring).
    match &b.sum {
        Ok(sum) => assert_eq!(loaded_sum(lib).as_ref(), Ok(sum)),
        Err(e) => eprintln!("not loadable here before the edit either: {e}"),
    }
}

/// A new RUNPATH that fits where the linker put the old one: only that string and the tag
/// change; every other byte of the file is the same.
#[test]
fn a_runpath_that_fits_changes_that_field_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let reserved = format!("/{}", "x".repeat(200));
    let Some(lib) = packed_library(dir.path(), &reserved) else {
        return;
    };
    let b = before(&lib);
    let new = vec!["$ORIGIN".to_string(), "$ORIGIN/../torch/lib".to_string()];
    set_runpath(&lib, &new).unwrap();
    assert_eq!(read_elf(&lib).unwrap().runpath, new);
    gpu_code_intact(&lib, &b);
    let after = std::fs::read(&lib).unwrap();
    assert_eq!(after.len(), b.bytes.len());
    let old_at = b
        .bytes
        .windows(reserved.len())
        .position(|w| w == reserved.as_bytes())
        .unwrap();
    let differing: Vec<usize> = (0..after.len())
        .filter(|&i| after[i] != b.bytes[i])
        .collect();
    // The string's bytes, and (with the old DT_RPATH tag) one byte of the tag.
    let outside: Vec<usize> = differing
        .iter()
        .copied()
        .filter(|&i| !(old_at..old_at + reserved.len()).contains(&i))
        .collect();
    assert!(
        outside.len() <= 1,
        "bytes changed outside the string: {outside:?}"
    );
    if let [i] = outside[..] {
        assert_eq!(
            (b.bytes[i], after[i]),
            (15, 29),
            "only DT_RPATH -> DT_RUNPATH"
        );
    }
}

/// A RUNPATH much longer than the linker's: the string table cannot grow in place, so the
/// file is rewritten (arwen). The GPU code and the packed section must still read back the
/// same, at the same addresses, and load the same.
#[test]
fn a_runpath_that_does_not_fit_leaves_the_gpu_code_and_the_packed_section_intact() {
    let dir = tempfile::tempdir().unwrap();
    let Some(lib) = packed_library(dir.path(), "/opt/short") else {
        return;
    };
    let b = before(&lib);
    let long: Vec<String> = (0..12)
        .map(|i| format!("$ORIGIN/../some/rather/long/library/directory/number/{i}"))
        .collect();
    set_runpath(&lib, &long).unwrap();
    assert_eq!(read_elf(&lib).unwrap().runpath, long);
    gpu_code_intact(&lib, &b);
    // Every loaded section with code or data keeps its address and bytes; what moves is the
    // dynamic linking data an editor must rewrite to grow the string table.
    let linking = [
        ".dynamic",
        ".dynstr",
        ".dynsym",
        ".hash",
        ".gnu.hash",
        ".gnu.version",
        ".gnu.version_r",
        ".note.gnu.build-id",
        ".shstrtab",
        ".symtab",
        ".strtab",
        "",
    ];
    let changed = differences(&b.sections, &sections(&lib), &linking);
    assert!(changed.is_empty(), "{changed:#?}");
}
