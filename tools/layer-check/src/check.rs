//! The rules: no circle of files; every top-level module on a floor; no import from a
//! higher floor (but those allowed, with their reason); no circle of modules on a floor.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::plan::Plan;
use crate::tree::{Import, Tree};

/// What one crate's check found.
#[derive(Debug, Default)]
pub(crate) struct Findings {
    pub(crate) files: usize,
    pub(crate) imports: usize,
    /// Each problem, as a person reads it.
    pub(crate) problems: Vec<String>,
    /// Allowed imports up a floor that the code still has.
    pub(crate) allowed_up: usize,
}

pub(crate) fn check(tree: &Tree, plan: &Plan) -> Findings {
    let imports = tree.imports();
    let files = tree.files();
    let mut findings = Findings {
        files: files.len(),
        imports: imports.len(),
        ..Findings::default()
    };

    for circle in circles(&imports) {
        let ties: Vec<String> = imports
            .iter()
            .filter(|i| circle.contains(&i.from) && circle.contains(&i.to))
            .map(|i| {
                format!(
                    "    {} -> {} ({}; line {})",
                    i.from.display(),
                    i.to.display(),
                    i.names.join(", "),
                    join_lines(&i.lines)
                )
            })
            .collect();
        findings.problems.push(format!(
            "a circle of {} files:\n{}",
            circle.len(),
            ties.join("\n")
        ));
    }

    let modules: BTreeSet<String> = files.iter().map(|f| Tree::top_module(f)).collect();
    for module in &modules {
        if !plan.floor_of.contains_key(module) {
            findings.problems.push(format!(
                "module `{module}` is on no floor: add it to the layers block of {}",
                plan.src
            ));
        }
    }
    for module in plan.floor_of.keys() {
        if !modules.contains(module) {
            findings.problems.push(format!(
                "the layers block names `{module}`, which {} does not have",
                plan.src
            ));
        }
    }

    let mut same_floor: Vec<Import> = Vec::new();
    for import in &imports {
        let (from, to) = (Tree::top_module(&import.from), Tree::top_module(&import.to));
        if from == to {
            continue;
        }
        let (Some(low), Some(high)) = (plan.floor_of.get(&from), plan.floor_of.get(&to)) else {
            continue;
        };
        if high.0 > low.0 {
            let file = import.from.display().to_string();
            if plan.allowed.iter().any(|(f, m, _)| *f == file && *m == to) {
                findings.allowed_up += 1;
                continue;
            }
            findings.problems.push(format!(
                "{} (floor {} {}) takes {} from {} (floor {} {}), a floor up; line {}",
                file,
                low.0,
                low.1,
                import.names.join(", "),
                import.to.display(),
                high.0,
                high.1,
                join_lines(&import.lines)
            ));
        } else if high.0 == low.0 {
            same_floor.push(import.clone());
        }
    }
    for (file, module, _) in &plan.allowed {
        let used = imports
            .iter()
            .any(|i| i.from.display().to_string() == *file && Tree::top_module(&i.to) == *module);
        if !used {
            findings.problems.push(format!(
                "`allow {file} -> {module}` allows an import the code no longer has: remove the line"
            ));
        }
    }

    // The crate root is the face: the rest name the module a thing lives in.
    let top = plan.floor_of.get("lib").map(|f| f.0);
    for through in tree.through_root() {
        let module = Tree::top_module(&through.from);
        let floor = plan.floor_of.get(&module).map(|f| f.0);
        if floor.is_some() && floor < top {
            findings.problems.push(format!(
                "{} takes `{}` through the crate root (line {}): name the module that defines it",
                through.from.display(),
                through.name,
                through.line
            ));
        }
    }

    // Modules of one floor in a circle, by their files' imports.
    let module_edges: Vec<Import> = same_floor
        .iter()
        .map(|i| Import {
            from: PathBuf::from(Tree::top_module(&i.from)),
            to: PathBuf::from(Tree::top_module(&i.to)),
            names: i.names.clone(),
            lines: Vec::new(),
        })
        .collect();
    for circle in circles(&module_edges) {
        let ties: Vec<String> = same_floor
            .iter()
            .filter(|i| {
                circle.contains(&PathBuf::from(Tree::top_module(&i.from)))
                    && circle.contains(&PathBuf::from(Tree::top_module(&i.to)))
            })
            .map(|i| {
                format!(
                    "    {} -> {} ({})",
                    i.from.display(),
                    i.to.display(),
                    i.names.join(", ")
                )
            })
            .collect();
        let names: Vec<String> = circle.iter().map(|m| m.display().to_string()).collect();
        findings.problems.push(format!(
            "modules of one floor in a circle ({}):\n{}",
            names.join(", "),
            ties.join("\n")
        ));
    }
    findings
}

