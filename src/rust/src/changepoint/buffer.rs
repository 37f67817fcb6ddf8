//! Buffer enforcement of projected change points (model vignette §12.1,
//! step 6) and the per-treatment averages that become the initial tpoints
//! (step 7).
//!
//! Positions live on the 1-based bin axis throughout, the axis the tpoints
//! use (model vignette §5). The original subtracts 1 after the DTW
//! projection, enforces the buffer on those 0-based indices and then uses
//! them unchanged as tpoints, so every tpoint sits one bin early (model
//! vignette §16, "Structure"). We keep the 1-based positions and state the
//! limits where they matter, as tpoints: the boundary penalty (model vignette
//! §11.1) needs p₁ − 0, B − p_d and every consecutive gap to exceed the
//! buffer, i.e. for whole bins p₁ ≥ buffer + 1, p_d ≤ B − buffer − 1 and
//! gaps ≥ buffer + 1. These are exactly the original's numbers (first moved
//! up to buffer + 1, collisions from n − buffer − 1), which the original
//! meant as tpoints.

/// The admissible tpoint range for a bin axis 1..=B and a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BufferLimits {
    pub(crate) buffer: usize,
    /// Smallest admissible position, buffer + 1.
    pub(crate) lowest: usize,
    /// Largest admissible position, B − buffer − 1 (0 when none fits).
    pub(crate) highest: usize,
}

impl BufferLimits {
    pub(crate) fn new(bins: usize, buffer: usize) -> Self {
        Self {
            buffer,
            lowest: buffer + 1,
            highest: bins.saturating_sub(buffer + 1),
        }
    }

    /// Whether any position is admissible at all.
    pub(crate) fn has_room(&self) -> bool {
        self.highest >= self.lowest
    }
}

/// Enforces the buffer on one column's change points (ordered as found),
/// adjusting them in place; returns which rows must be removed.
///
/// The original's rules, on the 1-based axis:
/// - the first point is moved up to at least `lowest`;
/// - a later point k "collides" when its gap to the previous point is ≤ 0 or
///   it lies at ≥ `highest`; if k is the last row and `highest` is more than
///   a buffer above the previous point, it is placed at `highest`, otherwise
///   row k is marked for removal;
/// - else, a gap ≤ buffer moves it to previous + buffer + 1.
///
/// Deviations (model vignette §16, "Structure"), each because the original
/// could leave an infeasible start point:
/// - "previous" is the previous point still kept in this column (the original
///   compares with row k − 1 even when that row was marked);
/// - a point pushed past `highest` by the move is marked instead of kept;
/// - a first point above `highest` is placed at `highest` (the original never
///   checks the first point's upper end);
/// - without any admissible position every row is marked.
pub(crate) fn enforce_column(points: &mut [usize], limits: BufferLimits) -> Vec<bool> {
    let count = points.len();
    let mut marked = vec![false; count];
    if !limits.has_room() {
        marked.fill(true);
        return marked;
    }
    let mut previous: Option<usize> = None;
    for k in 0..count {
        let mut position = points[k];
        let keep = match previous {
            None => {
                position = position.max(limits.lowest).min(limits.highest);
                true
            }
            Some(prev) => {
                let is_last = k + 1 == count;
                if position <= prev || position >= limits.highest {
                    let room_at_end = limits.highest > prev + limits.buffer;
                    if is_last && room_at_end {
                        position = limits.highest;
                        true
                    } else {
                        false
                    }
                } else if position - prev <= limits.buffer {
                    position = prev + limits.buffer + 1;
                    position <= limits.highest
                } else {
                    true
                }
            }
        };
        if keep {
            points[k] = position;
            previous = Some(position);
        } else {
            marked[k] = true;
        }
    }
    marked
}

/// Change points after buffer enforcement: one row per transition.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BufferedPoints {
    /// Indices (into the input rows) of the transitions kept.
    pub(crate) kept_rows: Vec<usize>,
    /// Per column, the kept rows' positions (1-based bins).
    pub(crate) columns: Vec<Vec<usize>>,
}

