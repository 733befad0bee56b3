//! `--plot`: the store and loader figures as one SVG bar chart (two panels).

use std::path::Path;

use plotters::prelude::*;

use crate::report::Report;

/// One panel: a bar per `(label, value)`.
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    unit: &str,
    bars: &[(String, f64)],
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let top = bars.iter().map(|b| b.1).fold(1.0, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(90)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..bars.len() as f64, 0f64..top)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(bars.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - x.floor() - 0.5).abs() < 0.01 {
                bars.get(i).map_or_else(String::new, |b| b.0.clone())
            } else {
                String::new()
            }
        })
        .x_label_style(("sans-serif", 11).into_font().transform(FontTransform::Rotate90))
        .y_desc(unit)
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
            Rectangle::new([(i as f64 + 0.15, 0.0), (i as f64 + 0.85, *v)], Palette99::pick(i).filled())
        }))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}

/// Draws store random-gather MiB/s (smallest record size) and loader batches/s into `path`.
///
/// # Errors
/// Writing the file.
pub(crate) fn draw(report: &Report, path: &Path) -> anyhow::Result<()> {
    let store_wl = report
        .rows
        .iter()
        .find(|r| r.layer == "store" && r.workload.contains("gather random"))
        .map(|r| r.workload.clone());
    let pick = |layer: &str, wl: Option<&str>, unit: &str| -> Vec<(String, f64)> {
        report
            .rows
            .iter()
            .filter(|r| r.layer == layer && Some(r.workload.as_str()) == wl && r.unit == unit)
            .map(|r| (r.name.clone(), r.value))
            .collect()
    };
    let store = pick("store", store_wl.as_deref(), "MiB/s");
    let loader_wl = report.rows.iter().find(|r| r.layer == "loader").map(|r| r.workload.clone());
    let loader = pick("loader", loader_wl.as_deref(), "batches/s");
    let root = SVGBackend::new(path, (1100, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (left, right) = root.split_horizontally(640);
    if !store.is_empty() {
        panel(&left, &format!("store: {}", store_wl.unwrap_or_default()), "MiB/s", &store)?;
    }
    if !loader.is_empty() {
        panel(&right, "loader: batches/s", "batches/s", &loader)?;
    }
    root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}
