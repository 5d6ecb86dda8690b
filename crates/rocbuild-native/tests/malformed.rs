//! Cut and flipped versions of real ELF, PE, Mach-O and offload-bundle files go through every
//! reader: each call returns Ok or Err, never panics, never hangs.
// Tests say on stderr what they skip or measured.
#![allow(clippy::print_stderr)]

mod common;

use std::path::Path;

use common::write;
use rocbuild_native::{add_macho_rpaths, offload_targets, parse_binary, parse_ld_so_cache};

/// The real files: built here, so the corpus covers the structures the readers walk.
fn corpus(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let c = write(
        dir,
        "x.c",
        "#include <stdio.h>\nint x(int a) { printf(\"%d\", a); return a; }\n",
    );
    let cpp = write(
        dir,
        "y.cpp",
        "namespace c10 { int foo(int x) { return x; } }\n",
    );
    let map = write(dir, "v.map", "V_1 { global: x; local: *; };\n");
    common::cc_shared(
        &c,
        &dir.join("libx.so"),
        &[
            "-Wl,-rpath,$ORIGIN/lib",
            &format!("-Wl,--version-script={}", map.display()),
        ],
    );
    common::cc_shared(
        &cpp,
        &dir.join("liby.so"),
        &["-Wl,--disable-new-dtags", "-Wl,-rpath,/r"],
    );
    files.push(("elf".into(), dir.join("libx.so")));
    files.push(("elf-cxx".into(), dir.join("liby.so")));
    let def = write(
        dir,
        "x.def",
        "LIBRARY x.dll\nEXPORTS\n  x\n  x2 = x @9 NONAME\n",
    );
    common::mingw_dll(&[&c, &def], &dir.join("x.dll"), &[]);
    common::mingw_dll(&[&cpp], &dir.join("y.dll"), &[]);
    files.push(("pe".into(), dir.join("x.dll")));
    files.push(("pe-cxx".into(), dir.join("y.dll")));
    if let Some(clang) = common::clang() {
        // MSVC-ABI DLL with a delay-load import directory (read by our own code, not goblin).
        let drv = write(
            dir,
            "drv.c",
            "__declspec(dllexport) int drv(int x) { return x; }\n",
        );
        let user = write(
            dir,
            "user.c",
            "__declspec(dllimport) int drv(int);\nvoid* __delayLoadHelper2(const void* d, void** iat) { (void)d; return *iat; }\n\
             __declspec(dllexport) int use(int x) { return drv(x); }\n",
        );
        let link = |src: &Path, out: &Path, extra: &[String]| {
            common::run(
                std::process::Command::new(clang)
                    .args([
                        "--target=x86_64-pc-windows-msvc",
                        "-fuse-ld=lld",
                        "-nostdlib",
                        "-shared",
                        "-Wl,/noentry",
                    ])
                    .arg(src)
                    .args(extra)
                    .arg("-o")
                    .arg(out),
            )
        };
        link(&drv, &dir.join("drv.dll"), &[]);
        link(
            &user,
            &dir.join("user.dll"),
            &[
                "-Wl,/delayload:drv.dll".into(),
                dir.join("drv.lib").display().to_string(),
            ],
        );
        files.push(("pe-delay".into(), dir.join("user.dll")));
    }
    if common::clang().is_some() && common::have_ld64() {
        for t in ["x86_64-apple-macos11", "arm64-apple-macos11"] {
            let out = dir.join(format!("{t}/liby.dylib"));
            common::macho_dylib(
                t,
                &cpp,
                &out,
                &[
                    "-Wl,-install_name,@rpath/liby.dylib",
                    "-Wl,-rpath,@loader_path",
                    "-Wl,-headerpad_max_install_names",
                ],
            );
            files.push((format!("macho-{t}"), out));
        }
    }
    let mut out: Vec<(String, Vec<u8>)> = files
        .into_iter()
        .map(|(n, p)| (n, std::fs::read(p).unwrap()))
        .collect();
    if let Some(hipcc) = common::hipcc() {
        let src = write(
            dir,
            "k.hip",
            "#include <hip/hip_runtime.h>\n__global__ void k(float* x) { x[0] = 1; }\n",
        );
        common::run(
            std::process::Command::new(hipcc)
                .args(["--offload-arch=gfx1010", "-fPIC", "-shared"])
                .arg(&src)
                .arg("-o")
                .arg(dir.join("libk.so"))
                .env("TMPDIR", dir),
        );
        let lib = std::fs::read(dir.join("libk.so")).unwrap();
        let start = memfind(&lib, b"__CLANG_OFFLOAD_BUNDLE__").unwrap();
        let bundle = lib[start..].to_vec();
        let mut ccob = b"CCOB".to_vec();
        let payload = zstd::encode_all(&bundle[..], 1).unwrap();
        ccob.extend(2u16.to_le_bytes());
        ccob.extend(1u16.to_le_bytes());
        ccob.extend(((24 + payload.len()) as u32).to_le_bytes());
        ccob.extend((bundle.len() as u32).to_le_bytes());
        ccob.extend(0u64.to_le_bytes());
        ccob.extend(payload);
        out.push(("hip-elf".into(), lib));
        out.push((
            "bundle".into(),
            bundle[..bundle.len().min(64 * 1024)].to_vec(),
        ));
        out.push(("ccob".into(), ccob));
    } else {
        eprintln!("note: hipcc not found, the corpus has no HIP files");
    }
    out.push((
        "ld.so.cache".into(),
        std::fs::read("/etc/ld.so.cache").unwrap_or_default(),
    ));
    out
}

