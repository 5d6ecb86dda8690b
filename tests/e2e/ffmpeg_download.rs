//! `rocbuild ffmpeg`: a shared FFmpeg build downloaded from a real HTTP server on 127.0.0.1,
//! checked against its sha256, extracted safely, and recognised.

use std::collections::BTreeMap;

use crate::common::*;
use rocbuild_testkit::downloads::{pe_dll, sha256_hex, shared_ffmpeg_zip, zip_of, FileServer};

fn serve(zip: &[u8]) -> FileServer {
    FileServer::start(BTreeMap::from([(
        "/ffmpeg-7.1.1-full_build-shared.zip".to_string(),
        zip.to_vec(),
    )]))
}

#[test]
fn downloads_verifies_and_extracts_a_shared_build() {
    let zip = shared_ffmpeg_zip();
    let srv = serve(&zip);
    let tmp = tempfile::tempdir().unwrap();
    let into = tmp.path().join("ffmpeg");
    let cache = tmp.path().join("cache");
    let url = format!("{}/ffmpeg-7.1.1-full_build-shared.zip", srv.base);
    let sum = sha256_hex(&zip);
    let args = [
        "ffmpeg",
        "--url",
        &url,
        "--sha256",
        &sum,
        "--into",
        into.to_str().unwrap(),
    ];
    let out = rocbuild(&args, &[("ROCBUILD_CACHE", cache.to_str().unwrap())]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let root = "[TMP]/ffmpeg/ffmpeg-7.1.1-full_build-shared";
    assert_eq!(
        redact(&out.stdout, tmp.path()),
        format!(
            "FFmpeg 7 (libavutil 59), shared, in {root}\nlibraries: {root}/bin (8 files)\nbuilds use it from now on (as if given --ffmpeg {root}); another --ffmpeg DIR wins"
        )
    );
    assert_eq!(
        std::fs::read(into.join("ffmpeg-7.1.1-full_build-shared/bin/avutil-59.dll")).unwrap(),
        pe_dll()
    );
    assert!(cache
        .join("downloads/ffmpeg-7.1.1-full_build-shared.zip")
        .is_file());

    // --json, and the verified archive is reused (no second request).
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let out = rocbuild(&json_args, &[("ROCBUILD_CACHE", cache.to_str().unwrap())]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        (v["major"].as_u64(), v["avutil_major"].as_u64()),
        (Some(7), Some(59))
    );
    assert_eq!(v["missing"].as_array().map(Vec::len), Some(0));
    assert_eq!(srv.hits(), 1);

    // Later builds use it: a plan on this machine (real probe) builds against FFmpeg 7 from
    // the download, not the system's.
    let venv = tmp.path().join("venv");
    let site = make_venv(&venv);
    install_fake_torch(&site, "2.9.1");
    let plan = rocbuild(
        &["torchcodec", "--venv", venv.to_str().unwrap(), "--dry-run"],
        &[("ROCBUILD_CACHE", cache.to_str().unwrap())],
    );
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    assert!(plan.stdout.contains("  ffmpeg: 7\n"), "{}", plan.stdout);
}

#[test]
fn a_wrong_checksum_is_refused_and_nothing_is_kept() {
    let zip = shared_ffmpeg_zip();
    let srv = serve(&zip);
    let tmp = tempfile::tempdir().unwrap();
    let into = tmp.path().join("ffmpeg");
    let cache = tmp.path().join("cache");
    let url = format!("{}/ffmpeg-7.1.1-full_build-shared.zip", srv.base);
    let wrong = "ab".repeat(32);
    let out = rocbuild(
        &[
            "ffmpeg",
            "--url",
            &url,
            "--sha256",
            &wrong,
            "--into",
            into.to_str().unwrap(),
        ],
        &[("ROCBUILD_CACHE", cache.to_str().unwrap())],
    );
    assert_eq!(out.code, 1);
    let err = out.stderr.replace('\n', " ");
    assert!(err.contains("rocbuild::fetch::checksum"), "{}", out.stderr);
    assert!(
        err.contains(&wrong) && err.contains(&sha256_hex(&zip)),
        "{}",
        out.stderr
    );
    assert!(!into.exists());
    let left: Vec<_> = std::fs::read_dir(cache.join("downloads"))
        .unwrap()
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn an_archive_escaping_its_directory_is_refused() {
    let zip = zip_of(&[
        ("ffmpeg/bin/avutil-59.dll", pe_dll()),
        ("../../escaped.dll", b"payload"),
    ]);
    let srv = serve(&zip);
    let tmp = tempfile::tempdir().unwrap();
    let into = tmp.path().join("a/b/ffmpeg");
    let url = format!("{}/ffmpeg-7.1.1-full_build-shared.zip", srv.base);
    let out = rocbuild(
        &[
            "ffmpeg",
            "--url",
            &url,
            "--sha256",
            &sha256_hex(&zip),
            "--into",
            into.to_str().unwrap(),
        ],
        &[("ROCBUILD_CACHE", tmp.path().join("cache").to_str().unwrap())],
    );
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("rocbuild::fetch::unsafe_entry"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("escaped.dll") && out.stderr.contains("a `..` component"),
        "{}",
        out.stderr
    );
    assert!(!into.exists());
    assert!(!tmp.path().join("escaped.dll").exists() && !tmp.path().join("a/escaped.dll").exists());
    assert!(
        !tmp.path().join("a").exists(),
        "nothing created before the archive was checked"
    );
}

#[test]
fn no_pinned_build_for_this_platform_says_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let out = rocbuild(
        &["ffmpeg"],
        &[("ROCBUILD_CACHE", tmp.path().to_str().unwrap())],
    );
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("no pinned shared FFmpeg build for linux-x86_64"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("--url URL --sha256 HEX"),
        "{}",
        out.stderr
    );
    let out = rocbuild(&["ffmpeg", "--url", "https://x.invalid/a.zip"], &[]);
    assert_eq!(out.code, 2, "clap: --url requires --sha256");
}
