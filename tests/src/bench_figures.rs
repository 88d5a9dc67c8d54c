//! The guide's benchmark figures against their source. A page quotes a measured figure
//! as the text of a link to the section it comes from, in `BENCHMARKS.md` (the latest
//! full run) or under `docs/benchmarks/` (the record by date):
//!
//! ```text
//! sealed payloads keep [0.95 of plain's rate at concurrency 100](benchmarks/2026-12-06.md#encrypted-payloads-47-2026-12-06)
//! ```
//!
//! and this test checks every such link: its file and anchor exist, and every number of
//! its text is in that section. A page that names `BENCHMARKS.md` outside a link is
//! refused too: "see BENCHMARKS.md" is how a figure drifts from its source unnoticed.
//! When a new run replaces `BENCHMARKS.md`, the links into it that no longer hold fail
//! here and say which page to update.
#![cfg(test)]

use std::path::{Component, Path, PathBuf};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The pages people read for how the framework behaves: the READMEs and the guide
/// (`docs/`, but not the benchmarks' own record).
fn pages() -> Vec<PathBuf> {
    let root = root();
    let mut pages = vec![
        root.join("README.md"),
        root.join("examples/welcome-app/README.md"),
    ];
    for entry in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        let readme = entry.path().join("README.md");
        let is_crate = entry.file_name().to_string_lossy().starts_with("queue-");
        if is_crate && readme.is_file() {
            pages.push(readme);
        }
    }
    let mut stack = vec![root.join("docs")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() && path.file_name().is_some_and(|n| n != "benchmarks") {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    pages.sort();
    pages
}

/// A Markdown link: its text and its target.
#[derive(Debug, PartialEq)]
struct Link {
    text: String,
    target: String,
}

/// The inline links of `markdown`, `[text](target)`, nested brackets in the text
/// included; code spans are left as they are.
fn links(markdown: &str) -> Vec<Link> {
    let chars: Vec<char> = markdown.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '[' {
            i += 1;
            continue;
        }
        // The matching `]`, then `(`.
        let mut depth = 0;
        let mut j = i;
        let mut close = None;
        while j < chars.len() {
            match chars[j] {
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(j);
                        break;
                    }
                }
                '\n' if j + 1 < chars.len() && chars[j + 1] == '\n' => break,
                _ => {}
            }
            j += 1;
        }
        let Some(close) = close else {
            i += 1;
            continue;
        };
        if chars.get(close + 1) != Some(&'(') {
            i += 1;
            continue;
        }
        let Some(end) = chars[close + 2..].iter().position(|&c| c == ')') else {
            i += 1;
            continue;
        };
        let target: String = chars[close + 2..close + 2 + end].iter().collect();
        let text: String = chars[i + 1..close].iter().collect();
        found.push(Link { text, target });
        i = close + 2 + end + 1;
    }
    found
}

/// The numbers of `text` as written, thousands separators dropped: `1,450` -> `1450`,
/// `0.96` -> `0.96`, but `1,10` is two numbers. A trailing full stop is not a decimal
/// point.
fn numbers(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = text.chars().collect();
    let digit_at = |k: usize| chars.get(k).is_some_and(char::is_ascii_digit);
    for (k, &c) in chars.iter().enumerate() {
        let next_is_digit = digit_at(k + 1);
        let thousands = (1..=3).all(|d| digit_at(k + d)) && !digit_at(k + 4);
        if c.is_ascii_digit() {
            current.push(c);
        } else if !current.is_empty() && c == ',' && thousands && !current.contains('.') {
            // A thousands separator: skipped.
        } else if !current.is_empty() && c == '.' && next_is_digit && !current.contains('.') {
            current.push(c);
        } else if !current.is_empty() {
            found.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        found.push(current);
    }
    found
}

/// A heading's anchor as GitHub and mdBook make it: lower case, spaces to hyphens, other
/// punctuation dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

/// The text of the section of `markdown` whose heading has the anchor `anchor`, from its
/// heading to the next heading of the same level or above; `None` when no heading has it.
/// A repeated heading's anchors take `-1`, `-2`.. as GitHub gives them.
fn section<'a>(markdown: &'a str, anchor: &str) -> Option<&'a str> {
    let mut seen: Vec<String> = Vec::new();
    let mut start: Option<(usize, usize)> = None;
    let mut offset = 0;
    let mut in_code = false;
    for line in markdown.split_inclusive('\n') {
        if line.starts_with("```") {
            in_code = !in_code;
        }
        let level = line.chars().take_while(|&c| c == '#').count();
        let is_heading = !in_code && level > 0 && line[level..].starts_with(' ');
        if is_heading {
            if let Some((from, from_level)) = start {
                if level <= from_level {
                    return Some(&markdown[from..offset]);
                }
            } else {
                let base = slug(&line[level..]);
                let repeats = seen.iter().filter(|s| **s == base).count();
                let this = if repeats == 0 {
                    base.clone()
                } else {
                    format!("{base}-{repeats}")
                };
                seen.push(base);
                if this == anchor {
                    start = Some((offset, level));
                }
            }
        }
        offset += line.len();
    }
    start.map(|(from, _)| &markdown[from..])
}

