#!/usr/bin/env python3
"""Makes the README's quick start into a project, as a new user would from the README
alone: the Install section's dependencies (the published crates' versions in place of
the paths into a clone) and the Quick start's code, unchanged but for the three values
a test must choose itself: the Redis URL, the key prefix and the port (0: any free one;
the app prints the address it got). Each of those must appear exactly once, so an edit
of the README that moves them is noticed here rather than tested around.

Also prints, as JSON, what the README's "Try it" block shows: the request's body and
the answer's status line, `location` header and JSON body, which scripts/downstream.sh
compares with the running app's.

Usage: readme-quickstart.py README.md DIR REDIS_URL PREFIX VERSION
"""
import json
import re
import sys


def block_after(text, heading, lang):
    """The first fenced block of `lang` after the line `heading`."""
    start = text.index("\n" + heading + "\n")
    match = re.compile(r"^```" + re.escape(lang) + r"[^\n]*\n(.*?)^```$", re.M | re.S).search(text, start)
    if match is None:
        sys.exit(f"readme-quickstart: no ```{lang} block after {heading!r}")
    return match.group(1)


def replace_once(code, old, new, what):
    count = code.count(old)
    if count != 1:
        sys.exit(f"readme-quickstart: the quick start names {what} ({old!r}) {count} times, not once")
    return code.replace(old, new)


def main():
    readme_path, out, redis_url, prefix, version = sys.argv[1:6]
    readme = open(readme_path, encoding="utf-8").read()

    dependencies = block_after(readme, "## Install", "toml")
    # `queue-core = { path = "../queue-rs/queue-core" }` -> the published version.
    dependencies, paths = re.subn(
        r'^(queue-[a-z]+) = \{ path = "[^"]+" \}$', rf'\1 = "={version}"', dependencies, flags=re.M
    )
    if paths == 0:
        sys.exit("readme-quickstart: the Install section names no crate by path")
    with open(f"{out}/Cargo.toml", "w", encoding="utf-8") as manifest:
        manifest.write(
            "# The README's quick start, made by scripts/readme-quickstart.py.\n"
            '[package]\nname = "quickstart"\nversion = "0.1.0"\nedition = "2024"\npublish = false\n\n'
            + dependencies
            + "\n[workspace]\n"
        )

    code = block_after(readme, "## Quick start", "rust")
    code = replace_once(code, '"redis://127.0.0.1:6379"', json.dumps(redis_url), "the Redis URL")
    code = replace_once(code, '.prefix("welcome")', f".prefix({json.dumps(prefix)})", "the key prefix")
    code = replace_once(code, '"127.0.0.1:3000"', '"127.0.0.1:0"', "the address")
    with open(f"{out}/src/main.rs", "w", encoding="utf-8") as main_rs:
        main_rs.write(code)

    # The "Try it" block: `$ curl -i ...` (continued over lines ending in `\`) with its
    # -d body, then the answer up to the next `$`.
    try_it = block_after(readme, "Try it:", "sh")
    body = re.search(r"-d '([^']*)'", try_it)
    lines = try_it.split("\n")
    first = 0
    while lines[first].rstrip().endswith("\\"):
        first += 1
    answer = "\n".join(lines[first + 1 :]).split("\n$", 1)[0].strip().split("\n")
    status_line = answer[0]
    location = next(line.split(":", 1)[1].strip() for line in answer if line.lower().startswith("location:"))
    shown_body = json.loads(answer[-1])
    status_route = re.search(r"^\$ curl (\S+)\s+# (.*)$", try_it, re.M)
    if body is None or status_route is None:
        sys.exit("readme-quickstart: the Try it block lost its -d body or its status request")
    print(
        json.dumps(
            {
                "request": body.group(1),
                "status_line": status_line,
                "location": location,
                "body": shown_body,
                "status_path": status_route.group(1).split("3000", 1)[1],
            }
        )
    )


if __name__ == "__main__":
    main()
