//! Dynamic time warping and the projection of centroid change points onto
//! each column (model vignette §12.1, step 5).
//!
//! The original calls R's dtw package with a slope-constrained step pattern
//! (`symmetricP05`); see model vignette §16. We
//! use the standard symmetric step pattern (`symmetric2`) in pure Rust: no
//! slope constraint, diagonal steps weighted 2, horizontal and vertical
//! steps weighted 1, absolute-difference local cost.

/// An optimal alignment of a query series x (index i) to a reference y (index j).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Alignment {
    /// Cumulative cost g(n−1, m−1) of the optimal path (not normalised).
    pub(crate) distance: f64,
    /// (i, j) pairs from (0, 0) to (n−1, m−1), both indices non-decreasing.
    pub(crate) path: Vec<(usize, usize)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Start,
    /// From (i−1, j−1), weight 2.
    Diagonal,
    /// From (i, j−1): the reference advances, weight 1.
    Reference,
    /// From (i−1, j): the query advances, weight 1.
    Query,
}

/// DTW with the symmetric2 step pattern:
///
/// g(0,0) = d(0,0);
/// g(i,j) = min(g(i−1,j−1) + 2·d(i,j), g(i,j−1) + d(i,j), g(i−1,j) + d(i,j)),
///
/// d(i,j) = |x_i − y_j|. Ties prefer the diagonal, then the reference step,
/// then the query step (the order of R `dtw`'s pattern list, whose
/// `which.min` takes the first minimum). Errors on empty or non-finite input.
pub(crate) fn align(query: &[f64], reference: &[f64]) -> Result<Alignment, String> {
    let (n, m) = (query.len(), reference.len());
    if n == 0 || m == 0 {
        return Err("DTW needs two non-empty series".into());
    }
    if !query.iter().chain(reference).all(|v| v.is_finite()) {
        return Err("DTW series must be finite".into());
    }
    let mut cost = vec![0.0; n * m];
    let mut step = vec![Step::Start; n * m];
    for (i, &x) in query.iter().enumerate() {
        for (j, &y) in reference.iter().enumerate() {
            let local = (x - y).abs();
            let at = i * m + j;
            if i == 0 && j == 0 {
                cost[at] = local;
                continue;
            }
            // (allowed, step, predecessor, weight), in tie-breaking order.
            let candidates = [
                (
                    i > 0 && j > 0,
                    Step::Diagonal,
                    (i.max(1) - 1) * m + j.max(1) - 1,
                    2.0,
                ),
                (j > 0, Step::Reference, i * m + j.max(1) - 1, 1.0),
                (i > 0, Step::Query, (i.max(1) - 1) * m + j, 1.0),
            ];
            let mut best = (f64::INFINITY, Step::Start);
            for (allowed, kind, predecessor, weight) in candidates {
                let total = cost[predecessor] + weight * local;
                if allowed && total < best.0 {
                    best = (total, kind);
                }
            }
            cost[at] = best.0;
            step[at] = best.1;
        }
    }
    let mut path = Vec::with_capacity(n + m);
    let (mut i, mut j) = (n - 1, m - 1);
    loop {
        path.push((i, j));
        match step[i * m + j] {
            Step::Start => break,
            Step::Diagonal => {
                i -= 1;
                j -= 1;
            }
            Step::Reference => j -= 1,
            Step::Query => i -= 1,
        }
    }
    path.reverse();
    Ok(Alignment {
        distance: cost[n * m - 1],
        path,
    })
}

/// R's `round`: halves go to the even neighbour.
fn round_half_even(value: f64) -> f64 {
    value.round_ties_even()
}