fn memfind(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

/// A small deterministic generator (xorshift64*): the same mutants on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Every reader on one input. Returns how many answered Ok.
fn feed(bytes: &[u8]) -> usize {
    let mut ok = 0;
    if let Ok(b) = parse_binary(bytes) {
        ok += 1;
        // Touch every string the readers produced, and demangle again (hostile names).
        for i in &b.imports {
            let _ = i.name.as_deref().map(rocbuild_native::demangle);
        }
        for e in &b.exports {
            let _ = rocbuild_native::demangle(&e.name);
        }
    }
    ok += offload_targets(bytes).is_ok() as usize;
    ok += parse_ld_so_cache(bytes).is_ok() as usize;
    ok
}

#[test]
fn cut_and_flipped_files_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = corpus(dir.path());
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut inputs = 0usize;
    let mut oks = 0usize;
    let mut guarded = 0usize;
    let mut slowest = (std::time::Duration::ZERO, String::new());
    for (name, bytes) in &corpus {
        if bytes.is_empty() {
            continue;
        }
        assert!(feed(bytes) >= 1, "{name} does not parse intact");
        // Truncated: ~150 cut points per file, denser at the start where the headers are.
        let step = (bytes.len() / 150).max(1);
        let cuts = (0..bytes.len())
            .step_by(step)
            .chain(0..bytes.len().min(256));
        for cut in cuts {
            oks += feed(&bytes[..cut]);
            inputs += 1;
        }
        // Flipped: 1-16 random bit flips, half of them in the first 4 KiB (headers, load
        // commands, dynamic section), plus whole-word overwrites with extreme values.
        for round in 0..600 {
            let mut m = bytes.clone();
            let flips = 1 + rng.below(16);
            for _ in 0..flips {
                let span = if round % 2 == 0 {
                    m.len().min(4096)
                } else {
                    m.len()
                };
                let at = rng.below(span);
                if round % 5 == 0 && at + 4 <= m.len() {
                    let v: [u8; 4] = match rng.below(4) {
                        0 => [0xff; 4],
                        1 => [0; 4],
                        2 => [0xff, 0xff, 0xff, 0x7f],
                        _ => (rng.next() as u32).to_le_bytes(),
                    };
                    m[at..at + 4].copy_from_slice(&v);
                } else {
                    m[at] ^= 1 << rng.below(8);
                }
            }
            let t = std::time::Instant::now();
            oks += feed(&m);
            inputs += 1;
            if t.elapsed() > slowest.0 {
                slowest = (t.elapsed(), format!("{name} round {round}"));
            }
            if let Err(e) = parse_binary(&m) {
                guarded += e.to_string().contains("parser gave up") as usize;
            }
            // The Mach-O editor reads, checks room and rewrites: it must fail cleanly too.
            if name.starts_with("macho") && round % 20 == 0 {
                let p = dir.path().join("mutant.dylib");
                std::fs::write(&p, &m).unwrap();
                let _ = add_macho_rpaths(&p, &["@loader_path/../lib".into()]);
            }
        }
    }
    eprintln!(
        "{inputs} mutated inputs from {} files: {oks} reader answers were Ok; {guarded} parser \
         panics caught by the guard; slowest input: {slowest:?}",
        corpus.len()
    );
    assert!(inputs > 3000, "{inputs}");
}

/// Found by the `offload` fuzz target: a version-1 compressed bundle header cut short inside
/// a section sliced past its end. The reader must say so itself, not through the panic guard.
#[test]
fn a_compressed_bundle_shorter_than_its_header_is_refused_in_words() {
    let bytes: &[u8] = &[
        0x6f, 0x43, 0x43, 0x4f, 0x42, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x06, 0x6f, 0x43,
        0x43, 0x4f, 0xc2, 0xfe,
    ];
    if let Err(e) = rocbuild_native::offload_targets(bytes) {
        assert!(!e.to_string().contains("parser gave up"), "{e}");
    }
}