impl BufferedPoints {
    /// The degree d: the number of transitions left.
    pub(crate) fn degree(&self) -> usize {
        self.kept_rows.len()
    }
}

/// Enforces the buffer on every column (each holding the same d rows), then
/// removes every row marked in any column from all columns (model vignette
/// §12.1, step 6).
pub(crate) fn enforce_buffer(
    columns: &[Vec<usize>],
    bins: usize,
    buffer: usize,
) -> Result<BufferedPoints, String> {
    let rows = columns.first().map_or(0, Vec::len);
    if let Some(bad) = columns.iter().position(|c| c.len() != rows) {
        return Err(format!(
            "column {bad} has {} change points, column 0 has {rows}",
            columns[bad].len()
        ));
    }
    let limits = BufferLimits::new(bins, buffer);
    let mut adjusted = columns.to_vec();
    let mut removed = vec![false; rows];
    for column in &mut adjusted {
        for (row, marked) in enforce_column(column, limits).into_iter().enumerate() {
            removed[row] |= marked;
        }
    }
    let kept_rows: Vec<usize> = (0..rows).filter(|&row| !removed[row]).collect();
    let columns = adjusted
        .iter()
        .map(|column| kept_rows.iter().map(|&row| column[row]).collect())
        .collect();
    Ok(BufferedPoints { kept_rows, columns })
}