/// `target` of a link on `page`, resolved, if it points at the benchmarks' record.
fn benchmark_source(page: &Path, target: &str) -> Option<(PathBuf, Option<String>)> {
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor.to_owned())),
        None => (target, None),
    };
    if path.is_empty() || path.contains("://") {
        return None;
    }
    let mut resolved = page.parent()?.to_path_buf();
    for component in Path::new(path).components() {
        match component {
            Component::ParentDir => {
                resolved.pop();
            }
            Component::Normal(part) => resolved.push(part),
            _ => {}
        }
    }
    let root = root();
    let is_source = resolved == root.join("BENCHMARKS.md")
        || (resolved.starts_with(root.join("docs/benchmarks"))
            && resolved.extension().is_some_and(|e| e == "md"));
    is_source.then_some((resolved, anchor))
}

/// `markdown` without its fenced code blocks, whose text is code, not prose or links.
fn prose(markdown: &str) -> String {
    let mut fence: Option<&str> = None;
    let mut kept = String::new();
    for line in markdown.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(marker)) => fence = Some(marker),
            (Some(open), Some(marker)) if open == marker => fence = None,
            (None, None) => kept.push_str(line),
            _ => {}
        }
    }
    kept
}

/// The reference definitions of `markdown` (`[name]: target`), as links.
fn definitions(markdown: &str) -> Vec<Link> {
    markdown
        .lines()
        .filter_map(|line| {
            let rest = line.trim_start().strip_prefix('[')?;
            let (text, target) = rest.split_once("]:")?;
            let target = target.split_whitespace().next()?;
            Some(Link {
                text: text.to_owned(),
                target: target.to_owned(),
            })
        })
        .collect()
}

/// What is wrong with the benchmark links of `page` (whose text is `markdown`).
fn problems(page: &Path, markdown: &str) -> Vec<String> {
    let name = page
        .strip_prefix(root())
        .unwrap_or(page)
        .display()
        .to_string();
    let mut problems = Vec::new();
    let markdown = prose(markdown);
    let markdown = markdown.as_str();
    let mut links = links(markdown);
    links.extend(definitions(markdown));
    // Every mention of BENCHMARKS.md is a link (its text or its target).
    let mentions = markdown.matches("BENCHMARKS.md").count();
    let linked: usize = links
        .iter()
        .map(|l| {
            l.text.matches("BENCHMARKS.md").count() + l.target.matches("BENCHMARKS.md").count()
        })
        .sum();
    if mentions > linked {
        problems.push(format!(
            "{name}: names BENCHMARKS.md outside a link ({} times): quote a figure as a link \
             to its section",
            mentions - linked
        ));
    }
    for link in &links {
        let Some((source, anchor)) = benchmark_source(page, &link.target) else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(&source) else {
            problems.push(format!(
                "{name}: [{}]({}): no such file",
                link.text, link.target
            ));
            continue;
        };
        // A link named after its page's date ("[2026-12-01](benchmarks/2026-12-01.md)")
        // names the page, not a figure.
        let page_name = source
            .file_stem()
            .map(|stem| numbers(&stem.to_string_lossy()))
            .unwrap_or_default();
        let figures: Vec<String> = numbers(&link.text)
            .into_iter()
            .filter(|n| !page_name.contains(n))
            .collect();
        let Some(anchor) = anchor else {
            if !figures.is_empty() {
                problems.push(format!(
                    "{name}: [{}]({}): a figure's link names its section (#anchor)",
                    link.text, link.target
                ));
            }
            continue;
        };
        let Some(section) = section(&text, &anchor) else {
            problems.push(format!(
                "{name}: [{}]({}): no heading with that anchor",
                link.text, link.target
            ));
            continue;
        };
        let in_section: Vec<String> = numbers(section);
        for figure in figures {
            if !in_section.contains(&figure) {
                problems.push(format!(
                    "{name}: [{}]({}): {figure} is not in that section",
                    link.text, link.target
                ));
            }
        }
    }
    problems
}

