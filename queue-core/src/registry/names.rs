//! The queue names an app's builder is given as strings (defaults, renames, the
//! registrations to use), each checked against the queues the app knows: its
//! processors', its producers', its declarations', and the external queues it declares.
//! A typo is refused at start-up, with the names it could have meant, instead of a job
//! that silently runs with the wrong settings.

use std::collections::BTreeSet;

/// The problems with `given` names (each with where it was given: `queue_defaults`,
/// `rename_queue`, ...), checked against `known`.
pub(crate) fn unknown_queues<'a>(
    given: impl IntoIterator<Item = (&'static str, &'a str)>,
    known: &BTreeSet<&str>,
) -> Vec<String> {
    let listed = if known.is_empty() {
        "none".to_owned()
    } else {
        known.iter().copied().collect::<Vec<_>>().join(", ")
    };
    given
        .into_iter()
        .filter(|(_, queue)| !known.contains(queue))
        .map(|(setting, queue)| {
            let near = nearest(queue, known.iter().copied())
                .map_or_else(String::new, |near| format!("; did you mean `{near}`?"));
            format!(
                "{setting}(`{queue}`): no processor, producer, #[job_queue] declaration or external queue of this app is named `{queue}` (known: {listed}){near}; a queue whose workers run in another service is declared with `.external_queue(\"{queue}\")`"
            )
        })
        .collect()
}

/// The candidate closest to `name`, when it is a likely typo of it: at most two edits
/// away, and fewer than half of `name`'s characters.
pub(crate) fn nearest<'a>(
    name: &str,
    candidates: impl Iterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (name.chars().count() / 2).min(2);
    candidates
        .map(|candidate| (edits(name, candidate), candidate))
        .filter(|(distance, _)| *distance > 0 && *distance <= limit)
        .min()
        .map(|(_, candidate)| candidate)
}

/// The Levenshtein distance between `a` and `b`, in characters.
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_is_refused_with_the_name_it_could_have_meant() {
        let known: BTreeSet<&str> = ["email", "reports"].into_iter().collect();
        let problems = unknown_queues(
            [("queue_defaults", "emial"), ("rename_queue", "reports")],
            &known,
        );
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("queue_defaults(`emial`)"),
            "{}",
            problems[0]
        );
        assert!(
            problems[0].contains("known: email, reports"),
            "{}",
            problems[0]
        );
        assert!(
            problems[0].contains("did you mean `email`?"),
            "{}",
            problems[0]
        );
    }

    #[test]
    fn only_near_names_are_suggested() {
        let known = ["render", "email"];
        assert_eq!(nearest("rendr", known.into_iter()), Some("render"));
        assert_eq!(nearest("payments", known.into_iter()), None);
        assert_eq!(nearest("ab", ["ac"].into_iter()), Some("ac"));
        assert_eq!(
            nearest("email", known.into_iter()),
            None,
            "itself is no typo"
        );
    }
}
