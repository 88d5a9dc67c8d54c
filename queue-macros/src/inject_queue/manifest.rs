//! Whether the crate being compiled depends on `queue-axum`, read from its
//! `Cargo.toml`: then `#[inject_queue]` implements axum's extractor by itself.
//!
//! The manifest decides, not a feature of this crate that `queue-axum` would turn on:
//! Cargo unifies features over everything built together, so in a workspace whose web
//! crate depends on `queue-axum`, the feature would also be on for a jobs crate that
//! does not, and its expansion, naming `::queue_axum`, would not compile.

use std::sync::OnceLock;

/// How the crate depends on `queue-axum`, under that name (ordered: a normal
/// dependency wins over a dev-dependency).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum AxumDependency {
    /// Not at all (or renamed, or optional: `::queue_axum` may not resolve).
    None,
    /// Only as a dev-dependency: in its tests and benches.
    Dev,
    /// As a normal dependency.
    Normal,
}

/// The crate being compiled (`CARGO_MANIFEST_DIR`, as Cargo sets it for rustc), read
/// once per compilation; `None` when there is no manifest to read.
pub(crate) fn axum_dependency() -> AxumDependency {
    static FOUND: OnceLock<AxumDependency> = OnceLock::new();
    *FOUND.get_or_init(|| {
        // queue-axum's own doctests and tests: the crate is there as `::queue_axum`
        // (its library code takes no `#[inject_queue]` struct).
        if std::env::var("CARGO_PKG_NAME").is_ok_and(|name| name == "queue-axum") {
            return AxumDependency::Normal;
        }
        let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") else {
            return AxumDependency::None;
        };
        match std::fs::read_to_string(std::path::Path::new(&dir).join("Cargo.toml")) {
            Ok(manifest) => scan(&manifest),
            Err(_) => AxumDependency::None,
        }
    })
}

/// Reads `[dependencies]`, `[dev-dependencies]` and their `[target.'..'.*]` forms, in
/// both TOML spellings (`queue-axum = ..` in the table, or a `[dependencies.queue-axum]`
/// table), for a `queue-axum` (or `queue_axum`) that is not optional.
pub(crate) fn scan(manifest: &str) -> AxumDependency {
    let mut found = AxumDependency::None;
    // The dependency table we are in (its entries are dependencies).
    let mut table: Option<AxumDependency> = None;
    // In a `[dependencies.queue-axum]` table: its kind, and whether it is optional.
    let mut own_table: Option<(AxumDependency, bool)> = None;
    for line in manifest.lines() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if let Some(header) = line.strip_prefix('[') {
            found = found.max(settled(own_table.take()));
            let header = header.trim_start_matches('[').trim_end_matches(']').trim();
            let parts: Vec<&str> = header
                .split('.')
                .map(|p| p.trim().trim_matches('"'))
                .collect();
            // `target.<cfg>.dependencies`: the cfg may hold dots; read from the end.
            match parts.as_slice() {
                [.., kind, name] if is_axum(name) => {
                    table = None;
                    own_table = table_kind(kind).map(|k| (k, false));
                }
                [.., kind] => table = table_kind(kind),
                [] => table = None,
            }
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim().trim_matches('"');
        if let Some((_, optional)) = &mut own_table {
            *optional |= key == "optional" && value.trim() == "true";
            continue;
        }
        let Some(kind) = table else { continue };
        // `queue-axum.workspace = true` has its name before the first dot.
        let name = key
            .split('.')
            .next()
            .unwrap_or_default()
            .trim()
            .trim_matches('"');
        if is_axum(name) && !is_optional(value) {
            found = found.max(kind);
        }
    }
    found.max(settled(own_table))
}

/// What a finished `[dependencies.queue-axum]` table counts for.
fn settled(own_table: Option<(AxumDependency, bool)>) -> AxumDependency {
    match own_table {
        Some((kind, false)) => kind,
        _ => AxumDependency::None,
    }
}

fn is_axum(name: &str) -> bool {
    name == "queue-axum" || name == "queue_axum"
}

fn table_kind(name: &str) -> Option<AxumDependency> {
    match name {
        "dependencies" => Some(AxumDependency::Normal),
        "dev-dependencies" | "dev_dependencies" => Some(AxumDependency::Dev),
        _ => None,
    }
}

/// `{ .., optional = true, .. }`, an inline table (TOML keeps those on one line).
fn is_optional(value: &str) -> bool {
    value
        .split([',', '{', '}'])
        .filter_map(|part| part.split_once('='))
        .any(|(k, v)| k.trim() == "optional" && v.trim() == "true")
}

#[cfg(test)]
mod tests {
    use super::{scan, AxumDependency::*};

    #[test]
    fn a_normal_dependency_in_any_spelling_is_found() {
        assert_eq!(scan("[dependencies]\nqueue-axum = \"0.1\"\n"), Normal);
        assert_eq!(
            scan("[dependencies]\nqueue-axum.workspace = true\n"),
            Normal
        );
        assert_eq!(
            scan("[dependencies]\nqueue-axum = { version = \"0.1\", features = [\"metrics\"] }\n"),
            Normal
        );
        assert_eq!(
            scan("[dependencies.queue-axum]\nversion = \"0.1\"\n"),
            Normal
        );
        assert_eq!(
            scan("[target.'cfg(unix)'.dependencies]\n\"queue-axum\" = \"0.1\" # web\n"),
            Normal
        );
        // A dev-dependency too: normal wins.
        assert_eq!(
            scan(
                "[dev-dependencies]\nqueue-axum = \"0.1\"\n[dependencies]\nqueue-axum = \"0.1\"\n"
            ),
            Normal
        );
    }

    #[test]
    fn a_dev_dependency_counts_for_tests_only() {
        assert_eq!(scan("[dev-dependencies]\nqueue-axum = \"0.1\"\n"), Dev);
        assert_eq!(
            scan("[dev-dependencies.queue-axum]\npath = \"../x\"\n"),
            Dev
        );
    }

    #[test]
    fn absent_renamed_optional_or_elsewhere_is_not_found() {
        assert_eq!(
            scan("[dependencies]\nqueue-core = \"0.1\"\naxum = \"0.8\"\n"),
            None
        );
        // Renamed: `::queue_axum` would not resolve.
        assert_eq!(
            scan("[dependencies]\nweb = { package = \"queue-axum\" }\n"),
            None
        );
        assert_eq!(
            scan("[dependencies]\nqueue-axum = { version = \"0.1\", optional = true }\n"),
            None
        );
        assert_eq!(
            scan("[dependencies.queue-axum]\nversion = \"0.1\"\noptional = true\n[features]\nweb = []\n"),
            None
        );
        // A feature, a build-dependency and a comment that names it.
        assert_eq!(
            scan("[features]\nqueue-axum = []\n[build-dependencies]\nqueue-axum = \"0.1\"\n# queue-axum = \"0.1\"\n"),
            None
        );
    }
}
