//! The documentation's promises, checked against what they describe: the
//! README's "Using it from C" program and commands, run verbatim on a copy of
//! the repository as a fresh clone has it (no `target/`), and the fault table
//! of docs/RUN.md against `aclalloc --help`.

mod common;

use std::path::Path;
use std::process::Command;

fn readme() -> String {
    std::fs::read_to_string(common::root().join("README.md")).expect("README.md")
}

/// The text of the section starting at `heading`, up to the next `## `.
fn section<'a>(text: &'a str, heading: &str) -> &'a str {
    let start = text
        .find(heading)
        .unwrap_or_else(|| panic!("README lacks {heading}"));
    let rest = &text[start + heading.len()..];
    &rest[..rest.find("\n## ").unwrap_or(rest.len())]
}

/// The section's first ```c block and its indented command lines.
fn program_and_commands(section: &str) -> (String, Vec<String>) {
    let code_start = section.find("```c\n").expect("a ```c block") + 5;
    let code_len = section[code_start..].find("```").expect("the block's end");
    let program = section[code_start..code_start + code_len].to_owned();
    let commands = section[code_start + code_len..]
        .lines()
        .filter_map(|l| l.strip_prefix("    "))
        .map(str::to_owned)
        .collect();
    (program, commands)
}

/// The repository's files as a clone has them: what git tracks plus what is
/// new and not ignored (so the test sees uncommitted work), without target/.
fn fresh_copy(to: &Path) {
    let root = common::root();
    let listed = Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(&root)
        .output()
        .expect("run git");
    assert!(listed.status.success(), "git ls-files failed");
    for name in listed.stdout.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let name = std::str::from_utf8(name).unwrap();
        let from = root.join(name);
        if !from.is_file() {
            continue; // deleted in the working tree
        }
        let dest = to.join(name);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(&from, &dest).unwrap_or_else(|e| panic!("copy {name}: {e}"));
    }
}

#[test]
fn using_it_from_c_works_verbatim_on_a_fresh_clone() {
    let text = readme();
    let (program, commands) = program_and_commands(section(&text, "## Using it from C"));
    assert_eq!(
        commands.first().map(String::as_str),
        Some("scripts/build.sh"),
        "{commands:?}"
    );
    assert!(
        commands.iter().any(|c| c.starts_with("cc ")),
        "{commands:?}"
    );

    let clone = common::scratch("readme_clone");
    fresh_copy(&clone);
    assert!(!clone.join("target").exists());
    std::fs::write(clone.join("app.c"), program).unwrap();
    let mut last = None;
    for command in &commands {
        let out = Command::new("sh")
            .args(["-c", command])
            .current_dir(&clone)
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("LD_LIBRARY_PATH")
            .output()
            .expect("run sh");
        assert!(
            out.status.success(),
            "`{command}` failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        last = Some(out);
    }
    let stdout = String::from_utf8_lossy(&last.unwrap().stdout).into_owned();
    assert!(
        stdout.starts_with("100 launches, peak ") && stdout.ends_with(" bytes\n"),
        "{stdout}"
    );
    let peak: u64 = stdout
        .trim_end()
        .trim_end_matches(" bytes")
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(peak >= 1 << 20, "{stdout}");
    let _ = std::fs::remove_dir_all(&clone);
}

/// Every fault kind `aclalloc --help` names has a row in docs/RUN.md's
/// table, and the table has no other.
#[test]
fn fault_table_matches_help() {
    let help = Command::new(env!("CARGO_BIN_EXE_aclalloc"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let kinds_in_help: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.contains("KIND one of:"))
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with("Each fault"))
        .filter(|l| l.starts_with("      ") && !l.starts_with("        "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(kinds_in_help.len() >= 8, "{kinds_in_help:?}");
    let text = std::fs::read_to_string(common::root().join("docs/RUN.md")).expect("docs/RUN.md");
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "| fault | meaning |")
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.split('`').nth(1))
        .collect();
    assert_eq!(
        table, kinds_in_help,
        "docs/RUN.md fault table vs aclalloc --help"
    );
}