/// Projects change points of the reference (1-based positions) onto the
/// query: each becomes round(mean of the 1-based query positions aligned
/// to it), rounding halves to even as R does. NaN entries of either series
/// are read as 1, as the original reads NA.
pub(crate) fn project_change_points(
    query: &[f64],
    reference: &[f64],
    reference_points: &[usize],
) -> Result<Vec<usize>, String> {
    let clean = |series: &[f64]| -> Vec<f64> {
        series
            .iter()
            .map(|&v| if v.is_nan() { 1.0 } else { v })
            .collect()
    };
    let alignment = align(&clean(query), &clean(reference))?;
    reference_points
        .iter()
        .map(|&point| {
            if point == 0 || point > reference.len() {
                return Err(format!(
                    "change point {point} is outside 1..={}",
                    reference.len()
                ));
            }
            let (sum, count) = alignment
                .path
                .iter()
                .filter(|&&(_, j)| j == point - 1)
                .fold((0.0, 0usize), |(sum, count), &(i, _)| {
                    (sum + (i + 1) as f64, count + 1)
                });
            // Every reference index appears on a full DTW path, so count ≥ 1.
            Ok(round_half_even(sum / count.max(1) as f64) as usize)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_by_two_example() {
        // x = [0, 1, 2], y = [0, 2]; d = |x_i − y_j|:
        //        j=0  j=1
        //   i=0   0    2
        //   i=1   1    1
        //   i=2   2    0
        // g(0,0)=0; g(0,1)=0+2=2; g(1,0)=0+1=1;
        // g(1,1)=min(0+2·1, 1+1, 2+1)=2 (diagonal wins the tie);
        // g(2,0)=1+2=3; g(2,1)=min(1+2·0, 3+0, 2+0)=1 (diagonal).
        // Back from (2,1): diagonal → (1,0), query step → (0,0).
        let alignment = align(&[0.0, 1.0, 2.0], &[0.0, 2.0]).unwrap();
        assert_eq!(alignment.distance, 1.0);
        assert_eq!(alignment.path, vec![(0, 0), (1, 0), (2, 1)]);
    }

    #[test]
    fn shifted_step_example() {
        // x = [0, 0, 5, 5] steps at index 2, y = [0, 5, 5, 5] at index 1.
        // Cumulative costs g(i, j) (choice in brackets: D, R = j−1, Q = i−1):
        //   i=0:  0      5 [R]   10 [R]   15 [R]
        //   i=1:  0 [Q]  5 [R]   10 [R]   15 [R]
        //   i=2:  5 [Q]  0 [D]    0 [R]    0 [R]
        //   i=3: 10 [Q]  0 [Q]    0 [D]    0 [D]
        // Back from (3,3): D → (2,2), R → (2,1), D → (1,0), Q → (0,0).
        let x = [0.0, 0.0, 5.0, 5.0];
        let y = [0.0, 5.0, 5.0, 5.0];
        let alignment = align(&x, &y).unwrap();
        assert_eq!(alignment.distance, 0.0);
        assert_eq!(alignment.path, vec![(0, 0), (1, 0), (2, 1), (2, 2), (3, 3)]);
        // The reference step at bin 2 lands on the query step at bin 3;
        // reference bin 1 is aligned with query bins 1 and 2 → mean 1.5 → 2.
        assert_eq!(project_change_points(&x, &y, &[2]).unwrap(), vec![3]);
        assert_eq!(project_change_points(&x, &y, &[1]).unwrap(), vec![2]);
        // Reference bin 4 aligns with query bin 4 only.
        assert_eq!(project_change_points(&x, &y, &[4]).unwrap(), vec![4]);
    }

    #[test]
    fn halves_round_to_even_like_r() {
        // x = [1, 1, 1, 1], y = [1]: all four query bins align with bin 1,
        // mean 2.5 → 2.
        let x = [1.0; 4];
        assert_eq!(project_change_points(&x, &[1.0], &[1]).unwrap(), vec![2]);
        // Equal series align on the diagonal.
        let s = [0.0, 3.0, 1.0];
        assert_eq!(align(&s, &s).unwrap().path, vec![(0, 0), (1, 1), (2, 2)]);
    }

    #[test]
    fn nan_reads_as_one_and_bad_input_is_an_error() {
        let x = [f64::NAN, 1.0];
        let y = [1.0, 1.0];
        assert_eq!(project_change_points(&x, &y, &[2]).unwrap(), vec![2]);
        assert!(project_change_points(&x, &y, &[3]).is_err());
        assert!(project_change_points(&x, &y, &[0]).is_err());
        assert!(align(&[], &[1.0]).is_err());
        assert!(align(&[f64::INFINITY], &[1.0]).is_err());
    }
}
