//! A lookup table over one file's exports, built once per file and shared by every check that
//! binds imports to it.
//!
//! The ABI check asks "does this provider export `name` (with this version / this ordinal)?"
//! for every import of every importer. A linear scan of a provider's export table is
//! imports × exports string comparisons (10 TorchCodec DLLs against the 59,529 exports of
//! `torch_cpu.dll`: billions); a hash map keyed by each file's own names would have to borrow
//! from the file or copy every name. This index keys by a 64-bit hash of the name, so it owns
//! no strings, can live beside the parsed file in a cache, and a caller hashes an import's name
//! once and probes each provider with the same number.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::{Binary, Export};

/// The hash the index is keyed by (FxHash of the raw name): hash an import's name once, then
/// [`ExportIndex::has`] each provider with it.
pub fn symbol_hash(name: &str) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    h.write(name.as_bytes());
    h.finish()
}

/// Keys are already hashes: use them as they are.
#[derive(Default)]
struct Identity(u64);

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Identity")
    }
}

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only u64 keys are hashed through this; anything else folds its bytes in.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

const END: u32 = u32::MAX;

/// Which exports of one [`Binary`] have which name hash, and which ordinals it exports.
///
/// Built from `bin.exports` and answering for those same exports: pass the same binary's
/// export table to [`ExportIndex::has`].
#[derive(Debug, Default)]
pub struct ExportIndex {
    /// Name hash -> index of the first export with it; further ones chain through `next`.
    first: HashMap<u64, u32, BuildHasherDefault<Identity>>,
    next: Vec<u32>,
    ordinals: HashMap<u32, (), BuildHasherDefault<Identity>>,
}

impl ExportIndex {
    /// Index every export of `bin` (named ones by name, all by ordinal when they have one).
    pub fn new(bin: &Binary) -> Self {
        let n = bin.exports.len();
        let mut first: HashMap<u64, u32, BuildHasherDefault<Identity>> =
            HashMap::with_capacity_and_hasher(n, Default::default());
        let mut next = vec![END; n];
        let mut ordinals = HashMap::with_hasher(Default::default());
        // Backwards, so each chain runs in file order.
        for (i, e) in bin.exports.iter().enumerate().rev() {
            let Ok(i32_) = u32::try_from(i) else { continue };
            if let Some(o) = e.ordinal {
                ordinals.insert(o, ());
            }
            if e.name.is_empty() {
                continue;
            }
            if let Some(prev) = first.insert(symbol_hash(&e.name), i32_) {
                next[i] = prev;
            }
        }
        ExportIndex {
            first,
            next,
            ordinals,
        }
    }

    /// The exports of `exports` (the table this index was built from) named `name`, whose
    /// hash is `hash` ([`symbol_hash`]).
    pub fn named<'a>(
        &'a self,
        exports: &'a [Export],
        hash: u64,
        name: &'a str,
    ) -> impl Iterator<Item = &'a Export> + 'a {
        let mut at = self.first.get(&hash).copied().unwrap_or(END);
        std::iter::from_fn(move || {
            while at != END {
                let i = at as usize;
                at = self.next.get(i).copied().unwrap_or(END);
                match exports.get(i) {
                    Some(e) if e.name == name => return Some(e),
                    Some(_) => continue,
                    None => return None,
                }
            }
            None
        })
    }

    /// Is `name` exported at all (any version)?
    pub fn has(&self, exports: &[Export], hash: u64, name: &str) -> bool {
        self.named(exports, hash, name).next().is_some()
    }

    /// ELF binding: an unversioned import needs the name; a versioned one that version or an
    /// unversioned definition.
    pub fn has_version(
        &self,
        exports: &[Export],
        hash: u64,
        name: &str,
        version: Option<&str>,
    ) -> bool {
        match version {
            None => self.has(exports, hash, name),
            Some(v) => self
                .named(exports, hash, name)
                .any(|e| e.version.is_none() || e.version.as_deref() == Some(v)),
        }
    }

    /// PE: is ordinal `o` exported?
    pub fn has_ordinal(&self, o: u32) -> bool {
        self.ordinals.contains_key(&o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Format;

    fn export(name: &str, version: Option<&str>, ordinal: Option<u32>) -> Export {
        Export {
            name: name.into(),
            demangled: None,
            version: version.map(str::to_string),
            ordinal,
            forwarder: None,
        }
    }

    fn bin(exports: Vec<Export>) -> Binary {
        Binary {
            format: Format::Elf,
            arch: "x86_64".into(),
            is_64: true,
            is_library: true,
            soname_or_install_name: None,
            needed: vec![],
            weak_needed: vec![],
            delay_needed: vec![],
            rpath: vec![],
            runpath: vec![],
            interpreter: None,
            imports: vec![],
            exports,
            gpu_targets: vec![],
            offload: vec![],
            universal_arches: vec![],
        }
    }

    #[test]
    fn finds_every_version_of_a_name_and_only_that_name() {
        let b = bin(vec![
            export("foo", Some("V1"), None),
            export("bar", None, Some(3)),
            export("foo", Some("V2"), None),
            export("", None, Some(9)),
        ]);
        let ix = ExportIndex::new(&b);
        let h = |n: &str| symbol_hash(n);
        assert!(ix.has(&b.exports, h("foo"), "foo"));
        assert!(ix.has_version(&b.exports, h("foo"), "foo", Some("V2")));
        assert!(ix.has_version(&b.exports, h("foo"), "foo", Some("V1")));
        assert!(!ix.has_version(&b.exports, h("foo"), "foo", Some("V3")));
        // An unversioned definition satisfies any version.
        assert!(ix.has_version(&b.exports, h("bar"), "bar", Some("V9")));
        assert!(!ix.has(&b.exports, h("baz"), "baz"));
        // A hash collision is not a match: the name is compared.
        assert!(!ix.has(&b.exports, h("foo"), "baz"));
        assert!(ix.has_ordinal(3) && ix.has_ordinal(9) && !ix.has_ordinal(4));
        let versions: Vec<_> = ix
            .named(&b.exports, h("foo"), "foo")
            .map(|e| e.version.clone().unwrap())
            .collect();
        assert_eq!(versions, ["V1", "V2"]);
    }
}
