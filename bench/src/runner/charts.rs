//! The report's charts, as SVG files written by the run: a few lines of markup each, no
//! plotting dependency, and the same figures as the tables beside them (`BENCHMARKS.md`
//! shows them from `docs/benchmarks/charts/`, where a run to publish writes them).
//!
//! Two shapes cover every chart: lines over a logarithmic x axis (throughput against
//! concurrency) and grouped bars (one group per measure, one bar per system).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::BenchResult;

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 400.0;
/// The plot's margins: left for the y labels, bottom for the x labels and the legend.
const LEFT: f64 = 80.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 44.0;
const BOTTOM: f64 = 84.0;
/// One colour per series, in order; colour-blind safe (Okabe and Ito).
const COLOURS: [&str; 7] = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000",
];

/// One named series of a chart.
#[derive(Debug, Clone)]
pub(super) struct Series {
    pub(super) name: String,
    /// (x, y) points for a line chart; for a bar chart, one value per group, in the
    /// groups' order (`NaN` where the system has no figure).
    pub(super) values: Vec<(f64, f64)>,
}

/// A chart: a title, the y axis's unit, and its series.
#[derive(Debug, Clone)]
pub(super) struct Chart {
    /// The file's name without `.svg`.
    pub(super) file: &'static str,
    pub(super) title: String,
    pub(super) y_unit: &'static str,
    pub(super) kind: Kind,
    pub(super) series: Vec<Series>,
}

#[derive(Debug, Clone)]
pub(super) enum Kind {
    /// Lines over x on a log10 axis, named by `x_name`.
    LogLines { x_name: &'static str },
    /// Bars grouped by these labels.
    Bars { groups: Vec<String> },
}

/// Where the charts go: `BENCH_CHARTS_DIR`, or `target/bench-charts` (a partial run
/// must not replace the full run's charts that `BENCHMARKS.md` shows).
pub(super) fn directory() -> PathBuf {
    std::env::var_os("BENCH_CHARTS_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/bench-charts"),
        PathBuf::from,
    )
}

/// Writes each chart that has figures as `<dir>/<file>.svg`; answers each one written
/// with its path.
pub(super) fn write_all<'a>(
    dir: &Path,
    charts: &'a [Chart],
) -> BenchResult<Vec<(&'a Chart, PathBuf)>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for chart in charts.iter().filter(|c| c.has_figures()) {
        let path = dir.join(format!("{}.svg", chart.file));
        std::fs::write(&path, chart.svg())?;
        written.push((chart, path));
    }
    Ok(written)
}

impl Chart {
    fn has_figures(&self) -> bool {
        self.series
            .iter()
            .any(|s| s.values.iter().any(|(_, y)| y.is_finite()))
    }

    /// The chart as an SVG document.
    pub(super) fn svg(&self) -> String {
        let top = self
            .series
            .iter()
            .flat_map(|s| s.values.iter().map(|&(_, y)| y))
            .filter(|y| y.is_finite())
            .fold(0.0_f64, f64::max);
        let (step, y_max) = nice_axis(top);
        let mut svg = String::new();
        let _ = write!(
            svg,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" \
             width=\"{WIDTH}\" height=\"{HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\">\n\
             <rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n\
             <text x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
            WIDTH / 2.0,
            escape(&self.title)
        );
        let plot_height = HEIGHT - TOP - BOTTOM;
        let y_of = |y: f64| TOP + plot_height * (1.0 - y / y_max);
        // Horizontal grid lines and the y labels.
        let mut tick = 0.0;
        while tick <= y_max + step / 2.0 {
            let y = y_of(tick);
            let _ = write!(
                svg,
                "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#dddddd\"/>\n\
                 <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
                WIDTH - RIGHT,
                LEFT - 6.0,
                y + 4.0,
                number(tick)
            );
            tick += step;
        }
        let _ = writeln!(
            svg,
            "<text transform=\"translate(16 {:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
            TOP + plot_height / 2.0,
            escape(self.y_unit)
        );
        match &self.kind {
            Kind::LogLines { x_name } => self.lines(&mut svg, x_name, &y_of),
            Kind::Bars { groups } => self.bars(&mut svg, groups, &y_of),
        }
        self.legend(&mut svg);
        svg.push_str("</svg>\n");
        svg
    }

