//! What a run produced: JSON rows for scripts and the tables printed for people.

use serde_json::{Value, json};

/// One measured figure. `baseline` names another row of the same layer, workload and unit.
pub(crate) struct Row {
    pub(crate) layer: &'static str,
    pub(crate) name: String,
    pub(crate) workload: String,
    pub(crate) value: f64,
    pub(crate) unit: &'static str,
    pub(crate) baseline: Option<String>,
    /// The median of the per-round ratios against the baseline (what the tables print); the
    /// JSON `ratio` is the plain quotient of the two medians, as the issue defines it.
    pub(crate) interleaved: Option<f64>,
}

impl Row {
    pub(crate) fn new(
        layer: &'static str,
        name: &str,
        workload: &str,
        value: f64,
        unit: &'static str,
    ) -> Row {
        Row {
            layer,
            name: name.into(),
            workload: workload.into(),
            value,
            unit,
            baseline: None,
            interleaved: None,
        }
    }

    /// Names the baseline and the interleaved ratio against it.
    pub(crate) fn vs(mut self, baseline: &str, interleaved: f64) -> Row {
        self.baseline = Some(baseline.into());
        self.interleaved = Some(interleaved);
        self
    }
}

/// A table as printed: a title, a header and rows of cells, and notes under it.
pub(crate) struct Section {
    pub(crate) title: String,
    pub(crate) header: Vec<String>,
    pub(crate) rows: Vec<Vec<String>>,
    pub(crate) notes: Vec<String>,
}

impl Section {
    pub(crate) fn new(title: impl Into<String>, header: &[&str]) -> Section {
        Section {
            title: title.into(),
            header: header.iter().map(|h| (*h).to_string()).collect(),
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Markdown: the title, a pipe table (text left, figures right), then the notes.
    pub(crate) fn render(&self) -> String {
        let mut s = format!("{}\n\n| {} |\n|", self.title, self.header.join(" | "));
        for i in 0..self.header.len() {
            s.push_str(if i == 0 { "---|" } else { "---:|" });
        }
        s.push('\n');
        for r in &self.rows {
            s.push_str(&format!("| {} |\n", r.join(" | ")));
        }
        for n in &self.notes {
            s.push_str(&format!("\n{n}\n"));
        }
        s.push('\n');
        s
    }
}

/// Every row and section of a run.
#[derive(Default)]
pub(crate) struct Report {
    pub(crate) rows: Vec<Row>,
    pub(crate) sections: Vec<Section>,
}

impl Report {
    /// Adds one row per `(value, unit)` of contender `name`, each with the interleaved ratio to
    /// `vs = (baseline, ratio)` where given.
    pub(crate) fn push_rates(
        &mut self,
        (layer, name, workload): (&'static str, &str, &str),
        rates: &[(f64, &'static str)],
        vs: Option<(&str, f64)>,
    ) {
        for &(v, unit) in rates {
            let row = Row::new(layer, name, workload, v, unit);
            self.rows.push(match vs {
                Some((b, ratio)) => row.vs(b, ratio),
                None => row,
            });
        }
    }

    /// The value of the row `name` in the same layer, workload and unit as `row`.
    fn baseline_value(&self, row: &Row, name: &str) -> Option<f64> {
        self.rows
            .iter()
            .find(|r| {
                r.layer == row.layer && r.workload == row.workload && r.unit == row.unit && r.name == name
            })
            .map(|r| r.value)
    }

    /// One JSON array of `{layer, name, workload, value, unit, baseline, ratio}`, plus
    /// `ratio_interleaved` (the median per-round ratio the tables show).
    pub(crate) fn json(&self) -> Value {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                let ratio =
                    r.baseline.as_deref().and_then(|b| self.baseline_value(r, b)).map(|b| r.value / b);
                json!({
                    "layer": r.layer,
                    "name": r.name,
                    "workload": r.workload,
                    "value": r.value,
                    "unit": r.unit,
                    "baseline": r.baseline,
                    "ratio": ratio,
                    "ratio_interleaved": r.interleaved,
                })
            })
            .collect();
        Value::Array(rows)
    }
}

/// `1234.5` as `1,235`.
pub(crate) fn thousands(v: f64) -> String {
    let s = format!("{:.0}", v.max(0.0));
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A duration in seconds, in the unit that keeps three significant digits readable.
pub(crate) fn duration(secs: f64) -> String {
    if secs < 1e-3 { format!("{:.1} µs", secs * 1e6) } else { format!("{:.2} ms", secs * 1e3) }
}

/// A speed ratio, `2.08x`.
pub(crate) fn ratio(v: f64) -> String {
    format!("{v:.2}x")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(1_234_567.4), "1,234,567");
        assert_eq!(thousands(999.0), "999");
    }

    #[test]
    fn json_ratio_is_value_over_the_named_baseline() {
        let mut r = Report::default();
        r.rows.push(Row::new("store", "memcpy", "w", 200.0, "MiB/s"));
        r.rows.push(Row::new("store", "raw", "w", 150.0, "MiB/s").vs("memcpy", 0.7));
        let j = r.json();
        assert_eq!(j[1]["ratio"], 0.75);
        assert_eq!(j[0]["ratio"], Value::Null);
    }
}
