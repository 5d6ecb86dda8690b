//! Staging an install: everything that will move into site-packages is put in the
//! transaction's `stage/` first, in named steps — the rebuilt libraries (search paths set), the
//! pure-Python part from pip, the wheel's files to park, the Windows preload hook, the updated
//! RECORD — so that the swap that follows is only renames.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};
use rocbuild_venv::install::NewFile;
use rocbuild_venv::manifest::{self, sha256_file, InstalledFile};
use rocbuild_venv::{record, txn_fs, walk};

use crate::build_system::scratch::Scratch;
use crate::cross::CrossPlan;
use crate::error::{EngineError, Result};
use crate::install::python_part::{PartInstall, PythonPart};
use crate::install::requirements::RequirementsPlan;
use crate::install::InstallPlan;
use crate::link::{self, Link};
use crate::step::{Background, RunLog};

/// What staging leaves for the swap.
pub(crate) struct Staged {
    pub new: Vec<NewFile>,
    pub park: Vec<String>,
    pub installed: Vec<InstalledFile>,
}

/// What staging reads of the plan (the planner makes it: `Plan::to_stage`).
pub(crate) struct StagePlan<'a> {
    pub recipe: &'a str,
    pub version: &'a str,
    pub install: &'a InstallPlan,
    pub python_part: Option<&'a PythonPart>,
    pub requirements: Option<&'a RequirementsPlan>,
    pub scratch: &'a Scratch,
    pub cross: Option<&'a CrossPlan>,
}

/// The staging of one install, step by step.
struct Stager<'a> {
    plan: &'a StagePlan<'a>,
    built: &'a Built,
    site: &'a Path,
    stage: &'a Path,
    park_set: GlobSet,
    new: Vec<NewFile>,
    installed: Vec<InstalledFile>,
    park: Vec<String>,
    dropped: Vec<String>,
    record_set: BTreeMap<String, (String, u64)>,
}

/// Stage everything of `plan`'s install; `pip` is the Python part's install when it was
/// started early, in the background.
pub(crate) fn stage(
    plan: &StagePlan,
    log: &mut RunLog,
    built: &Built,
    pip: &mut Option<Background>,
    extra: &mut StagedExtra,
) -> Result<Staged> {
    let site = &plan.install.site;
    let stage_dir = rocbuild_venv::layout::stage(site);
    let mut s = Stager {
        plan,
        built,
        site,
        stage: &stage_dir,
        park_set: globset(&plan.install.park)?,
        new: Vec::new(),
        installed: Vec::new(),
        park: Vec::new(),
        dropped: Vec::new(),
        record_set: BTreeMap::new(),
    };
    s.built_libraries()?;
    let record_rel = match plan.python_part {
        Some(_) => s.python_part(log, pip, extra)?,
        None => s.pips_record()?,
    };
    s.requirements(log, extra)?;
    s.wheel_libraries_to_park();
    s.preload_hook()?;
    s.record(&record_rel, extra)?;
    Ok(Staged {
        new: s.new,
        park: s.park,
        installed: s.installed,
    })
}

/// The Python part into its staging directory: by pip, or, for a wheel rocbuild already
/// checked and unpacked, copied by rocbuild against the wheel's RECORD (no pip needed).
fn install_part(log: &mut RunLog, pp: &PythonPart) -> Result<Vec<String>> {
    match &pp.install {
        PartInstall::Pip(cmd) => {
            log.note(&format!(
                "python part: {}=={} (pip, --no-deps)",
                pp.distribution, pp.version
            ));
            log.run("pip install (python part)", cmd)
        }
        PartInstall::Unpacked { unpacked } => {
            let done = rocbuild_venv::wheel_install::install_unpacked(
                unpacked,
                &pp.target,
                &pp.distribution,
            )?;
            log.note(&format!(
                "python part: {}=={} copied from the checked wheel ({} files, each against its RECORD{})",
                pp.distribution,
                pp.version,
                done.files.len(),
                if done.dropped.is_empty() {
                    String::new()
                } else {
                    format!("; not installed, as with pip --target: {}", done.dropped.join(", "))
                }
            ));
            Ok(Vec::new())
        }
    }
}

