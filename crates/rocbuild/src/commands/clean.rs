//! `rocbuild clean`: what the cache holds, and removing it by kind.

use miette::Result;

use crate::cli::CleanArgs;
use crate::settings::Settings;
use crate::ExitStatus;

pub fn clean(a: &CleanArgs, st: &Settings) -> Result<ExitStatus> {
    use rocbuild_engine::clean::{human, remove, usage, Kind};
    let cache = st.cache()?;
    let mut kinds = Vec::new();
    if a.sources || a.all {
        kinds.push(Kind::Sources);
    }
    if a.builds || a.all {
        kinds.push(Kind::Builds);
    }
    if a.logs || a.all {
        kinds.push(Kind::Logs);
    }
    outln!("cache: {}", cache.display());
    let u = usage(&cache);
    let mut total = 0;
    for x in &u {
        total += x.bytes;
        let mark = if kinds.contains(&x.kind) {
            if a.dry_run {
                "  (would remove)"
            } else {
                "  (removing)"
            }
        } else {
            ""
        };
        outln!("  {:<8} {:>10}{mark}", x.kind.as_str(), human(x.bytes));
    }
    outln!("  {:<8} {:>10}", "total", human(total));
    if kinds.is_empty() {
        outln!("remove with --sources, --builds, --logs or --all (--dry-run to preview)");
    } else if !a.dry_run {
        let freed = remove(&cache, &kinds)?;
        outln!("freed {}", human(freed));
    }
    Ok(ExitStatus::Success)
}