fn join_lines(lines: &[usize]) -> String {
    let shown: Vec<String> = lines.iter().take(4).map(usize::to_string).collect();
    let more = if lines.len() > 4 { ", .." } else { "" };
    format!("{}{more}", shown.join(", "))
}

/// The strongly connected groups of two or more nodes (Tarjan's algorithm).
pub(crate) fn circles(edges: &[Import]) -> Vec<BTreeSet<PathBuf>> {
    let mut nodes: BTreeMap<&PathBuf, usize> = BTreeMap::new();
    let mut names: Vec<&PathBuf> = Vec::new();
    for edge in edges {
        for node in [&edge.from, &edge.to] {
            if !nodes.contains_key(node) {
                nodes.insert(node, names.len());
                names.push(node);
            }
        }
    }
    let mut out_edges = vec![Vec::new(); nodes.len()];
    for edge in edges {
        out_edges[nodes[&edge.from]].push(nodes[&edge.to]);
    }
    let mut state = Tarjan {
        index: vec![None; nodes.len()],
        low: vec![0; nodes.len()],
        on_stack: vec![false; nodes.len()],
        stack: Vec::new(),
        next: 0,
        groups: Vec::new(),
    };
    for node in 0..nodes.len() {
        if state.index[node].is_none() {
            state.visit(node, &out_edges);
        }
    }
    state
        .groups
        .into_iter()
        .filter(|g| g.len() > 1)
        .map(|g| g.into_iter().map(|n| names[n].clone()).collect())
        .collect()
}

struct Tarjan {
    index: Vec<Option<usize>>,
    low: Vec<usize>,
    on_stack: Vec<bool>,
    stack: Vec<usize>,
    next: usize,
    groups: Vec<Vec<usize>>,
}

impl Tarjan {
    fn visit(&mut self, node: usize, edges: &[Vec<usize>]) {
        self.index[node] = Some(self.next);
        self.low[node] = self.next;
        self.next += 1;
        self.stack.push(node);
        self.on_stack[node] = true;
        for &to in &edges[node] {
            match self.index[to] {
                None => {
                    self.visit(to, edges);
                    self.low[node] = self.low[node].min(self.low[to]);
                }
                Some(index) if self.on_stack[to] => self.low[node] = self.low[node].min(index),
                Some(_) => {}
            }
        }
        if Some(self.low[node]) == self.index[node] {
            let mut group = Vec::new();
            while let Some(top) = self.stack.pop() {
                self.on_stack[top] = false;
                group.push(top);
                if top == node {
                    break;
                }
            }
            self.groups.push(group);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(from: &str, to: &str) -> Import {
        Import {
            from: PathBuf::from(from),
            to: PathBuf::from(to),
            names: Vec::new(),
            lines: Vec::new(),
        }
    }

    #[test]
    fn a_loop_is_one_circle_and_a_chain_none() {
        let found = circles(&[
            edge("a", "b"),
            edge("b", "c"),
            edge("c", "a"),
            edge("c", "d"),
        ]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].len(), 3);
        assert!(circles(&[edge("a", "b"), edge("b", "c")]).is_empty());
        assert!(circles(&[]).is_empty());
    }
}