/// `[python] from = "extension"`: rocbuild's CMake project compiles the module and installs
/// it beside the package's Python files; that tree becomes the wheel pip installs.
fn python_extension(
    log: &mut RunLog,
    x: &crate::build_system::cmake::extension::ExtensionBuild,
    scratch: &Scratch,
    dist: &str,
    version: &str,
) -> Result<()> {
    log.note(&format!(
        "python package: compile {} with rocbuild's CMake project, the library's toolchain",
        x.module
    ));
    let lists = x.project_dir.join("CMakeLists.txt");
    fs_err::create_dir_all(&x.project_dir).map_err(EngineError::io("create", &x.project_dir))?;
    fs_err::write(&lists, &x.cmakelists).map_err(EngineError::io("write", &lists))?;
    log.run(
        "configure the Python extension",
        &scratch.apply(&x.configure),
    )?;
    log.run("build the Python extension", &scratch.apply(&x.build))?;
    if x.root.exists() {
        fs_err::remove_dir_all(&x.root).map_err(EngineError::io("clean", &x.root))?;
    }
    log.run("install the Python extension", &x.install)?;
    let files = rocbuild_venv::walk(&x.root);
    let di = format!("{}-{version}.dist-info", x.name);
    let mut generated = vec![
        (format!("{di}/METADATA"), x.metadata.clone().into_bytes()),
        (
            format!("{di}/WHEEL"),
            rocbuild_venv::wheel::wheel_file(&x.tags).into_bytes(),
        ),
    ];
    for (file, text) in &x.dist_info {
        generated.push((format!("{di}/{file}"), text.clone().into_bytes()));
    }
    let wheel = rocbuild_venv::wheel::write_wheel(
        &x.wheel_dir,
        &x.name,
        version,
        &x.tags,
        &files,
        &generated,
    )
    .map_err(|e| EngineError::Usage {
        option: "python part".into(),
        reason: format!("the wheel of {dist} could not be written: {e}"),
        help: None,
    })?;
    log.note(&format!(
        "python package: {} ({} files)",
        wheel.display(),
        files.len() + generated.len() + 1
    ));
    Ok(())
}

/// The error of copying `from` to `to` as `action`: a full disk is said at `to`, where the
/// space is missing; any other failure at `from`.
fn copy_error<'a>(
    action: &'a str,
    from: &'a Path,
    to: &'a Path,
) -> impl FnOnce(std::io::Error) -> EngineError + 'a {
    move |e| {
        if rocbuild_probe::space::is_out_of_space(&e) {
            EngineError::no_space(action, to, Some(e))
        } else {
            EngineError::from_io(action, from, e)
        }
    }
}

fn installed_file(rel: &str, path: &Path, built_sha256: Option<String>) -> Result<InstalledFile> {
    let (sha256, size) = sha256_file(path)?;
    Ok(InstalledFile {
        path: rel.to_string(),
        sha256,
        size,
        built_sha256,
        // A rename keeps the mtime: this is the installed file's.
        mtime_ns: std::fs::metadata(path)
            .ok()
            .and_then(|md| manifest::mtime_ns(&md)),
    })
}

