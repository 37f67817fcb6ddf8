//! One bootstrap replicate of a count fit, the parametric replicate of a
//! likelihood-ratio test, and the count plan as the bootstrap sees it
//! (model vignette §14, §15.4).

use super::layout::CountLayout;
use super::pipeline::{fit_all, summarise, CountEstimate, CountPlan};
use super::redraw::redraw;
use crate::design::ParameterRole;
use crate::outcome::FitSummary;
use crate::resample::{ReplicatePlan, Resampling};
use crate::streams::{replicate_redraw_stream, TaskStream};

/// Replicate `replicate` of the bootstrap seeded with `seed`: the data
/// redrawn by `scheme`, the structure kept, the fit started from the
/// full-data estimate.
pub(crate) fn run_replicate(
    plan: &CountPlan,
    scheme: Resampling,
    seed: u64,
    replicate: usize,
) -> Result<FitSummary, String> {
    crate::streams::check_replicate_number(replicate)?;
    if scheme == Resampling::Cells
        && plan.model.table().exposure_kind() == super::table::Exposure::Given
    {
        return Err(
            "resample = \"cells\" redraws each bin's cells, but a binned table has only their \
             sums; use resample = \"parametric\" or \"animals\", or fit the tokens of \
             wisp_bin(..., format = \"tokens\")"
                .into(),
        );
    }
    let started = std::time::Instant::now();
    let mut model = plan.model.clone();
    let mut stream = TaskStream::new(seed, replicate_redraw_stream(replicate));
    redraw(&mut model, &plan.estimate, scheme, &mut stream);
    let estimate = fit_all(
        &model,
        Some(&plan.detected),
        Some(&plan.estimate),
        &plan.settings,
    )?;
    Ok(summarise(&model, &estimate)?.into_fit_summary(started.elapsed().as_secs_f64()))
}

/// Replicate `replicate` of the parametric bootstrap of a likelihood-ratio
/// test (model vignette §15.4): counts drawn from the `reduced` fit (its
/// random effects and counts, as the parametric scheme draws them, stream
/// 2r of `seed`), fitted by the reduced model from its estimate and by the
/// `full` model from that replicate's reduced fit (feasible for the full
/// model, so its likelihood is at least as high but for the priors).
/// Returns, per species, −ℓ of the reduced and of the full fit (species
/// are independent, so each gene's pair is that gene's replicate).
pub(crate) fn likelihood_ratio_replicate(
    reduced: &CountPlan,
    full: &CountPlan,
    seed: u64,
    replicate: usize,
) -> Result<(Vec<f64>, Vec<f64>), String> {
    crate::streams::check_replicate_number(replicate)?;
    check_nested(reduced, full)?;
    let mut model = reduced.model.clone();
    let mut stream = TaskStream::new(seed, replicate_redraw_stream(replicate));
    redraw(
        &mut model,
        &reduced.estimate,
        Resampling::Parametric,
        &mut stream,
    );
    let reduced_fit = fit_all(
        &model,
        Some(&reduced.detected),
        Some(&reduced.estimate),
        &reduced.settings,
    )?;
    let mut full_model = full.model.clone();
    *full_model.table_mut() = model.table().clone();
    let full_fit = fit_all(
        &full_model,
        Some(&full.detected),
        Some(&reduced_fit),
        &full.settings,
    )?;
    let nll = |estimate: &CountEstimate| {
        estimate
            .species
            .iter()
            .map(|f| f.negative_log_likelihood)
            .collect::<Vec<f64>>()
    };
    Ok((nll(&reduced_fit), nll(&full_fit)))
}

/// Checks that `reduced` is `full` with more effects held at 0: the same
/// data, design, structure and settings.
pub(crate) fn check_nested(reduced: &CountPlan, full: &CountPlan) -> Result<(), String> {
    let (r, f) = (&reduced.model, &full.model);
    if r.table() != f.table() || r.design() != f.design() {
        return Err("the two fits are not of the same data and design".into());
    }
    if r.structure() != f.structure() {
        return Err(
            "the two fits have different numbers of transitions; fit the reduced model \
             with the full model's (degrees = full$degrees)"
                .into(),
        );
    }
    if reduced.settings != full.settings {
        return Err("the two fits were made with different model settings".into());
    }
    let held = r.held_effects();
    if !f.held_effects().iter().all(|e| held.contains(e)) || held.len() <= f.held_effects().len() {
        return Err(
            "the reduced model must hold at 0 every effect the full model holds, and more".into(),
        );
    }
    Ok(())
}

impl ReplicatePlan for CountPlan {
    fn likelihood(&self) -> &'static str {
        "nb"
    }

    /// The names of the reported values (see [`CountLayout`]).
    fn parameter_names(&self) -> Vec<String> {
        CountLayout::new(self.model.design(), self.model.structure())
            .map(|layout| layout.names(self.model.design()))
            .unwrap_or_default()
    }

    fn parameter_roles(&self) -> Result<Vec<ParameterRole>, String> {
        let design = self.model.design();
        Ok(crate::design::ParameterLayout::new(design, self.model.structure())?.roles())
    }

    fn animal_groups(&self) -> Vec<usize> {
        super::redraw::animal_groups(&self.model)
    }

    fn run_replicate(
        &self,
        scheme: Resampling,
        seed: u64,
        replicate: usize,
    ) -> Result<FitSummary, String> {
        run_replicate(self, scheme, seed, replicate)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::fitted_plan;
    use super::*;

    #[test]
    fn a_replicate_depends_only_on_seed_and_number_and_differs_from_the_estimate() {
        let plan = fitted_plan(8);
        let full = summarise(&plan.model, &plan.estimate).unwrap();
        assert!(full.converged, "{full:?}");
        let a = run_replicate(&plan, Resampling::Cells, 42, 3).unwrap();
        let b = run_replicate(&plan, Resampling::Cells, 42, 3).unwrap();
        let c = run_replicate(&plan, Resampling::Cells, 42, 4).unwrap();
        // Bitwise the same fit (only the timing differs).
        assert_eq!(a.parameters, b.parameters);
        assert_eq!(
            (a.objective, a.nll, a.iterations),
            (b.objective, b.nll, b.iterations)
        );
        assert_ne!(a.parameters, c.parameters);
        assert_ne!(a.parameters, full.parameters);
        assert!(a.converged && c.converged);
        assert!(run_replicate(&plan, Resampling::Cells, 42, 0).is_err());
    }
}
