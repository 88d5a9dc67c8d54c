//! The floors a crate is built in, as `docs/architecture.md` draws them: a fenced block
//! whose info string is `layers <crate source folder>`, one floor a line, the highest
//! first:
//!
//! ```text
//! 3 app: app testing
//! 2 services: queue worker
//! 1 model: job error
//! allow queue/outbox.rs -> outbox: the add writes its row where the relay reads it
//! ```
//!
//! A module imports only from its own floor or a lower one; on one floor, modules do not
//! import each other round a circle. An `allow` line lets one file take from a module of
//! a higher floor, and says why.

use std::collections::BTreeMap;

/// One crate's floors.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The crate's source folder, relative to the repository.
    pub(crate) src: String,
    /// Each top-level module's floor (its number and name).
    pub(crate) floor_of: BTreeMap<String, (u32, String)>,
    /// The floors, highest first, as written.
    pub(crate) floors: Vec<(u32, String, Vec<String>)>,
    /// Imports allowed to run up: (file, module it takes from) and why.
    pub(crate) allowed: Vec<(String, String, String)>,
}

/// Every `layers` block of a Markdown document.
pub(crate) fn plans_in(markdown: &str) -> Result<Vec<Plan>, String> {
    let mut plans = Vec::new();
    let mut current: Option<Plan> = None;
    for (index, line) in markdown.lines().enumerate() {
        let number = index + 1;
        let trimmed = line.trim();
        match &mut current {
            None => {
                if let Some(src) = trimmed.strip_prefix("```layers ") {
                    current = Some(Plan {
                        src: src.trim().to_owned(),
                        floor_of: BTreeMap::new(),
                        floors: Vec::new(),
                        allowed: Vec::new(),
                    });
                }
            }
            Some(plan) => {
                if trimmed.starts_with("```") {
                    plans.extend(current.take());
                } else if trimmed.is_empty() || trimmed.starts_with('#') {
                    // A blank line or a comment.
                } else if let Some(allow) = trimmed.strip_prefix("allow ") {
                    let (pair, why) = allow
                        .split_once(':')
                        .ok_or_else(|| format!("line {number}: `allow FILE -> MODULE: why`"))?;
                    let (file, module) = pair
                        .split_once("->")
                        .ok_or_else(|| format!("line {number}: `allow FILE -> MODULE: why`"))?;
                    if why.trim().is_empty() {
                        return Err(format!("line {number}: an allowed import says why"));
                    }
                    plan.allowed.push((
                        file.trim().to_owned(),
                        module.trim().to_owned(),
                        why.trim().to_owned(),
                    ));
                } else {
                    let (head, modules) = trimmed
                        .split_once(':')
                        .ok_or_else(|| format!("line {number}: `N name: module module ..`"))?;
                    let (floor, name) = head
                        .trim()
                        .split_once(' ')
                        .ok_or_else(|| format!("line {number}: `N name: module module ..`"))?;
                    let floor: u32 = floor
                        .parse()
                        .map_err(|_| format!("line {number}: `{floor}` is not a floor number"))?;
                    let modules: Vec<String> =
                        modules.split_whitespace().map(str::to_owned).collect();
                    for module in &modules {
                        if plan
                            .floor_of
                            .insert(module.clone(), (floor, name.trim().to_owned()))
                            .is_some()
                        {
                            return Err(format!("line {number}: `{module}` is on two floors"));
                        }
                    }
                    plan.floors.push((floor, name.trim().to_owned(), modules));
                }
            }
        }
    }
    if let Some(plan) = current {
        return Err(format!("the layers block of {} is not closed", plan.src));
    }
    Ok(plans)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floors_and_allowances_are_read() {
        let plans = plans_in(
            "text\n```layers a/src\n# top first\n2 services: queue worker\n1 model: job\n\
             allow queue/x.rs -> worker: because\n```\n",
        )
        .unwrap();
        assert_eq!(plans.len(), 1);
        assert_eq!(plans[0].src, "a/src");
        assert_eq!(plans[0].floor_of["worker"], (2, "services".to_owned()));
        assert_eq!(plans[0].floor_of["job"].0, 1);
        assert_eq!(plans[0].allowed[0].1, "worker");
    }

    #[test]
    fn a_module_on_two_floors_is_refused() {
        let err = plans_in("```layers a/src\n2 b: x\n1 c: x\n```\n").unwrap_err();
        assert!(err.contains("two floors"), "{err}");
    }
}