impl Stager<'_> {
    /// The rebuilt libraries, with their search paths set in the stage.
    fn built_libraries(&mut self) -> Result<()> {
        for (rel, (abs, built_sha)) in self.built {
            let staged = self.stage.join(rel);
            txn_fs::copy(abs, &staged).map_err(copy_error("stage", abs, &staged))?;
            txn_fs::edited(link::apply(&self.plan.install.link, &staged)).map_err(|n| {
                // Rewriting the library beside itself can find the disk full: not a damage.
                if rocbuild_probe::space::caused_by_out_of_space(&n) {
                    return EngineError::no_space("set the search paths of", &staged, None);
                }
                EngineError::BadArtifact {
                    file: abs.display().to_string(),
                    reason: n.to_string().replace(&staged.display().to_string(), "it"),
                }
            })?;
            let f = installed_file(rel, &staged, Some(built_sha.clone()))?;
            self.record_set
                .insert(rel.clone(), (f.sha256.clone(), f.size));
            self.installed.push(f);
            self.new.push(NewFile {
                rel: rel.clone(),
                staged,
            });
        }
        Ok(())
    }

    /// The pure-Python part, from pip into the stage; the files of the version it replaces
    /// are parked. Returns the new RECORD's path.
    fn python_part(
        &mut self,
        log: &mut RunLog,
        pip: &mut Option<Background>,
        extra: &mut StagedExtra,
    ) -> Result<String> {
        let Some(pp) = self.plan.python_part else {
            return self.pips_record();
        };
        if let Some(b) = &pp.build {
            log.note(&format!(
                "python package: build a wheel of {}",
                pp.distribution
            ));
            log.run("build the Python package", &self.plan.scratch.apply(b))?;
        }
        if let Some(x) = &pp.extension {
            python_extension(log, x, self.plan.scratch, &pp.distribution, &pp.version)?;
        }
        match pip.take() {
            Some(bg) => log.finish(bg)?,
            None => install_part(log, pp)?,
        };
        let libs = globset(&self.plan.install.python_libs)?;
        for (rel, abs) in walk(&pp.target) {
            if rel.starts_with("bin/") || self.built.contains_key(&rel) {
                continue;
            }
            if self.park_set.is_match(&rel) {
                self.dropped.push(rel);
                continue;
            }
            if libs.is_match(&rel) {
                txn_fs::edited(link::apply(&self.plan.install.link, &abs))?;
                let (sha, size) = sha256_file(&abs)?;
                self.record_set.insert(rel.clone(), (sha, size));
            }
            extra.python_files.push(rel.clone());
            self.new.push(NewFile { rel, staged: abs });
        }
        let di = dist_info_dir(&pp.target, &pp.distribution).ok_or_else(|| EngineError::Usage {
            option: "python part".into(),
            reason: format!("pip installed no {}-*.dist-info", pp.distribution),
            help: Some("check the recipe's [package] distribution name".into()),
        })?;
        if let Some(old) = dist_info_dir(self.site, &pp.distribution) {
            let text =
                fs_err::read_to_string(self.site.join(&old).join("RECORD")).unwrap_or_default();
            for (rel, _, _) in record::parse(&text) {
                if !rel.starts_with("..") && !self.new.iter().any(|n| n.rel == rel) {
                    self.park.push(rel);
                }
            }
        }
        Ok(format!("{di}/RECORD"))
    }

    /// No Python part to install: pip's RECORD of the installed package, copied to the stage
    /// to be updated. Returns its path.
    fn pips_record(&mut self) -> Result<String> {
        let dist = &self.plan.install.distribution;
        let di = dist_info_dir(self.site, dist).ok_or_else(|| EngineError::Usage {
            option: "venv".into(),
            reason: format!("{} has no {dist}-*.dist-info", self.site.display()),
            help: Some("install the package with pip first".into()),
        })?;
        let record_rel = format!("{di}/RECORD");
        let from = self.site.join(&di).join("RECORD");
        let to = self.stage.join(&record_rel);
        txn_fs::copy(&from, &to).map_err(copy_error("copy", &from, &to))?;
        self.new.push(NewFile {
            rel: record_rel.clone(),
            staged: to,
        });
        Ok(record_rel)
    }

    /// The wheel's own libraries that the rebuilt ones do not replace.
    fn wheel_libraries_to_park(&mut self) {
        for (rel, _) in walk_park_roots(self.site, &self.plan.install.park) {
            if self.park_set.is_match(&rel)
                && !self.built.contains_key(&rel)
                && !self.park.contains(&rel)
            {
                self.park.push(rel);
            }
        }
        let new = &self.new;
        self.park.retain(|p| !new.iter().any(|n| &n.rel == p));
    }

    /// Windows: the DLL preload hook (not part of the distribution: not in RECORD).
    fn preload_hook(&mut self) -> Result<()> {
        let Link::Preload(p) = &self.plan.install.link else {
            return Ok(());
        };
        let staged: Vec<PathBuf> = self.built.keys().map(|rel| self.stage.join(rel)).collect();
        let mut dlls = link::preload_order(&staged, &p.dirs)?;
        let mut p = p.clone();
        if self.plan.cross.is_some() {
            // A Windows venv on this Unix host: its Python (under Wine) sees `/` as `Z:\`.
            rocbuild_probe::cross::wine_paths(&mut p.dirs);
            rocbuild_probe::cross::wine_paths(&mut dlls);
        }
        let p = &p;
        for (rel, text) in [
            (
                &p.module_rel,
                link::preload_module(p, self.plan.recipe, self.plan.version, &dlls),
            ),
            (&p.pth_rel, link::preload_pth(p)),
        ] {
            let path = self.stage.join(rel);
            txn_fs::edited(fs_err::write(&path, text)).map_err(EngineError::io("write", &path))?;
            self.installed.push(installed_file(rel, &path, None)?);
            self.new.push(NewFile {
                rel: rel.clone(),
                staged: path,
            });
        }
        Ok(())
    }

    /// RECORD: the parked and dropped files out, the artifacts in with their hashes.
    fn record(&mut self, record_rel: &str, extra: &mut StagedExtra) -> Result<()> {
        let record_staged = self
            .new
            .iter()
            .find(|n| n.rel == record_rel)
            .map(|n| n.staged.clone())
            .unwrap_or_else(|| self.stage.join(record_rel));
        let text = fs_err::read_to_string(&record_staged)
            .map_err(EngineError::io("read", &record_staged))?;
        let mut removed = self.park.clone();
        removed.extend(self.dropped.iter().cloned());
        extra.dropped = std::mem::take(&mut self.dropped);
        extra.record = Some(record_rel.to_string());
        txn_fs::write(
            &record_staged,
            record::update(&text, &removed, &self.record_set).as_bytes(),
        )
        .map_err(EngineError::io("write", &record_staged))
    }
}

