//! `rocbuild clean`: what the cache holds, and removing it by kind.

use miette::Result;

use crate::cli::CleanArgs;
use crate::settings::Settings;
use crate::ExitStatus;

pub fn clean(a: &CleanArgs, st: &Settings) -> Result<ExitStatus> {
    use rocbuild_engine::clean::{human, Kind};
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
    let done = rocbuild_engine::usecase::clean(&cache, &kinds, a.dry_run)?;
    outln!("cache: {}", cache.display());
    let mut total = 0;
    for x in &done.usage {
        total += x.bytes;
        let mark = if kinds.contains(&x.kind) {
            if a.dry_run {
                "  (would remove)"
            } else {
                "  (removed)"
            }
        } else {
            ""
        };
        outln!("  {:<8} {:>10}{mark}", x.kind.as_str(), human(x.bytes));
    }
    outln!("  {:<8} {:>10}", "total", human(total));
    if kinds.is_empty() {
        outln!("remove with --sources, --builds, --logs or --all (--dry-run to preview)");
    } else if let Some(freed) = done.freed {
        outln!("freed {}", human(freed));
    }
    Ok(ExitStatus::Success)
}