    fn lines(&self, svg: &mut String, x_name: &str, y_of: &dyn Fn(f64) -> f64) {
        let xs: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.values.iter().map(|&(x, _)| x))
            .filter(|x| *x > 0.0)
            .collect();
        let low = xs.iter().copied().fold(f64::INFINITY, f64::min).log10();
        let high = xs.iter().copied().fold(0.0_f64, f64::max).log10();
        let span = high - low;
        let plot_width = WIDTH - LEFT - RIGHT - 40.0;
        // One x value: in the middle.
        let x_of = |x: f64| {
            if span > 0.0 {
                LEFT + 20.0 + plot_width * (x.log10() - low) / span
            } else {
                LEFT + 20.0 + plot_width / 2.0
            }
        };
        let mut ticks: Vec<f64> = xs.clone();
        ticks.sort_by(f64::total_cmp);
        ticks.dedup();
        for x in ticks {
            let _ = writeln!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                x_of(x),
                HEIGHT - BOTTOM + 18.0,
                number(x)
            );
        }
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            LEFT + (WIDTH - LEFT - RIGHT) / 2.0,
            HEIGHT - BOTTOM + 36.0,
            escape(x_name)
        );
        for (index, series) in self.series.iter().enumerate() {
            let colour = COLOURS[index % COLOURS.len()];
            let points: Vec<String> = series
                .values
                .iter()
                .filter(|(x, y)| *x > 0.0 && y.is_finite())
                .map(|&(x, y)| format!("{:.1},{:.1}", x_of(x), y_of(y)))
                .collect();
            let _ = writeln!(
                svg,
                "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2.5\" points=\"{}\"/>",
                points.join(" ")
            );
            for point in &points {
                let (x, y) = point.split_once(',').unwrap_or(("0", "0"));
                let _ = writeln!(
                    svg,
                    "<circle cx=\"{x}\" cy=\"{y}\" r=\"4\" fill=\"{colour}\"/>"
                );
            }
        }
    }

    fn bars(&self, svg: &mut String, groups: &[String], y_of: &dyn Fn(f64) -> f64) {
        let plot_width = WIDTH - LEFT - RIGHT;
        let group_width = plot_width / groups.len().max(1) as f64;
        let bar_width = group_width * 0.8 / self.series.len().max(1) as f64;
        // A single series: each group's bar in a colour of its own.
        let colour = |g: usize, index: usize| {
            COLOURS[if self.series.len() == 1 { g } else { index } % COLOURS.len()]
        };
        for (g, group) in groups.iter().enumerate() {
            let group_left = LEFT + g as f64 * group_width + group_width * 0.1;
            // A long label goes on two lines, cut at its first comma or space after
            // the middle.
            let (first, second) = split_label(group);
            let _ = writeln!(
                svg,
                "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}\
                 <tspan x=\"{x:.1}\" dy=\"14\">{}</tspan></text>",
                HEIGHT - BOTTOM + 18.0,
                escape(first),
                escape(second),
                x = LEFT + (g as f64 + 0.5) * group_width,
            );
            for (index, series) in self.series.iter().enumerate() {
                let Some(&(_, value)) = series.values.get(g) else {
                    continue;
                };
                if !value.is_finite() {
                    continue;
                }
                let top = y_of(value);
                let _ = writeln!(
                    svg,
                    "<rect x=\"{:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\">\
                     <title>{}: {}</title></rect>",
                    group_left + index as f64 * bar_width,
                    bar_width * 0.92,
                    y_of(0.0) - top,
                    colour(g, index),
                    escape(&series.name),
                    number(value)
                );
            }
        }
    }

    /// The series' names under the plot, four to a row (none for a single series, whose
    /// bars the groups' labels name).
    fn legend(&self, svg: &mut String) {
        if self.series.len() < 2 {
            return;
        }
        let columns = self.series.len().min(4);
        let column_width = (WIDTH - LEFT - RIGHT) / columns as f64;
        for (index, series) in self.series.iter().enumerate() {
            let (row, column) = (index / columns, index % columns);
            let x = LEFT + column as f64 * column_width;
            let y = HEIGHT - BOTTOM + 50.0 + row as f64 * 16.0;
            let _ = writeln!(
                svg,
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{}\"/>\
                 <text x=\"{:.1}\" y=\"{y:.1}\">{}</text>",
                y - 10.0,
                COLOURS[index % COLOURS.len()],
                x + 16.0,
                escape(&series.name)
            );
        }
    }
}

