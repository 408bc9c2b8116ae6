//! Every relative link in the README and the manual (`docs/`), and in the other READMEs of the
//! repository, points at a file that exists, and every `#anchor` at a heading of its target
//! (GitHub's slugs). A moved or renamed chapter or section fails here instead of on a reader.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Markdown files checked: README.md, docs/*.md, and the READMEs under crates/, packaging/
/// and tools/.
fn documents() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>, only_readme: bool) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out, only_readme);
            } else if p.extension().is_some_and(|x| x == "md")
                && (!only_readme || p.file_name().is_some_and(|n| n == "README.md"))
            {
                out.push(p);
            }
        }
    }
    let r = root();
    let mut out = vec![r.join("README.md")];
    walk(&r.join("docs"), &mut out, false);
    for d in ["crates", "packaging", "tools"] {
        walk(&r.join(d), &mut out, true);
    }
    out.sort();
    out
}

/// Lines outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// GitHub's anchor for a heading: lower case, punctuation dropped (but `-` and `_`), spaces to
/// `-`; a repeated heading gets `-1`, `-2`, ….
fn anchors(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    for line in prose(text) {
        let t = line.trim_start_matches('#');
        if t.len() == line.len() || !t.starts_with(' ') {
            continue;
        }
        let base: String = t
            .trim()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                '-' | '_' => Some(c),
                c if c.is_alphanumeric() => Some(c),
                _ => None,
            })
            .flat_map(char::to_lowercase)
            .collect();
        let mut slug = base.clone();
        let mut n = 0;
        while seen.contains(&slug) {
            n += 1;
            slug = format!("{base}-{n}");
        }
        seen.insert(slug);
    }
    seen
}

/// `(target)` of every `[text](target)` on a line, outside inline code.
fn links(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut code = false;
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'`' => code = !code,
            b']' if !code && b.get(i + 1) == Some(&b'(') => {
                if let Some(end) = line[i + 2..].find(')') {
                    out.push(line[i + 2..i + 2 + end].to_string());
                    i += 2 + end;
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

#[test]
fn relative_links_in_the_readme_and_the_manual_resolve() {
    let docs = documents();
    assert!(docs.len() >= 10, "{docs:?}");
    let mut broken = Vec::new();
    let mut checked = 0;
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        for line in prose(&text) {
            for target in links(line) {
                let target = target.split_whitespace().next().unwrap_or_default();
                if target.is_empty()
                    || target.contains("://")
                    || target.starts_with("mailto:")
                    || target.starts_with('<')
                {
                    continue;
                }
                checked += 1;
                let (file, anchor) = match target.split_once('#') {
                    Some((f, a)) => (f, Some(a)),
                    None => (target, None),
                };
                let path = if file.is_empty() {
                    doc.clone()
                } else {
                    doc.parent().unwrap().join(file)
                };
                let rel = doc.strip_prefix(root()).unwrap().display().to_string();
                if !path.exists() {
                    broken.push(format!("{rel}: {target} (no such file)"));
                    continue;
                }
                if let Some(a) = anchor
                    && path.extension().is_some_and(|x| x == "md")
                    && !anchors(&std::fs::read_to_string(&path).unwrap()).contains(a)
                {
                    broken.push(format!("{rel}: {target} (no such heading)"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(
        checked > 40,
        "only {checked} links found: is the parser right?"
    );
}

#[test]
fn the_readme_is_a_front_door() {
    let text = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = text.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines; move detail into docs/"
    );
    for chapter in std::fs::read_dir(root().join("docs")).unwrap() {
        let name = chapter.unwrap().file_name().into_string().unwrap();
        assert!(
            text.contains(&format!("(docs/{name})")),
            "README.md does not link docs/{name}"
        );
    }
}

#[test]
fn anchors_follow_github() {
    let a = anchors(
        "# The image API\n## Choices where the specification says \"not shown\"\n```\n# not a heading\n```\n## API\n## API\n### `GET /v1/me` — you\n",
    );
    for want in [
        "the-image-api",
        "choices-where-the-specification-says-not-shown",
        "api",
        "api-1",
        "get-v1me--you",
    ] {
        assert!(a.contains(want), "{want} not in {a:?}");
    }
    assert!(!a.contains("not-a-heading"));
    assert_eq!(
        links("see [a](x.md#y) and `[b](z)` and [c](d)"),
        ["x.md#y", "d"]
    );
}
