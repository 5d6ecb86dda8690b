//! Ad-hoc code signatures on Mach-O files, written by rocbuild itself so that an edited macOS
//! library can be re-signed from any host. arm64 macOS kills a process that maps a library
//! whose pages do not match its signature's CodeDirectory, and adding an LC_RPATH changes the
//! header page: every edit is followed by a new signature.
//!
//! The signer is the `apple-codesign` crate (pure Rust); `codesign --force --sign -` is the
//! fallback where it exists (macOS). Either way the result is read back and checked with the
//! crate's verifier: every page hash of the CodeDirectory must match the file.

use std::path::Path;

#[cfg(feature = "codesign")]
use apple_codesign::{MachOSigner, SettingsScope, SigningSettings, VerificationProblemType};

use crate::NativeError;

/// What signed the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signer {
    /// rocbuild's own signer (the `apple-codesign` crate).
    Builtin,
    /// The system's `codesign`, after the built-in one failed.
    Codesign,
}

/// Sign `data` (a thin or universal Mach-O) ad hoc, as `codesign --sign -` would; `identifier`
/// names the code (the file name, as codesign uses).
pub fn adhoc_sign_bytes(data: &[u8], identifier: &str) -> Result<Vec<u8>, String> {
    // The crate indexes into what it parses: a damaged file must be an error, not a panic.
    std::panic::catch_unwind(|| sign_unguarded(data, identifier))
        .unwrap_or_else(|_| Err("the Mach-O signer failed on this file (damaged?)".into()))
}

/// What a build without the `codesign` feature (the fuzz targets' build, which reads and never
/// signs) says instead of signing or verifying.
#[cfg(not(feature = "codesign"))]
const NO_SIGNER: &str = "this build of rocbuild-native has no Mach-O signer (feature `codesign`)";

#[cfg(not(feature = "codesign"))]
fn sign_unguarded(_data: &[u8], _identifier: &str) -> Result<Vec<u8>, String> {
    Err(NO_SIGNER.into())
}

#[cfg(feature = "codesign")]
fn sign_unguarded(data: &[u8], identifier: &str) -> Result<Vec<u8>, String> {
    let signer = MachOSigner::new(data).map_err(|e| e.to_string())?;
    let mut settings = SigningSettings::default();
    settings.set_binary_identifier(SettingsScope::Main, identifier);
    let mut out = Vec::with_capacity(data.len() + 64 * 1024);
    signer
        .write_signed_binary(&settings, &mut out)
        .map_err(|e| e.to_string())?;
    Ok(out)
}

/// Problems of the code signature of `data`: empty when every CodeDirectory hash matches the
/// file. An ad-hoc signature (CodeDirectory flag ADHOC, in every slice) has no cryptographic
/// part by design — an empty CMS slot or none — so only then is its absence not a problem.
pub fn signature_problems(data: &[u8]) -> Vec<String> {
    std::panic::catch_unwind(|| problems_unguarded(data))
        .unwrap_or_else(|_| vec!["the signature cannot be read (damaged file)".into()])
}

#[cfg(not(feature = "codesign"))]
fn problems_unguarded(_data: &[u8]) -> Vec<String> {
    vec![NO_SIGNER.into()]
}

#[cfg(feature = "codesign")]
fn problems_unguarded(data: &[u8]) -> Vec<String> {
    let adhoc = is_adhoc(data);
    apple_codesign::verify_macho_data(data)
        .into_iter()
        .filter(|p| {
            !(adhoc
                && matches!(
                    p.problem,
                    VerificationProblemType::NoCryptographicSignature
                        | VerificationProblemType::CmsError(_)
                ))
        })
        .map(|p| p.to_string())
        .collect()
}

/// Every slice is signed ad hoc.
#[cfg(feature = "codesign")]
fn is_adhoc(data: &[u8]) -> bool {
    let Ok(file) = apple_codesign::MachFile::parse(data) else {
        return false;
    };
    let mut any = false;
    for m in file.iter_macho() {
        let cd = m
            .code_signature()
            .ok()
            .flatten()
            .and_then(|s| s.code_directory().ok().flatten());
        match cd {
            Some(cd) if cd.flags.contains(apple_codesign::CodeSignatureFlags::ADHOC) => any = true,
            _ => return false,
        }
    }
    any
}

/// Re-sign the Mach-O at `path` ad hoc, in place (written beside, then renamed), and check the
/// result. The built-in signer first; `codesign` when that fails and is installed.
pub fn adhoc_sign(path: &Path) -> Result<Signer, NativeError> {
    let err = |reason: String| NativeError::MachOEdit {
        path: path.display().to_string(),
        reason,
    };
    let data = rocbuild_platform::state_files::read_file_capped(path, crate::read::MAX_FILE_SIZE)
        .map_err(|e| err(e.to_string()))?;
    let identifier = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "rocbuild".into());
    let signer = match adhoc_sign_bytes(&data, &identifier) {
        Ok(signed) => {
            crate::macho::write_atomically(path, &signed).map_err(err)?;
            Signer::Builtin
        }
        Err(reason) => {
            let codesign = which::which("codesign").map_err(|_| {
                err(format!(
                    "ad-hoc signing failed ({reason}), and there is no `codesign` to fall back on"
                ))
            })?;
            duct::cmd(
                codesign,
                [
                    "--force".as_ref(),
                    "--sign".as_ref(),
                    "-".as_ref(),
                    path.as_os_str(),
                ],
            )
            .stdout_null()
            .stderr_capture()
            .run()
            .map_err(|e| {
                err(format!(
                    "ad-hoc signing failed ({reason}); codesign too: {e}"
                ))
            })?;
            tracing::warn!("built-in ad-hoc signing failed ({reason}); used codesign");
            Signer::Codesign
        }
    };
    let after = rocbuild_platform::state_files::read_file_capped(path, crate::read::MAX_FILE_SIZE)
        .map_err(|e| err(e.to_string()))?;
    let problems = signature_problems(&after);
    if !problems.is_empty() {
        return Err(err(format!(
            "the new signature does not verify: {}",
            problems.join("; ")
        )));
    }
    Ok(signer)
}
