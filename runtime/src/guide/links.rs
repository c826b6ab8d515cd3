//! Every relative link of the repository's Markdown (the front page, the guide, `docs/`, the
//! other pages) leads to a file that exists, and a link with a `#heading` to a heading of that
//! file; every chapter of the guide is a doc test and is linked from the front page.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Component, Path, PathBuf};

/// The guide's chapters whose examples another crate's doc tests compile (the testkit's).
const TESTED_ELSEWHERE: [&str; 2] = ["testing.md", "local-servers.md"];

/// The repository's root: the runtime crate's parent folder.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the runtime crate sits in the repository")
        .to_path_buf()
}

/// Every Markdown file of the repository (the front page, `docs/`, the other top-level pages,
/// the CLI's README), relative to the root, in order; build output and hidden folders left out.
fn checked_files(root: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, found: &mut Vec<PathBuf>) {
        let entries = fs::read_dir(root.join(dir)).expect("a readable folder");
        for entry in entries {
            let name = entry.expect("a folder entry").file_name();
            let path = dir.join(&name);
            if root.join(&path).is_dir() {
                let skipped = name.to_string_lossy().starts_with('.') || name == "target";
                if !skipped {
                    walk(root, &path, found);
                }
            } else if path.extension().is_some_and(|e| e == "md") {
                found.push(path);
            }
        }
    }
    let mut found = Vec::new();
    walk(root, Path::new(""), &mut found);
    found.sort();
    found
}

/// The text of a Markdown file outside its fenced code blocks, with inline code spans taken
/// out (a span may run over several lines), and the headings found there.
struct Prose {
    text: String,
    headings: Vec<String>,
}

fn prose(markdown: &str) -> Prose {
    let mut text = String::new();
    let mut headings = Vec::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let level = line.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&level) && line[level..].starts_with(' ') {
            headings.push(line[level..].trim().to_string());
        }
        text.push_str(line);
        text.push('\n');
    }
    let mut outside_code = String::new();
    let mut in_code = false;
    for c in text.chars() {
        if c == '`' {
            in_code = !in_code;
        } else if !in_code {
            outside_code.push(c);
        }
    }
    Prose {
        text: outside_code,
        headings,
    }
}

/// The anchor a heading gets when the Markdown is rendered: lower case, punctuation dropped,
/// spaces turned into hyphens; a repeated heading gets `-1`, `-2`, ... after the first.
fn anchors(headings: &[String]) -> Vec<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    headings
        .iter()
        .map(|heading| {
            let slug: String = heading
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
                .map(|c| if c == ' ' { '-' } else { c })
                .collect();
            let n = seen.entry(slug.clone()).or_insert(0);
            let anchor = match *n {
                0 => slug,
                n => format!("{slug}-{n}"),
            };
            *n += 1;
            anchor
        })
        .collect()
}

/// The targets of the inline links `[text](target)` in `text`.
fn link_targets(text: &str) -> Vec<&str> {
    text.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &text[at + 2..];
            rest.find(')').map(|end| rest[..end].trim())
        })
        .collect()
}

/// `path` with `.` and `..` resolved without touching the file system; `None` when it climbs
/// above the root.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            other => out.push(other),
        }
    }
    Some(out)
}