impl Stager<'_> {
    /// The run-time requirements the venv lacks (`plan.requirements`): pip installs them under
    /// its prefix in the transaction's directory, every distribution of the venv pinned; their
    /// files (pip wrote their RECORD) are staged as new files, none of them replacing one the
    /// venv has.
    fn requirements(&mut self, log: &mut RunLog, extra: &mut StagedExtra) -> Result<()> {
        let Some(r) = self.plan.requirements else {
            return Ok(());
        };
        if r.prefix.exists() {
            fs_err::remove_dir_all(&r.prefix).map_err(EngineError::io("clean", &r.prefix))?;
        }
        let mut text = r.constraints.join("\n");
        text.push('\n');
        txn_fs::write(&r.constraints_file, text.as_bytes())
            .map_err(EngineError::io("write", &r.constraints_file))?;
        log.note(&format!(
            "requirements: {} (missing from the venv), with its {} installed distributions pinned as they are",
            r.missing.join(", "),
            r.constraints.len()
        ));
        log.run("pip install (requirements)", &r.install)?;
        let site = r.prefix.join(&r.site_in_prefix);
        let files = walk(&site);
        if files.is_empty() {
            return Err(EngineError::Usage {
                option: "requirements".into(),
                reason: format!(
                    "pip installed {} under {}, but nothing is in {}",
                    r.missing.join(", "),
                    r.prefix.display(),
                    site.display()
                ),
                help: Some(format!(
                    "install them yourself ({}), then run again with --no-deps",
                    r.missing.join(" ")
                )),
            });
        }
        let outside = walk(&r.prefix).len() - files.len();
        if outside > 0 {
            log.note(&format!(
                "requirements: {outside} file(s) outside site-packages (console scripts) not installed"
            ));
        }
        for (rel, abs) in &files {
            let there = self.site.join(rel);
            if std::fs::symlink_metadata(&there).is_ok() || self.new.iter().any(|n| &n.rel == rel) {
                return Err(EngineError::Usage {
                    option: "requirements".into(),
                    reason: format!(
                        "pip's install of {} would replace {}, which is already there",
                        r.missing.join(", "),
                        there.display()
                    ),
                    help: Some(
                        "install the requirements yourself, then run again with --no-deps".into(),
                    ),
                });
            }
            self.new.push(NewFile {
                rel: rel.clone(),
                staged: abs.clone(),
            });
        }
        extra.requirements = requirement_records(&files);
        Ok(())
    }
}