/// Per-treatment change points (model vignette §12.1, step 7): per treatment,
/// the mean over that treatment's kept columns of each change point.
/// `column_treatments[i]` is the treatment of column i. A treatment without
/// any complete column (the original: 0/0 = NaN) gets the mean over all
/// columns instead.
pub(crate) fn treatment_means(
    points: &BufferedPoints,
    column_treatments: &[usize],
    treatments: usize,
) -> Result<Vec<Vec<f64>>, String> {
    if column_treatments.len() != points.columns.len() {
        return Err(format!(
            "{} column treatments for {} columns",
            column_treatments.len(),
            points.columns.len()
        ));
    }
    if let Some(&bad) = column_treatments.iter().find(|&&t| t >= treatments) {
        return Err(format!("treatment {bad} out of range ({treatments})"));
    }
    let degree = points.degree();
    let mean_over = |filter: &dyn Fn(usize) -> bool| -> Option<Vec<f64>> {
        let chosen: Vec<&Vec<usize>> = points
            .columns
            .iter()
            .enumerate()
            .filter(|&(i, _)| filter(i))
            .map(|(_, column)| column)
            .collect();
        (!chosen.is_empty()).then(|| {
            (0..degree)
                .map(|k| chosen.iter().map(|c| c[k] as f64).sum::<f64>() / chosen.len() as f64)
                .collect()
        })
    };
    let overall = mean_over(&|_| true);
    (0..treatments)
        .map(|t| {
            mean_over(&|i| column_treatments[i] == t)
                .or_else(|| overall.clone())
                .ok_or_else(|| "no complete series to average change points over".to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// B = 100, buffer 5: admissible positions 6..=94.
    fn limits() -> BufferLimits {
        BufferLimits::new(100, 5)
    }

    #[test]
    fn limits_follow_the_boundary_penalty() {
        let l = limits();
        assert_eq!((l.lowest, l.highest), (6, 94));
        // As tpoints: 6 − 0 − 5 = 1 > 0 and 100 − 94 − 5 = 1 > 0.
        assert!(!BufferLimits::new(11, 5).has_room());
        assert!(BufferLimits::new(12, 5).has_room());
    }

    #[test]
    fn first_point_is_moved_up() {
        let mut points = vec![2, 40];
        assert_eq!(enforce_column(&mut points, limits()), vec![false, false]);
        assert_eq!(points, vec![6, 40]);
    }

    #[test]
    fn too_close_points_are_pushed_one_buffer_apart() {
        let mut points = vec![30, 35, 60];
        assert_eq!(enforce_column(&mut points, limits()), vec![false; 3]);
        assert_eq!(points, vec![30, 36, 60]);
        // The push cascades: 31 → 36, then 37 is 1 past 36 → 42.
        let mut points = vec![30, 31, 37];
        enforce_column(&mut points, limits());
        assert_eq!(points, vec![30, 36, 42]);
    }

    #[test]
    fn a_collision_in_the_middle_removes_the_row() {
        let mut points = vec![30, 33, 36, 60];
        let marked = enforce_column(&mut points, limits());
        // Row 1 moves to 36; row 2 (36) has gap 0 to it → removed; row 3 compares with 36.
        assert_eq!(marked, vec![false, false, true, false]);
        assert_eq!(points[3], 60);
    }

    #[test]
    fn a_collision_at_the_end_is_placed_at_the_last_admissible_bin() {
        let mut points = vec![40, 97];
        assert_eq!(enforce_column(&mut points, limits()), vec![false, false]);
        assert_eq!(points, vec![40, 94]);
        // No room: 94 − 90 = 4 ≤ buffer → removed.
        let mut points = vec![90, 97];
        assert_eq!(enforce_column(&mut points, limits()), vec![false, true]);
        // Not the last row: removed even with room; the next one then takes its place.
        let mut points = vec![40, 95, 99];
        assert_eq!(
            enforce_column(&mut points, limits()),
            vec![false, true, false]
        );
        assert_eq!(points[2], 94);
    }

    #[test]
    fn a_move_past_the_end_is_removed_and_a_late_first_point_clamped() {
        // 92 − 90 = 2 ≤ 5 → 96 > 94: removed instead of left infeasible.
        let mut points = vec![60, 90, 92];
        let marked = enforce_column(&mut points, limits());
        assert_eq!(marked, vec![false, false, true]);
        let mut points = vec![98];
        assert_eq!(enforce_column(&mut points, limits()), vec![false]);
        assert_eq!(points, vec![94]);
        let mut points = vec![5, 6];
        let tiny = BufferLimits::new(10, 5);
        assert_eq!(enforce_column(&mut points, tiny), vec![true, true]);
    }

    #[test]
    fn rows_marked_anywhere_are_removed_everywhere() {
        let columns = vec![vec![20, 50, 80], vec![22, 52, 53]];
        let buffered = enforce_buffer(&columns, 100, 5).unwrap();
        // Column 1: 53 is last, gap 1 → moved to 58 (fits). Nothing removed.
        assert_eq!(buffered.kept_rows, vec![0, 1, 2]);
        assert_eq!(buffered.columns[1], vec![22, 52, 58]);

        let columns = vec![vec![20, 50, 80], vec![22, 24, 26]];
        let buffered = enforce_buffer(&columns, 100, 5).unwrap();
        // Column 1: 24 → 28; 26 ≤ 28 is a collision, last row, room → 94.
        assert_eq!(buffered.columns[1], vec![22, 28, 94]);
        assert_eq!(buffered.degree(), 3);

        let columns = vec![vec![20, 50, 80], vec![22, 40, 30, 85]];
        assert!(enforce_buffer(&columns, 100, 5).is_err());
        let columns = vec![vec![20, 50, 80, 90], vec![22, 40, 30, 85]];
        let buffered = enforce_buffer(&columns, 100, 5).unwrap();
        // Column 1 drops row 2 (30 ≤ 40); column 0 drops row 3 (90 − 80 > 5 but
        // 90 < 94: kept) — so only row 2 goes.
        assert_eq!(buffered.kept_rows, vec![0, 1, 3]);
        assert_eq!(buffered.columns, vec![vec![20, 50, 90], vec![22, 40, 85]]);
    }

    #[test]
    fn treatment_means_average_over_ran_levels() {
        let points = BufferedPoints {
            kept_rows: vec![0, 1],
            columns: vec![vec![10, 40], vec![12, 44], vec![20, 60]],
        };
        let means = treatment_means(&points, &[0, 0, 1], 3).unwrap();
        assert_eq!(means[0], vec![11.0, 42.0]);
        assert_eq!(means[1], vec![20.0, 60.0]);
        // Treatment 2 has no complete column: the overall mean.
        assert_eq!(means[2], vec![14.0, 48.0]);
        assert!(treatment_means(&points, &[0, 3, 1], 3).is_err());
        assert!(treatment_means(&points, &[0], 3).is_err());
    }
}