#[test]
fn every_figure_the_guide_quotes_is_in_the_section_it_links() {
    let pages = pages();
    assert!(pages.len() > 10, "found only {pages:?}");
    let problems: Vec<String> = pages
        .iter()
        .flat_map(|page| {
            let markdown = std::fs::read_to_string(page).unwrap_or_default();
            problems(page, &markdown)
        })
        .collect();
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn links_numbers_and_anchors_are_read_as_markdown_writes_them() {
    assert_eq!(
        links("see [0.95 of [plain]](a.md#x) and [b](c)."),
        [
            Link {
                text: "0.95 of [plain]".into(),
                target: "a.md#x".into()
            },
            Link {
                text: "b".into(),
                target: "c".into()
            }
        ]
    );
    assert_eq!(
        numbers("1,450 jobs/s, 0.96 and 41."),
        ["1450", "0.96", "41"]
    );
    assert_eq!(
        numbers("1,10 or 100 groups, 2,200"),
        ["1", "10", "100", "2200"]
    );
    assert_eq!(prose("a\n```sh\nBENCHMARKS.md\n```\nb\n"), "a\nb\n");
    assert_eq!(
        definitions("[bench]: ../BENCHMARKS.md#x \"t\""),
        [Link {
            text: "bench".into(),
            target: "../BENCHMARKS.md#x".into()
        }]
    );
    assert_eq!(
        slug("Encrypted payloads (#47, 2026-12-06)"),
        "encrypted-payloads-47-2026-12-06"
    );
    let doc = "# T\n## A\none 1\n### A.1\ntwo 2\n## B\nthree 3\n## A\nfour 4\n";
    assert_eq!(section(doc, "a"), Some("## A\none 1\n### A.1\ntwo 2\n"));
    assert_eq!(section(doc, "a-1"), Some("## A\nfour 4\n"));
    assert_eq!(section(doc, "c"), None);
}

#[test]
fn a_figure_missing_from_its_section_or_named_outside_a_link_is_reported() {
    let page = root().join("docs/page.md");
    let good = "rate [0.95](benchmarks/2026-12-06.md#encrypted-payloads-47-2026-12-06)";
    assert_eq!(problems(&page, good), Vec::<String>::new());
    let wrong = "rate [0.9512345](benchmarks/2026-12-06.md#encrypted-payloads-47-2026-12-06)";
    assert_eq!(
        problems(&page, wrong).len(),
        1,
        "{:?}",
        problems(&page, wrong)
    );
    let no_anchor = "rate [0.95](benchmarks/2026-12-06.md)";
    assert_eq!(problems(&page, no_anchor).len(), 1);
    let plain = "the rate is in `BENCHMARKS.md`, \"Encrypted payloads\"";
    assert_eq!(problems(&page, plain).len(), 1);
    let linked = "[`BENCHMARKS.md`](../BENCHMARKS.md)";
    assert_eq!(problems(&page, linked), Vec::<String>::new());
    let dated = "[2026-12-06](benchmarks/2026-12-06.md)";
    assert_eq!(problems(&page, dated), Vec::<String>::new());
}