/// The distributions pip put in site-packages (their dist-info directories), each with its files as
/// its RECORD lists them; a file no RECORD lists goes with the first, so `restore` removes it.
fn requirement_records(
    files: &[(String, PathBuf)],
) -> Vec<rocbuild_venv::manifest::RequirementRecord> {
    let mut out: Vec<rocbuild_venv::manifest::RequirementRecord> = Vec::new();
    let mut listed = std::collections::BTreeSet::new();
    for (rel, abs) in files {
        let Some((di, "RECORD")) = rel.split_once('/') else {
            continue;
        };
        let Some((name, version)) = di
            .strip_suffix(".dist-info")
            .and_then(|d| d.rsplit_once('-'))
        else {
            continue;
        };
        let text = std::fs::read_to_string(abs).unwrap_or_default();
        let mut own: Vec<String> = record::parse(&text)
            .into_iter()
            .map(|(p, _, _)| p)
            .filter(|p| files.iter().any(|(f, _)| f == p))
            .collect();
        if !own.contains(rel) {
            own.push(rel.clone());
        }
        listed.extend(own.iter().cloned());
        out.push(rocbuild_venv::manifest::RequirementRecord {
            name: name.to_string(),
            version: version.to_string(),
            files: own,
        });
    }
    let rest: Vec<String> = files
        .iter()
        .map(|(f, _)| f.clone())
        .filter(|f| !listed.contains(f))
        .collect();
    match out.first_mut() {
        Some(first) => first.files.extend(rest),
        None => out.push(rocbuild_venv::manifest::RequirementRecord {
            name: "unknown".into(),
            version: String::new(),
            files: rest,
        }),
    }
    out
}

/// What staging learned beyond the files to place, for the manifest and the backup.
#[derive(Default)]
pub(crate) struct StagedExtra {
    pub dropped: Vec<String>,
    pub python_files: Vec<String>,
    pub record: Option<String>,
    /// The missing run-time requirements installed with the package.
    pub requirements: Vec<rocbuild_venv::manifest::RequirementRecord>,
    /// The compiler cache the build ran under, with its hits and misses.
    pub compiler_cache: Option<rocbuild_venv::manifest::CompilerCacheRecord>,
}

/// A glob set of `patterns`, or a usage error naming the bad one.
pub(crate) fn globset(patterns: &[String]) -> Result<GlobSet> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        let g = Glob::new(p).map_err(|e| EngineError::Usage {
            option: format!("glob `{p}`"),
            reason: e.to_string(),
            help: None,
        })?;
        b.add(g);
    }
    b.build().map_err(|e| EngineError::Usage {
        option: "globs".into(),
        reason: e.to_string(),
        help: None,
    })
}

/// The dist-info directory of `dist` in `site` (its name normalized as pip does).
pub(crate) fn dist_info_dir(site: &Path, dist: &str) -> Option<String> {
    let want = rocbuild_probe::normalize_dist(dist);
    let rd = std::fs::read_dir(site).ok()?;
    rd.flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| {
            n.strip_suffix(".dist-info")
                .and_then(|s| s.rsplit_once('-'))
                .is_some_and(|(d, _)| rocbuild_probe::normalize_dist(d) == want)
        })
}

/// Files under the literal directory part of each park glob (`torchcodec/lib*` -> `torchcodec/`).
pub(crate) fn walk_park_roots(site: &Path, globs: &[String]) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut roots: Vec<String> = globs
        .iter()
        .map(|g| {
            g.split('/')
                .take_while(|p| !p.contains(['*', '?', '[', '{']))
                .collect::<Vec<_>>()
                .join("/")
        })
        .collect();
    roots.sort();
    roots.dedup();
    for r in roots {
        if r.is_empty() || r.starts_with("..") {
            continue;
        }
        for (rel, abs) in walk(&site.join(&r)) {
            out.push((format!("{r}/{rel}"), abs));
        }
    }
    out
}

/// The built artifacts by their path under site-packages, with where they are and their hash.
pub(crate) type Built = BTreeMap<String, (PathBuf, String)>;

