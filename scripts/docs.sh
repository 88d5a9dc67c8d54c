#!/usr/bin/env bash
# Builds the guide (docs/, an mdBook) into target/book, and checks that no page of the
# README, the guide or the example's README links outside the repository. The Rust
# blocks of those pages are doctests of the queue-tests crate (tests/src/doc_pages.rs),
# run by `cargo test`.
#
# Installs mdBook when it is missing: `cargo install` of one pinned version, without its
# default features (no live server, no file watcher, no search index), which keeps the
# build small. Its MSRV (1.82) is below ours.
set -euo pipefail
cd "$(dirname "$0")/.."

MDBOOK_VERSION=0.4.52

if ! command -v mdbook >/dev/null || [ "$(mdbook --version)" != "mdbook v$MDBOOK_VERSION" ]; then
  echo "==> installing mdbook $MDBOOK_VERSION"
  cargo install mdbook --locked --no-default-features --version "$MDBOOK_VERSION"
fi

echo "==> the guide (mdbook build docs -> target/book)"
mdbook build docs

echo "==> every page of the guide is a doctest somewhere"
# tests/src/doc_pages.rs lists the pages by hand; queue-core includes four of them as its
# own docs (queue-core/docs/ links to them). A page in neither would never be compiled.
# docs/benchmarks/ is the benchmarks' record, not a guide page: it holds no Rust.
for page in $(find docs -path docs/benchmarks -prune -o -name '*.md' ! -name SUMMARY.md -print | sort); do
  name=${page#docs/}
  if ! grep -qF "\"../../docs/$name\"" tests/src/doc_pages.rs &&
    [ "$(readlink "queue-core/docs/$(basename "$page")" 2>/dev/null)" != "../../$page" ]; then
    echo "$page is not compiled as a doctest: list it in tests/src/doc_pages.rs" >&2
    exit 1
  fi
done

echo "==> links of the README, the guide and the example's README"
root=$(pwd -P)
pages=(README.md examples/welcome-app/README.md)
while IFS= read -r page; do pages+=("$page"); done < <(find docs -name '*.md' | sort)
# Addresses a page may name: local services of the examples, the crates' registry and
# docs, and this repository itself.
allowed='^https?://(127\.0\.0\.1|localhost)([:/]|$)|^https://(crates\.io|docs\.rs)/|^https://github\.com/queue-rs/queue-rs([/.]|$)'
bad=0
for page in "${pages[@]}"; do
  dir=$(dirname "$page")
  # Every address written out, in a link or in the text.
  while IFS= read -r url; do
    if ! [[ $url =~ $allowed ]]; then
      echo "$page: links outside the repository: $url" >&2
      bad=1
    fi
  done < <(grep -oE 'https?://[^] )"'"'"'`<>]+' "$page" || true)
  # Every Markdown link to a path: it must name a file or folder inside the repository.
  while IFS= read -r target; do
    case $target in
      http://* | https://* | '#'* | mailto:*) continue ;;
    esac
    path=${target%%#*}
    [ -z "$path" ] && continue
    resolved=$(realpath -m "$dir/$path")
    if [[ $resolved != "$root"/* ]]; then
      echo "$page: links outside the repository: $target" >&2
      bad=1
    elif [ ! -e "$resolved" ]; then
      echo "$page: links to a missing file: $target" >&2
      bad=1
    fi
  done < <(grep -oE '\]\([^) ]+\)' "$page" | sed -E 's/^\]\((.*)\)$/\1/' || true)
done
if [ "$bad" -ne 0 ]; then
  echo "fix the links above: pages link only inside the repository (or to crates.io / docs.rs)" >&2
  exit 1
fi
echo "the guide is in target/book/index.html; every link stays in the repository"
