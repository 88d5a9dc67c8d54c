//! A crate's modules as the compiler finds them from its root file, and what each path
//! written in them names: the file where the item is defined, following `use`
//! re-exports to their source, as a reader following the import would.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::scan::{scan_file, ModuleBody, UseLeaf, Written};

pub(crate) type ModId = usize;

/// One module: a file, or an inline `mod` within one.
#[derive(Debug)]
pub(crate) struct Module {
    pub(crate) parent: Option<ModId>,
    /// The file that holds it, relative to the crate's source folder.
    pub(crate) file: PathBuf,
    children: BTreeMap<String, ModId>,
    items: Vec<String>,
    uses: Vec<UseLeaf>,
    paths: Vec<Written>,
    idents: std::collections::BTreeSet<String>,
}

/// Every module of a crate, the root first.
#[derive(Debug)]
pub(crate) struct Tree {
    pub(crate) modules: Vec<Module>,
}

/// What a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// A module itself.
    Module(ModId),
    /// Something a module defines (or takes from outside the crate and hands on).
    Item(ModId),
}

/// One import of a file from another: which names, on which lines.
#[derive(Debug, Clone)]
pub(crate) struct Import {
    pub(crate) from: PathBuf,
    pub(crate) to: PathBuf,
    pub(crate) names: Vec<String>,
    pub(crate) lines: Vec<usize>,
}

/// A path that takes a name through the crate root's re-exports (`crate::Job`) rather
/// than from the module that defines it: the root is the crate's face, the top floor.
#[derive(Debug, Clone)]
pub(crate) struct ThroughRoot {
    pub(crate) from: PathBuf,
    pub(crate) name: String,
    pub(crate) line: usize,
}

/// How deep `use` chains are followed (a chain this long is a loop of re-exports).
const MAX_HOPS: usize = 24;

impl Tree {
    /// Reads the crate whose source folder is `src` (its root: `lib.rs`, else `main.rs`).
    pub(crate) fn load(src: &Path) -> Result<Tree, String> {
        let root = ["lib.rs", "main.rs"]
            .iter()
            .map(PathBuf::from)
            .find(|f| src.join(f).is_file())
            .ok_or_else(|| format!("{}: no lib.rs or main.rs", src.display()))?;
        let mut tree = Tree {
            modules: Vec::new(),
        };
        tree.load_file(src, &root, None, src)?;
        Ok(tree)
    }

