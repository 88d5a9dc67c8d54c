//! What the suites found beyond their own tables: each target's figure, judged met or not,
//! and the figures the charts draw. The run prints the targets' table and writes the
//! charts after the last suite; `BENCHMARKS.md` puts them first.

use super::charts::{Chart, Kind, Series};

/// Which way a target points.
#[derive(Debug, Clone, Copy)]
pub(super) enum Wanted {
    AtLeast(f64),
    AtMost(f64),
}

impl Wanted {
    /// Judged on the figure as the table prints it (two decimals): a ratio of 1.001
    /// shown as 1.00 meets "at most 1", and 0.945 shown as 0.94 does not meet 0.95.
    fn met_by(self, measured: f64) -> bool {
        let measured: f64 = format!("{measured:.2}").parse().unwrap_or(f64::NAN);
        match self {
            Wanted::AtLeast(bound) => measured >= bound,
            Wanted::AtMost(bound) => measured <= bound,
        }
    }
}

#[derive(Debug, Clone)]
struct Target {
    what: &'static str,
    /// The issue that set it, e.g. "#34".
    issue: &'static str,
    wanted: Wanted,
    measured: f64,
    /// How the figure was made, and its spread where there is one.
    detail: String,
}

/// Figures of one run for the targets and the charts.
#[derive(Debug, Default)]
pub(super) struct Findings {
    targets: Vec<Target>,
    /// Per system in the order first seen, (concurrency, jobs/s).
    throughput: Vec<(&'static str, Vec<(f64, f64)>)>,
    /// Per system, its latency's p50, p90 and p99 in ms.
    latency: Vec<(&'static str, [f64; 3])>,
    /// Per server, its requests/s.
    http: Vec<(&'static str, f64)>,
    /// BullMQ's four scenarios: per system, jobs/s in the scenarios' order.
    scenarios: Vec<(&'static str, Vec<f64>)>,
    scenario_names: Vec<&'static str>,
}

impl Findings {
    /// A target's figure in this run.
    pub(super) fn target(
        &mut self,
        what: &'static str,
        issue: &'static str,
        wanted: Wanted,
        measured: f64,
        detail: impl Into<String>,
    ) {
        self.targets.push(Target {
            what,
            issue,
            wanted,
            measured,
            detail: detail.into(),
        });
    }

    pub(super) fn throughput(&mut self, system: &'static str, concurrency: u32, rate: f64) {
        let point = (f64::from(concurrency), rate);
        match self.throughput.iter_mut().find(|(name, _)| *name == system) {
            Some((_, points)) => points.push(point),
            None => self.throughput.push((system, vec![point])),
        }
    }

    pub(super) fn latency(&mut self, system: &'static str, p50_p90_p99_ms: [f64; 3]) {
        self.latency.push((system, p50_p90_p99_ms));
    }

    pub(super) fn http(&mut self, server: &'static str, requests_per_sec: f64) {
        self.http.push((server, requests_per_sec));
    }

    pub(super) fn scenarios(
        &mut self,
        names: &[&'static str],
        per_system: Vec<(&'static str, Vec<f64>)>,
    ) {
        self.scenario_names = names.to_vec();
        self.scenarios = per_system;
    }

    /// The targets' table, or nothing when no chosen suite has a target.
    pub(super) fn targets_table(&self) -> String {
        if self.targets.is_empty() {
            return String::new();
        }
        let mut out = String::from(
            "### The targets\n\n\
             Judged by the run on its own figures. The targets against Node were set \
             against Node BullMQ 5.81.5; they are held here against the newest, 6.\n\n\
             | target | set by | this run | met |\n|---|---|---|---|\n",
        );
        let met = self
            .targets
            .iter()
            .filter(|t| t.wanted.met_by(t.measured))
            .count();
        for target in &self.targets {
            let bound = match target.wanted {
                Wanted::AtLeast(bound) => format!(">= {bound}"),
                Wanted::AtMost(bound) => format!("<= {bound}"),
            };
            out.push_str(&format!(
                "| {} {bound} | {} | **{:.2}** {} | {} |\n",
                target.what,
                target.issue,
                target.measured,
                target.detail,
                if !target.measured.is_finite() {
                    "no figure"
                } else if target.wanted.met_by(target.measured) {
                    "yes"
                } else {
                    "**no**"
                }
            ));
        }
        out.push_str(&format!(
            "\n{met} of {} targets met in this run.\n\n",
            self.targets.len()
        ));
        out
    }

    /// The charts this run has figures for.
    pub(super) fn charts(&self) -> Vec<Chart> {
        let mut charts = Vec::new();
        if !self.throughput.is_empty() {
            charts.push(Chart {
                file: "throughput",
                title: "Processing a no-op job: jobs/s against the worker's concurrency".into(),
                y_unit: "jobs/s",
                kind: Kind::LogLines {
                    x_name: "concurrency",
                },
                series: self
                    .throughput
                    .iter()
                    .map(|(name, values)| Series {
                        name: (*name).to_owned(),
                        values: values.clone(),
                    })
                    .collect(),
            });
        }
        if !self.latency.is_empty() {
            charts.push(bars(
                "latency",
                "Add to handler start, idle worker: percentiles",
                "ms",
                ["p50", "p90", "p99"].map(str::to_owned).to_vec(),
                self.latency.iter().map(|(name, p)| (*name, p.to_vec())),
            ));
        }
        if !self.http.is_empty() {
            // One bar per server, named under it: a legend would repeat the names.
            charts.push(bars(
                "http",
                "POST /enqueue answered 202 under wrk (64 connections)",
                "requests/s",
                self.http
                    .iter()
                    .map(|(name, _)| (*name).to_owned())
                    .collect(),
                std::iter::once(("requests/s", self.http.iter().map(|(_, r)| *r).collect())),
            ));
        }
        if !self.scenarios.is_empty() {
            charts.push(bars(
                "bullmq-scenarios",
                "BullMQ's four benchmark scenarios",
                "jobs/s",
                self.scenario_names
                    .iter()
                    .map(|n| (*n).to_owned())
                    .collect(),
                self.scenarios.iter().map(|(name, v)| (*name, v.clone())),
            ));
        }
        charts
    }
}

/// A bar chart of one bar per system in each group.
fn bars<'a>(
    file: &'static str,
    title: &str,
    y_unit: &'static str,
    groups: Vec<String>,
    per_system: impl Iterator<Item = (&'a str, Vec<f64>)>,
) -> Chart {
    Chart {
        file,
        title: title.to_owned(),
        y_unit,
        kind: Kind::Bars { groups },
        series: per_system
            .map(|(name, values)| Series {
                name: name.to_owned(),
                values: values
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| (i as f64, v))
                    .collect(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_is_judged_by_its_direction() {
        let mut findings = Findings::default();
        findings.target("ours/raw", "#1", Wanted::AtLeast(0.9), 0.88, "");
        findings.target("p99 ours/Node", "#2", Wanted::AtMost(1.0), 0.2, "");
        findings.target("bytes ours/Node", "#3", Wanted::AtMost(1.0), 1.001, "");
        let table = findings.targets_table();
        assert!(
            table.contains("| ours/raw >= 0.9 | #1 | **0.88**  | **no** |"),
            "{table}"
        );
        assert!(
            table.contains("| p99 ours/Node <= 1 | #2 | **0.20**  | yes |"),
            "{table}"
        );
        assert!(
            table.contains("| bytes ours/Node <= 1 | #3 | **1.00**  | yes |"),
            "{table}"
        );
        assert!(table.contains("2 of 3 targets met"));
    }

    #[test]
    fn no_figures_no_charts() {
        assert!(Findings::default().charts().is_empty());
        assert!(Findings::default().targets_table().is_empty());
    }
}
