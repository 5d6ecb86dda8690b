//! The reference generated from the command line's own definition: shell completions
//! (clap_complete), the man page (clap_mangen) and docs/reference.md (every command's `--help`),
//! which a test keeps equal to what clap says.

use std::io::Write;

use clap::CommandFactory;

use crate::cli::Cli;

pub fn completions(shell: clap_complete::Shell, out: &mut dyn Write) -> std::io::Result<()> {
    clap_complete::generate(shell, &mut Cli::command(), "rocbuild", out);
    Ok(())
}

pub fn man(out: &mut dyn Write) -> std::io::Result<()> {
    clap_mangen::Man::new(Cli::command()).render(out)
}

/// docs/reference.md: `rocbuild --help`, then each command's, at a fixed width.
#[cfg(test)]
pub fn markdown() -> String {
    let mut root = Cli::command().term_width(100).max_term_width(100);
    root.build();
    let mut out = String::from(
        "# rocbuild reference\n\n\
         Generated from the command line's definition (`cargo test -p rocbuild --bins \
         reference` checks it; `ROCBUILD_BLESS=1` rewrites it). The same text is in \
         `rocbuild help COMMAND`; `rocbuild man` prints a man page and \
         `rocbuild completions bash|zsh|fish|powershell|elvish` the shell completions.\n",
    );
    let mut section = |title: &str, cmd: &mut clap::Command| {
        let help = cmd.render_long_help().to_string();
        let help: Vec<&str> = help.lines().map(str::trim_end).collect();
        out += &format!(
            "\n## {title}\n\n```text\n{}\n```\n",
            help.join("\n").trim_end()
        );
    };
    section("rocbuild", &mut root.clone());
    let names: Vec<String> = root
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name().to_string())
        .collect();
    for name in names {
        if let Some(sub) = root.find_subcommand_mut(&name) {
            let mut sub = sub.clone().bin_name(format!("rocbuild {name}"));
            section(&format!("rocbuild {name}"), &mut sub);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_md_is_what_clap_says() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/reference.md");
        let want = markdown();
        if std::env::var_os("ROCBUILD_BLESS").is_some() {
            std::fs::write(path, &want).unwrap();
        }
        let have = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            have == want,
            "docs/reference.md is not what `rocbuild help` says: run `ROCBUILD_BLESS=1 cargo test -p rocbuild --bins reference` and commit it"
        );
        for cmd in [
            "status",
            "rebuild",
            "doctor",
            "bundle",
            "repair",
            "completions",
        ] {
            assert!(want.contains(&format!("## rocbuild {cmd}\n")), "{cmd}");
        }
        assert!(want.contains("--winsysroot"), "the build flags are listed");
    }

    #[test]
    fn completions_and_man_page_name_every_command() {
        let mut bash = Vec::new();
        completions(clap_complete::Shell::Bash, &mut bash).unwrap();
        let bash = String::from_utf8(bash).unwrap();
        for cmd in ["status", "doctor", "bundle", "repair", "completions"] {
            assert!(bash.contains(cmd), "{cmd} not completed");
        }
        assert!(bash.contains("--winsysroot"));
        let mut roff = Vec::new();
        man(&mut roff).unwrap();
        let roff = String::from_utf8(roff).unwrap();
        assert!(
            roff.starts_with(".ie \\n(.g .ds Aq"),
            "{}",
            &roff[..80.min(roff.len())]
        );
        assert!(
            roff.contains("rocbuild\\-doctor") || roff.contains("doctor"),
            "{roff}"
        );
    }
}
