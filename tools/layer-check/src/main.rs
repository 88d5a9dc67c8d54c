//! Keeps a crate's modules in floors: fails on a circle of imports among its files, on a
//! module no floor names, and on an import from a higher floor, as the `layers` blocks of
//! `docs/architecture.md` draw them. Run from the repository (scripts/test.sh does):
//!
//! ```text
//! cargo run -p layer-check                  # check every crate the document draws
//! cargo run -p layer-check -- --modules     # and print each crate's module imports
//! cargo run -p layer-check -- --document F  # the blocks of another document
//! ```
//!
//! It reads the code as the compiler's tokens (comments and strings skipped) and follows
//! every path that names something of the crate, `use` or written in code, through
//! re-exports to the file that defines it.

mod check;
mod plan;
mod scan;
mod tree;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use tree::Tree;

const DOCUMENT: &str = "docs/architecture.md";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let print_modules = args.iter().any(|a| a == "--modules");
    let document = args
        .iter()
        .position(|a| a == "--document")
        .and_then(|at| args.get(at + 1))
        .map_or(DOCUMENT, String::as_str);
    match run(document, print_modules) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("layer-check: {e}");
            ExitCode::from(2)
        }
    }
}

/// Checks every crate; whether all passed.
fn run(document: &str, print_modules: bool) -> Result<bool, String> {
    let text = std::fs::read_to_string(document)
        .map_err(|e| format!("{document}: {e} (run it from the repository)"))?;
    let plans = plan::plans_in(&text).map_err(|e| format!("{document}: {e}"))?;
    if plans.is_empty() {
        return Err(format!("{document} has no ```layers block"));
    }
    let mut passed = true;
    for plan in &plans {
        let tree = Tree::load(Path::new(&plan.src))?;
        if print_modules {
            print_module_imports(&tree, &plan.src);
        }
        let findings = check::check(&tree, plan);
        let allowed = match findings.allowed_up {
            0 => String::new(),
            n => format!(", {n} allowed up a floor"),
        };
        if findings.problems.is_empty() {
            println!(
                "{}: {} files, {} imports between them, {} floors: no circle, nothing up a floor{allowed}",
                plan.src,
                findings.files,
                findings.imports,
                plan.floors.len()
            );
        } else {
            passed = false;
            println!(
                "{}: {} problem(s) ({} files, {} imports{allowed}):",
                plan.src,
                findings.problems.len(),
                findings.files,
                findings.imports
            );
            for problem in &findings.problems {
                println!("  - {problem}");
            }
        }
    }
    Ok(passed)
}

/// Each top-level module's imports of the others, with the names taken.
fn print_module_imports(tree: &Tree, src: &str) {
    let mut edges: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for import in tree.imports() {
        let (from, to) = (Tree::top_module(&import.from), Tree::top_module(&import.to));
        if from != to {
            let names = edges.entry((from, to)).or_default();
            for name in import.names {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
    }
    println!("{src}: module -> module: names");
    for ((from, to), names) in edges {
        println!("  {from} -> {to}: {}", names.join(", "));
    }
}