/// Where the build left its artifacts (the install prefix, the build tree or the checkout:
/// `[install] artifacts-in`), collected as `[install] layout` says and hashed: what staging
/// installs. None found is an error naming the globs and where they were looked for.
/// `(prefix, build_dir, source_dir)`: the three places.
pub(crate) fn built_artifacts(
    install: &super::InstallPlan,
    (prefix, build_dir, source_dir): (&Path, &Path, &Path),
) -> Result<Built> {
    use rocbuild_recipe::schema::{ArtifactLayout, ArtifactsIn};
    let from = match install.artifacts_in {
        ArtifactsIn::Prefix => prefix,
        ArtifactsIn::Build => build_dir,
        ArtifactsIn::Source => source_dir,
    };
    let import = &install.import_dir;
    let artifacts: BTreeMap<String, PathBuf> = match install.layout {
        ArtifactLayout::Flat => collect_artifacts(from, &install.artifacts)?
            .into_iter()
            .map(|(name, abs)| (format!("{import}/{name}"), abs))
            .collect(),
        ArtifactLayout::Site => collect_site_artifacts(from, import, &install.artifacts)?,
    };
    if artifacts.is_empty() {
        return Err(EngineError::NoArtifacts {
            globs: install.artifacts.join(", "),
            prefix: from.display().to_string(),
        });
    }
    hashed(artifacts)
}

/// The artifacts of a prebuilt wheel unpacked at `unpacked`: its package's files that
/// `[install] artifacts` names.
pub(crate) fn prebuilt_artifacts(install: &super::InstallPlan, unpacked: &Path) -> Result<Built> {
    let import = &install.import_dir;
    let artifacts = collect_artifacts(&unpacked.join(import), &install.artifacts)?;
    hashed(
        artifacts
            .into_iter()
            .map(|(name, abs)| (format!("{import}/{name}"), abs))
            .collect(),
    )
}

fn hashed(artifacts: BTreeMap<String, PathBuf>) -> Result<Built> {
    let mut built: Built = BTreeMap::new();
    for (key, abs) in artifacts {
        let sha = rocbuild_venv::manifest::sha256_file(&abs)?.0;
        built.insert(key, (abs, sha));
    }
    Ok(built)
}

/// `[install] layout = "site"`: the files under `root/<import_dir>` whose names match `globs`,
/// keyed by their path under `root` (site-packages' shape), each name its own file (a
/// library's symlinks are copies in a wheel, and the package may load any of its names).
pub(crate) fn collect_site_artifacts(
    root: &Path,
    import_dir: &str,
    globs: &[String],
) -> Result<BTreeMap<String, PathBuf>> {
    let want = globset(globs)?;
    let mut out = BTreeMap::new();
    for (rel, abs) in walk(&root.join(import_dir)) {
        let name = rel.rsplit('/').next().unwrap_or(&rel).to_string();
        if !want.is_match(&name) {
            continue;
        }
        if let Ok(real) = dunce::canonicalize(&abs) {
            out.insert(format!("{import_dir}/{rel}"), real);
        }
    }
    Ok(out)
}

/// The files under the CMake install prefix whose names match `globs`, keyed by the name
/// they are installed under. A versioned library and its symlinks
/// (`libctranslate2.so -> .so.4 -> .so.4.8.1`) become one file, named by its SONAME (what
/// the loader asks for) when the SONAME is among the matched names.
pub(crate) fn collect_artifacts(
    prefix: &Path,
    globs: &[String],
) -> Result<BTreeMap<String, PathBuf>> {
    let want = globset(globs)?;
    let mut groups: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
    for (rel, abs) in walk(prefix) {
        let name = rel.rsplit('/').next().unwrap_or(&rel).to_string();
        if !want.is_match(&name) {
            continue;
        }
        let Ok(real) = dunce::canonicalize(&abs) else {
            continue; // a dangling symlink
        };
        groups.entry(real).or_default().push(name);
    }
    let mut out = BTreeMap::new();
    for (real, names) in groups {
        let real_name = real
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let soname = rocbuild_native::read_binary(&real)
            .ok()
            .and_then(|b| b.soname_or_install_name)
            .and_then(|s| s.rsplit('/').next().map(str::to_string));
        let name = match soname {
            Some(s) if names.contains(&s) => s,
            _ if names.contains(&real_name) => real_name,
            _ => names.iter().min().cloned().unwrap_or(real_name),
        };
        out.entry(name).or_insert(real);
    }
    Ok(out)
}