    fn load_file(
        &mut self,
        src: &Path,
        file: &Path,
        parent: Option<ModId>,
        dir: &Path,
    ) -> Result<ModId, String> {
        let text = fs::read_to_string(src.join(file))
            .map_err(|e| format!("{}: {e}", src.join(file).display()))?;
        let body = scan_file(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        // A `mod x;` of `a/mod.rs` or `lib.rs` is `a/x.rs`; of `a/b.rs`, `a/b/x.rs`.
        let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let child_dir = if parent.is_none() || stem == "mod" {
            dir.to_path_buf()
        } else {
            dir.join(stem)
        };
        self.add_body(src, file, parent, body, &child_dir)
    }

    fn add_body(
        &mut self,
        src: &Path,
        file: &Path,
        parent: Option<ModId>,
        body: ModuleBody,
        child_dir: &Path,
    ) -> Result<ModId, String> {
        let id = self.modules.len();
        self.modules.push(Module {
            parent,
            file: file.to_path_buf(),
            children: BTreeMap::new(),
            items: body.items,
            uses: body.uses,
            paths: body.paths,
            idents: body.idents,
        });
        for name in body.file_children {
            let own = child_dir.join(format!("{name}.rs"));
            let folder = child_dir.join(&name).join("mod.rs");
            let found = [own, folder].into_iter().find(|f| f.is_file());
            let Some(found) = found else {
                // A module the compiler builds elsewhere (`#[path]`, a build script's
                // output): nothing of ours to read.
                continue;
            };
            let relative = found.strip_prefix(src).unwrap_or(&found).to_path_buf();
            let child_folder = found.parent().unwrap_or(src).to_path_buf();
            let child = self.load_file(src, &relative, Some(id), &child_folder)?;
            self.modules[id].children.insert(name, child);
        }
        for (name, inner) in body.inline_children {
            let inner_dir = child_dir.join(&name);
            let child = self.add_body(src, file, Some(id), inner, &inner_dir)?;
            self.modules[id].children.insert(name, child);
        }
        Ok(id)
    }

    /// Every import of one file from another, in file order.
    pub(crate) fn imports(&self) -> Vec<Import> {
        let mut by_pair: BTreeMap<(PathBuf, PathBuf), Import> = BTreeMap::new();
        for (id, module) in self.modules.iter().enumerate() {
            // A re-export hands a name on; it is this module's import only where its
            // code names it too.
            let written = module
                .uses
                .iter()
                .filter(|u| !u.public || u.name.as_ref().is_some_and(|n| module.idents.contains(n)))
                .map(|u| (&u.path, u.line))
                .chain(module.paths.iter().map(|p| (&p.path, p.line)));
            for (path, line) in written {
                let Some(target) = self.resolve(id, path, 0) else {
                    continue;
                };
                let to = match target {
                    Target::Module(m) | Target::Item(m) => &self.modules[m].file,
                };
                if *to == module.file {
                    continue;
                }
                let import = by_pair
                    .entry((module.file.clone(), to.clone()))
                    .or_insert_with(|| Import {
                        from: module.file.clone(),
                        to: to.clone(),
                        names: Vec::new(),
                        lines: Vec::new(),
                    });
                let name = path.last().cloned().unwrap_or_default();
                if !import.names.contains(&name) {
                    import.names.push(name);
                }
                if !import.lines.contains(&line) {
                    import.lines.push(line);
                }
            }
        }
        by_pair.into_values().collect()
    }

    /// Every path of a module other than the root that names something through the
    /// root's re-exports (`crate::Name`, where the root only hands `Name` on).
    pub(crate) fn through_root(&self) -> Vec<ThroughRoot> {
        let root = &self.modules[0];
        let mut found = Vec::new();
        for module in self.modules.iter().skip(1) {
            if module.file == root.file {
                continue;
            }
            let written = module
                .uses
                .iter()
                .map(|u| (&u.path, u.line))
                .chain(module.paths.iter().map(|p| (&p.path, p.line)));
            for (path, line) in written {
                let [first, name, ..] = path.as_slice() else {
                    continue;
                };
                let handed_on = root.uses.iter().any(|u| u.name.as_ref() == Some(name));
                if first == "crate" && handed_on && !root.children.contains_key(name) {
                    found.push(ThroughRoot {
                        from: module.file.clone(),
                        name: name.clone(),
                        line,
                    });
                }
            }
        }
        found
    }

    /// What `path`, written in module `from`, names; `None` for what lies outside the
    /// crate (another crate, a type parameter, a local name).
    fn resolve(&self, from: ModId, path: &[String], hops: usize) -> Option<Target> {
        if hops > MAX_HOPS || path.is_empty() {
            return None;
        }
        let mut current = from;
        let mut rest = path;
        match path[0].as_str() {
            "crate" => {
                current = 0;
                rest = &path[1..];
            }
            "self" => rest = &path[1..],
            "super" => {
                while rest.first().is_some_and(|s| s == "super") {
                    current = self.modules[current].parent?;
                    rest = &rest[1..];
                }
            }
            first => {
                // Relative: a name in scope here, else another crate.
                let step = self.step(current, first, hops)?;
                match step {
                    Target::Item(_) => return Some(step),
                    Target::Module(m) => {
                        current = m;
                        rest = &path[1..];
                    }
                }
            }
        }
        for segment in rest {
            match self.step(current, segment, hops) {
                Some(Target::Module(m)) => current = m,
                Some(item @ Target::Item(_)) => return Some(item),
                // Not seen as a name of the module (an enum's variant, a name a macro
                // makes): the module's own.
                None => return Some(Target::Item(current)),
            }
        }
        Some(Target::Module(current))
    }

    /// What `name` is in module `module`: a child module, an item, or an import.
    fn step(&self, module: ModId, name: &str, hops: usize) -> Option<Target> {
        let here = &self.modules[module];
        if let Some(child) = here.children.get(name) {
            return Some(Target::Module(*child));
        }
        if here.items.iter().any(|item| item == name) {
            return Some(Target::Item(module));
        }
        if let Some(import) = here.uses.iter().find(|u| u.name.as_deref() == Some(name)) {
            // Imported from outside the crate: this module hands it on.
            return Some(
                self.resolve(module, &import.path, hops + 1)
                    .unwrap_or(Target::Item(module)),
            );
        }
        for glob in here.uses.iter().filter(|u| u.glob) {
            if let Some(Target::Module(m)) = self.resolve(module, &glob.path, hops + 1) {
                if m != module {
                    if let Some(found) = self.step(m, name, hops + 1) {
                        return Some(found);
                    }
                }
            }
        }
        None
    }

    /// The top-level module a file belongs to: `queue` for `queue/add.rs`, `lib` for the
    /// root.
    pub(crate) fn top_module(file: &Path) -> String {
        let mut parts = file.components();
        let first = parts
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .unwrap_or("");
        match first.strip_suffix(".rs") {
            Some(stem) => stem.to_owned(),
            None => first.to_owned(),
        }
    }

    /// Every file of the crate.
    pub(crate) fn files(&self) -> Vec<&Path> {
        let mut files: Vec<&Path> = self.modules.iter().map(|m| m.file.as_path()).collect();
        files.sort();
        files.dedup();
        files
    }
}