/// `label` in two lines when it is longer than 14 characters: cut at the first comma or
/// space after its middle (or not at all when it has none).
fn split_label(label: &str) -> (&str, &str) {
    if label.chars().count() <= 14 {
        return (label, "");
    }
    let middle = label
        .char_indices()
        .nth(label.chars().count() / 2)
        .map_or(0, |(at, _)| at);
    match label[middle..].find([',', ' ']) {
        Some(at) => {
            let cut = middle + at;
            let first = &label[..cut + usize::from(label[cut..].starts_with(','))];
            (first, label[cut + 1..].trim_start())
        }
        None => (label, ""),
    }
}

/// A step of 1, 2 or 5 times a power of ten that cuts `top` into at most six parts, and
/// the axis's end (a whole number of steps at or above `top`).
fn nice_axis(top: f64) -> (f64, f64) {
    if top <= 0.0 || !top.is_finite() {
        return (1.0, 1.0);
    }
    let rough = top / 5.0;
    let power = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|step| top / step <= 6.0)
        .unwrap_or(10.0 * power);
    (step, (top / step).ceil() * step)
}

/// A figure as the tables print it: thousands apart, two decimals below 10.
pub(super) fn number(value: f64) -> String {
    if value.abs() < 10.0 && value.fract() != 0.0 {
        return format!("{value:.2}");
    }
    let whole = format!("{value:.0}");
    let (sign, digits) = whole.split_at(usize::from(whole.starts_with('-')));
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    format!("{sign}{grouped}")
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_axis_ends_on_a_round_step_above_the_top() {
        assert_eq!(nice_axis(23_456.0), (5_000.0, 25_000.0));
        assert_eq!(nice_axis(0.87), (0.2, 1.0));
        assert_eq!(nice_axis(0.0), (1.0, 1.0));
    }

    #[test]
    fn a_long_label_is_cut_after_its_middle() {
        assert_eq!(split_label("NestJS"), ("NestJS", ""));
        assert_eq!(split_label("ours, listpack 128"), ("ours, listpack", "128"));
        assert_eq!(
            split_label("ours (default), traced"),
            ("ours (default),", "traced")
        );
        assert_eq!(
            split_label("abcdefghijklmnopqrstu"),
            ("abcdefghijklmnopqrstu", "")
        );
    }

    #[test]
    fn numbers_read_as_in_the_tables() {
        assert_eq!(number(23_456.4), "23,456");
        assert_eq!(number(1_000.0), "1,000");
        assert_eq!(number(0.333), "0.33");
        assert_eq!(number(100.0), "100");
    }

    #[test]
    fn a_chart_draws_every_series_and_escapes_names() {
        let chart = Chart {
            file: "t",
            title: "ours & Node".into(),
            y_unit: "jobs/s",
            kind: Kind::Bars {
                groups: vec!["p50".into(), "p99".into()],
            },
            series: vec![
                Series {
                    name: "ours".into(),
                    values: vec![(0.0, 1.0), (1.0, 2.0)],
                },
                Series {
                    name: "<Node>".into(),
                    values: vec![(0.0, f64::NAN), (1.0, 3.0)],
                },
            ],
        };
        let svg = chart.svg();
        assert!(svg.contains("ours &amp; Node"));
        assert!(svg.contains("&lt;Node&gt;: 3<"));
        // Three bars: the missing figure draws none.
        assert_eq!(svg.matches("<title>").count(), 3);
    }
}
