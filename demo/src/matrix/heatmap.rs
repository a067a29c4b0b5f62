//! `--matrix --plot`: a heatmap of every cell, the users' success on the left (coloured by how
//! far it falls short of the fault's physical limit) and db's worst second on the right.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::Matrix;
use crate::chain::Result;

const CELL: (i32, i32) = (62, 26);
const LABELS: i32 = 170;
const TOP: i32 = 80;
/// Wide enough for a panel's title.
const MIN_PANEL: i32 = 520;

/// Draws `matrix` to the SVG at `path`.
pub(super) fn draw(path: &Path, matrix: &Matrix) -> Result<()> {
    let columns = matrix.faults.len() as i32;
    let stacks: Vec<&str> = matrix
        .faults
        .first()
        .map(|row| row.cells.iter().map(|cell| cell.stack.name()).collect())
        .unwrap_or_default();
    let rows = stacks.len() as i32 + 1;
    let panel = (LABELS + columns * CELL.0 + 20).max(MIN_PANEL);
    let size = (
        u32::try_from(2 * panel).unwrap_or(0),
        u32::try_from(TOP + rows * CELL.1 + 40).unwrap_or(0),
    );
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(panel);

    let success: Vec<Vec<(String, RGBColor)>> = matrix
        .faults
        .iter()
        .map(|row| {
            let mut column = vec![(format!("{:.1}", row.limit.run * 100.0), LIMIT)];
            column.extend(row.cells.iter().map(|cell| {
                let short = (row.limit.run - cell.success_rate).max(0.0) * 100.0;
                let best = if row.best.contains(&cell.stack) {
                    "*"
                } else {
                    ""
                };
                (
                    format!("{:.1}{best}", cell.success_rate * 100.0),
                    shade(short / 20.0),
                )
            }));
            column
        })
        .collect();
    panel_of(
        &left,
        (
            "users' calls served, % of the run",
            "colour: points short of the physical limit, 0 to 20+",
        ),
        matrix,
        &stacks,
        &success,
    )?;

    let load: Vec<Vec<(String, RGBColor)>> = matrix
        .faults
        .iter()
        .map(|row| {
            let mut column = vec![("-".to_owned(), LIMIT)];
            column.extend(row.cells.iter().map(|cell| {
                let worst = cell
                    .worst_db_second
                    .as_ref()
                    .map_or(0.0, |worst| worst.multiple_of_baseline);
                (format!("{worst:.2}×"), shade((worst - 1.0) / 3.0))
            }));
            column
        })
        .collect();
    panel_of(
        &right,
        (
            "db's worst second, × the users' calls",
            "colour: 1× to 4× and more",
        ),
        matrix,
        &stacks,
        &load,
    )?;
    root.present()?;
    Ok(())
}

/// The colour of the limit's row.
const LIMIT: RGBColor = RGBColor(225, 225, 225);

/// Green at 0, through yellow, to red at 1 and beyond.
fn shade(badness: f64) -> RGBColor {
    let t = badness.clamp(0.0, 1.0);
    let (r, g) = if t < 0.5 {
        (120.0 + 270.0 * t, 200.0)
    } else {
        (255.0, 200.0 - 300.0 * (t - 0.5))
    };
    RGBColor(r.min(255.0) as u8, g.max(60.0) as u8, 110)
}

/// One panel: the fault names along the top, the limit and the stacks down the side, a
/// coloured cell each.
fn panel_of(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    (title, legend): (&str, &str),
    matrix: &Matrix,
    stacks: &[&str],
    columns: &[Vec<(String, RGBColor)>],
) -> Result<()> {
    let font = ("sans-serif", 13).into_font();
    area.draw(&Text::new(title.to_owned(), (10, 12), ("sans-serif", 15)))?;
    area.draw(&Text::new(legend.to_owned(), (10, 32), ("sans-serif", 12)))?;
    let centred = font
        .clone()
        .into_text_style(area)
        .pos(Pos::new(HPos::Center, VPos::Center));
    for (x, row) in matrix.faults.iter().enumerate() {
        let left = LABELS + x as i32 * CELL.0;
        area.draw(&Text::new(
            row.fault.name().to_owned(),
            (left + CELL.0 / 2, TOP - 14),
            centred.clone(),
        ))?;
    }
    let names = std::iter::once("physical limit").chain(stacks.iter().copied());
    for (y, name) in names.enumerate() {
        let top = TOP + y as i32 * CELL.1;
        area.draw(&Text::new(
            name.to_owned(),
            (10, top + CELL.1 / 2 - 6),
            font.clone(),
        ))?;
        for (x, column) in columns.iter().enumerate() {
            let Some((label, colour)) = column.get(y) else {
                continue;
            };
            let left = LABELS + x as i32 * CELL.0;
            area.draw(&Rectangle::new(
                [(left, top), (left + CELL.0 - 2, top + CELL.1 - 2)],
                colour.filled(),
            ))?;
            area.draw(&Text::new(
                label.clone(),
                (left + CELL.0 / 2, top + CELL.1 / 2),
                centred.clone(),
            ))?;
        }
    }
    Ok(())
}
