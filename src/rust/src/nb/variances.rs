//! The random-effect variances' updates between Newton fits (model vignette
//! §13.2): the Laplace-EM step σ² ← (Σ_r û_r² + Σ_r [H⁻¹]_rr) / R and the
//! secant acceleration of its fixed point.

use super::objective::{Sigma, SpeciesProblem};
use super::settings::SIGMA_MAX;
use super::solver::NewtonOutcome;
use super::unknowns::SpeciesState;

/// The Laplace-EM update of the free standard deviations.
pub(super) fn variance_update(
    problem: &SpeciesProblem,
    state: &SpeciesState,
    outcome: &NewtonOutcome,
    sigma: Sigma,
) -> Option<Sigma> {
    let inverse = outcome.inverse_diagonal.as_ref()?;
    let layout = &problem.layout;
    let animals = layout.animals as f64;
    let mut next = sigma;
    for w in 0..3 {
        if sigma[w] == 0.0 {
            continue;
        }
        let total: f64 = layout
            .u_index
            .iter()
            .zip(&state.u)
            .map(|(indices, u)| u[w] * u[w] + indices[w].map_or(0.0, |i| inverse[i]))
            .sum();
        next[w] = (total / animals).sqrt();
    }
    Some(next)
}

/// Accelerates the Laplace-EM updates of the standard deviations.
///
/// EM moves t = ln σ² to its update t_EM; the fixed point has t_EM − t = 0.
/// Where the data say little about a variance (near 0, or a warp that moves
/// little), EM crawls: each step moves t by a nearly constant amount. So
/// each component takes a secant step on t_EM − t once it has two points
/// whose displacement shrinks towards the root, and otherwise a step that
/// doubles with every update that keeps EM's direction; steps are limited
/// to 3 in t (a factor of e^1.5 in σ).
#[derive(Clone, Debug, Default)]
pub(super) struct VarianceSecant {
    previous: Option<([f64; 3], [f64; 3])>,
    /// Updates in a row that moved each component the same way.
    streak: [u32; 3],
}

impl VarianceSecant {
    pub(super) fn step(&mut self, sigma: Sigma, expectation: Sigma) -> Sigma {
        let mut t = [0.0; 3];
        let mut displacement = [0.0; 3];
        let mut next = [0.0; 3];
        for w in 0..3 {
            if sigma[w] <= 0.0 {
                continue;
            }
            t[w] = (sigma[w] * sigma[w]).ln();
            displacement[w] = (expectation[w] * expectation[w]).ln() - t[w];
            let mut proposal = displacement[w];
            if let Some((t_old, d_old)) = self.previous {
                let same_way = displacement[w] * d_old[w] > 0.0;
                self.streak[w] = if same_way { self.streak[w] + 1 } else { 0 };
                let slope = (displacement[w] - d_old[w]) / (t[w] - t_old[w]);
                let secant = -displacement[w] / slope;
                if slope.is_finite() && slope < 0.0 && secant * displacement[w] > 0.0 {
                    proposal = secant;
                } else if same_way {
                    proposal *= f64::from(2u32.pow(self.streak[w].min(6)));
                }
            }
            next[w] = (0.5 * (t[w] + proposal.clamp(-3.0, 3.0)))
                .exp()
                .min(SIGMA_MAX);
        }
        self.previous = Some((t, displacement));
        next
    }
}