/// Every broken relative link of `files` (paths relative to the root), as
/// `file: [target]: what is wrong`. `read` gives a Markdown file's text, `exists` says
/// whether a path (file or folder) is there.
fn broken_links(
    files: &[PathBuf],
    read: &dyn Fn(&Path) -> Option<String>,
    exists: &dyn Fn(&Path) -> bool,
) -> Vec<String> {
    let mut broken = Vec::new();
    for file in files {
        let text = read(file).unwrap_or_else(|| panic!("{} cannot be read", file.display()));
        let dir = file.parent().unwrap_or(Path::new(""));
        for target in link_targets(&prose(&text).text) {
            // Web addresses are not checked here; build output exists only after a run.
            let written_by_a_run = target.starts_with("target/");
            if target.contains("://") || target.starts_with("mailto:") || written_by_a_run {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (target, None),
            };
            let linked = match path {
                "" => Some(file.clone()),
                path => normalize(&dir.join(path)),
            };
            let Some(linked) = linked else {
                broken.push(format!(
                    "{}: [{target}]: leaves the repository",
                    file.display()
                ));
                continue;
            };
            if !exists(&linked) {
                broken.push(format!("{}: [{target}]: no such file", file.display()));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if linked.extension().is_none_or(|e| e != "md") {
                broken.push(format!(
                    "{}: [{target}]: an anchor in a file that is not Markdown",
                    file.display()
                ));
                continue;
            }
            let headings = prose(&read(&linked).unwrap_or_default()).headings;
            if !anchors(&headings).iter().any(|a| a == anchor) {
                broken.push(format!(
                    "{}: [{target}]: no heading #{anchor} in {}",
                    file.display(),
                    linked.display()
                ));
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_leads_to_a_file_and_heading_that_exist() {
    let root = root();
    let files = checked_files(&root);
    assert!(
        files.len() > 20,
        "the guide's chapters are found: {files:?}"
    );
    let broken = broken_links(
        &files,
        &|path| fs::read_to_string(root.join(path)).ok(),
        &|path| root.join(path).exists(),
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The checker finds what it is for: a missing file, a missing heading, a link that leaves the
/// repository; and leaves alone links in code, web addresses and headings that exist.
#[test]
fn the_link_check_reports_missing_files_and_headings() {
    let files: BTreeMap<PathBuf, &str> = [
        (
            "README.md",
            "# Top\n\n\
             See [a](docs/a.md#the-rule-one-write), [b](docs/b.md), [c](docs/a.md#gone),\n\
             [up](../outside.md), [here](#top), [`code`](docs/a.md),\n\
             [web](https://example.com/x#y). `[not a link](docs/none.md)` and\n\
             ```rust\nlet x = [1](nothing.md);\n```\n",
        ),
        (
            "docs/a.md",
            "# A\n\n## The rule: one write!\n\n```text\n# not a heading\n```\n",
        ),
    ]
    .into_iter()
    .map(|(path, text)| (PathBuf::from(path), text))
    .collect();
    let readme = [PathBuf::from("README.md")];
    let broken = broken_links(
        &readme,
        &|path| files.get(path).map(|text| text.to_string()),
        &|path| files.contains_key(path),
    );
    assert_eq!(
        broken,
        [
            "README.md: [docs/b.md]: no such file",
            "README.md: [docs/a.md#gone]: no heading #gone in docs/a.md",
            "README.md: [../outside.md]: leaves the repository",
        ]
    );
    assert_eq!(
        anchors(&[
            "Calls whose outcome is unknown (issue 45)".into(),
            "Top".into(),
            "Top".into()
        ]),
        ["calls-whose-outcome-is-unknown-issue-45", "top", "top-1"]
    );
}

#[test]
fn every_chapter_is_a_doc_test_and_linked_from_the_front_page() {
    let root = root();
    let includes = include_str!("mod.rs");
    let front_page = fs::read_to_string(root.join("README.md")).expect("the front page");
    let mut chapters = 0;
    for entry in fs::read_dir(root.join("docs/guide")).expect("the guide's folder") {
        let name = entry
            .expect("a chapter")
            .file_name()
            .to_string_lossy()
            .into_owned();
        if !name.ends_with(".md") {
            continue;
        }
        chapters += 1;
        let included = includes.contains(&format!("include_str!(\"../../../docs/guide/{name}\")"));
        assert!(
            included || TESTED_ELSEWHERE.contains(&name.as_str()),
            "docs/guide/{name} is not a doc test: add it to runtime/src/guide/mod.rs"
        );
        assert!(
            front_page.contains(&format!("](docs/guide/{name}")),
            "the front page does not link docs/guide/{name}"
        );
    }
    assert!(chapters > 15, "the guide's chapters are found");
}
