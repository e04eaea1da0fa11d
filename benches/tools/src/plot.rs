//! The picture of a comparison: throughput per server and mix as grouped bars, and the latency
//! distribution of the paced runs as the fraction of queries slower than each latency (log-log,
//! so the tail that p99 and p99.9 describe is visible).

use plotters::prelude::*;
use std::error::Error;
use std::path::Path;

/// Bar heights: one value per group (a mix and generator) for each series (a server).
#[derive(Debug, Clone, Default)]
pub struct Bars {
    /// Group labels along the x axis.
    pub groups: Vec<String>,
    /// (server, value per group); NaN draws no bar.
    pub series: Vec<(String, Vec<f64>)>,
}

/// One server's latency curve: (latency µs, fraction of queries slower) points.
pub type Curve = (String, Vec<(f64, f64)>);

/// A latency distribution merged from the histogram files of several runs.
#[derive(Debug, Clone, Default)]
pub struct Distribution {
    /// (lowest value ns, width ns) → count, in increasing order.
    buckets: std::collections::BTreeMap<(u64, u64), u64>,
}

impl Distribution {
    /// Adds a histogram file written by `skyline-loadgen --histogram` (`low_ns,width_ns,count`).
    pub fn add_csv(&mut self, text: &str) {
        for line in text.lines().skip(1) {
            let mut f = line.split(',').map(|v| v.trim().parse::<u64>());
            if let (Some(Ok(low)), Some(Ok(width)), Some(Ok(count))) = (f.next(), f.next(), f.next()) {
                *self.buckets.entry((low, width)).or_default() += count;
            }
        }
    }

    /// (latency µs, fraction of queries slower than it) at each bucket's upper edge, leaving
    /// out the final zero that a logarithmic axis cannot show.
    pub fn exceedance(&self) -> Vec<(f64, f64)> {
        let total: u64 = self.buckets.values().sum();
        let mut seen = 0;
        let mut points = Vec::with_capacity(self.buckets.len());
        for (&(low, width), &count) in &self.buckets {
            seen += count;
            if seen < total {
                let above = (total - seen) as f64 / total as f64;
                points.push(((low + width) as f64 / 1e3, above));
            }
        }
        points
    }
}

const COLOURS: [RGBColor; 6] = [
    RGBColor(120, 120, 120),
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
];

/// A stable colour per server name, so the two panels agree.
fn colour(index: usize) -> RGBColor {
    COLOURS[index % COLOURS.len()]
}

/// Draws both panels into an SVG file at `path`. `curves` are (server, distribution) pairs,
/// coloured like the bars of the same server.
pub fn draw(
    path: &Path,
    title: &str,
    bars: &Bars,
    curves: &[Curve],
    curves_caption: &str,
) -> Result<(), Box<dyn Error>> {
    let root = SVGBackend::new(path, (1100, 900)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 22))?;
    let (top, bottom) = root.split_vertically(440);
    let index_of = |server: &str| bars.series.iter().position(|(s, _)| s == server);

    let groups = bars.groups.len().max(1);
    let ymax = bars
        .series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .filter(|v| !v.is_nan())
        .fold(0.0f64, f64::max)
        * 1.15;
    let labels = bars.groups.clone();
    let mut chart = ChartBuilder::on(&top)
        .caption("queries per second (medians), higher is better", ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..groups as f64, 0f64..ymax.max(1.0))?;
    // With room for 2n+1 labels the axis puts one every 0.5: the odd ones are group centres.
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(2 * groups + 1)
        .x_label_formatter(&|x| {
            if (x.fract() - 0.5).abs() < 1e-6 {
                labels.get(x.floor() as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|y| format!("{:.0}k", y / 1e3))
        .draw()?;
    let width = 0.8 / bars.series.len().max(1) as f64;
    for (s, (server, values)) in bars.series.iter().enumerate() {
        let c = colour(s);
        let rects = values
            .iter()
            .enumerate()
            .filter(|(_, v)| !v.is_nan())
            .map(move |(g, &v)| {
                let x0 = g as f64 + 0.1 + s as f64 * width;
                Rectangle::new([(x0, 0.0), (x0 + width * 0.92, v)], c.filled())
            });
        chart
            .draw_series(rects)?
            .label(server.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;

    let points = curves.iter().flat_map(|(_, p)| p.iter());
    let (xmin, xmax, ymin) = points.fold((f64::MAX, 0.0f64, 1.0f64), |(a, b, c), &(x, y)| {
        (a.min(x), b.max(x), c.min(y))
    });
    let (xmin, xmax) = if xmax > 0.0 {
        (xmin * 0.8, xmax * 1.25)
    } else {
        (1.0, 1e4)
    };
    let mut chart = ChartBuilder::on(&bottom)
        .caption(curves_caption, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((xmin..xmax).log_scale(), (ymin.min(1e-3) * 0.5..1.0).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("latency µs")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_desc("fraction of queries slower")
        .y_label_formatter(&|y| format!("{y:.0e}"))
        .draw()?;
    for (n, (server, p)) in curves.iter().enumerate() {
        let c = colour(index_of(server).unwrap_or(n));
        chart
            .draw_series(LineSeries::new(p.iter().copied(), c.stroke_width(2)))?
            .label(server.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_merge_and_the_tail_falls_to_the_last_bucket() {
        let mut d = Distribution::default();
        d.add_csv("low_ns,width_ns,count\n1000,8,90\n5000,64,9\n");
        d.add_csv("low_ns,width_ns,count\n1000,8,0\n90000,1024,1\n");
        let e = d.exceedance();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0], (1.008, 0.1));
        assert!((e[1].1 - 0.01).abs() < 1e-12);
    }

    #[test]
    fn a_picture_is_written() {
        let dir = std::env::temp_dir().join(format!("skyline-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.svg");
        let bars = Bars {
            groups: vec!["a/loadgen".into(), "srv/loadgen".into()],
            series: vec![
                ("echo".into(), vec![200e3, 190e3]),
                ("skyline".into(), vec![190e3, f64::NAN]),
            ],
        };
        let curves = vec![("skyline".to_string(), vec![(10.0, 0.5), (100.0, 0.01)])];
        draw(&path, "test", &bars, &curves, "latency").unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("a/loadgen") && svg.contains("srv/loadgen"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
